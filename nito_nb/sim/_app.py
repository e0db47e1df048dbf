"""The simulator's ASGI app: a thin Starlette shell around the pure scenarios of `_scenarios.py`.

It validates requests like a gateway, asks a scenario for its reply, and writes the bytes when
`schedule()` says they are due (`_sending.paced_body`). Everything about what is sent lives in
the pure modules below `_scenarios.py`; this module only reads files and speaks HTTP.

Routes (all JSON errors have the gateway's shape `{"error": {"code", "message"}}`):
- `POST /v1/chat/completions`: the scenarios; `stream: true` streams SSE, otherwise the same
  scenario is collected into one `chat.completion` object (handy for the openai SDK's
  non-streaming mode).
- `GET /v1/models`, `GET /v1/models/{id}`: the simulated models, OpenAI-style.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import os
import secrets
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ._completion import collect_completion
from ._faults import picked_to_fail
from ._pacing import Pacing, schedule
from ._replay import replay_file
from ._reply import ErrorReply, Event, Reply, error_body, error_reply
from ._request import SimRequest, parse_request, request_digest
from ._scenarios import SIM_MODELS, scenario
from ._sending import Shutdown, install_log_filter, paced_body, stamped_body

REPLAY_SUFFIXES = (".sse", ".jsonl")
OWNER = "nito_nb-sim"


def _respond(reply: ErrorReply) -> Response:
    headers = dict(reply.headers)
    if reply.content_type:
        # Set the header as is (not media_type) so that a replayed error keeps its exact type.
        headers["content-type"] = reply.content_type
    return Response(reply.body, reply.status, headers=headers)


def _json_error(status: int, message: str) -> Response:
    return _respond(error_reply(status, message))


def _model_entry(name: str, description: str) -> dict[str, Any]:
    return {
        "id": name,
        "object": "model",
        "created": 0,
        "owned_by": OWNER,
        "description": description,
    }


async def _read_replay(request: SimRequest) -> Reply:
    """The recording named by `sim.replay`, read from disk; what is sent is `replay_file`'s."""
    options = request.options
    if not options.replay:
        return error_reply(
            400, "sim/replay needs `sim.replay`: the path of a .sse recording or a nito_nb log."
        )
    path = Path(options.replay).expanduser()
    # A local development tool: it serves only regular .sse/.jsonl files, nothing else.
    if path.suffix not in REPLAY_SUFFIXES:
        return error_reply(400, f"sim.replay must name a .sse or .jsonl file, got {str(path)!r}.")
    if not path.is_file():
        return error_reply(404, f"sim.replay: no such file: {str(path)!r}.")
    body: bytes = await run_in_threadpool(path.read_bytes)
    sources_tsv = None
    sources = path.parent / "SOURCES.tsv"
    if sources.is_file():
        sources_tsv = await run_in_threadpool(sources.read_text, "utf-8")
    return replay_file(path.name, body, options, sources_tsv)


def create_app(api_key: str | None = None) -> Starlette:
    """The simulator as an ASGI app. With `api_key`, requests must carry `Bearer <api_key>`.

    `app.state.shutdown.trigger()` ends the streams in progress (cut, like a gateway going away).
    """
    install_log_filter()
    shutdown = Shutdown()
    # How many times each request picked by sim.fail_rate was answered (its digest -> count):
    # such a request fails its first sim.fail_attempts times, then goes through.
    faults_seen: dict[str, int] = {}

    def unauthorized(request: Request) -> Response | None:
        if api_key is None:
            return None
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if not header:
            return _json_error(401, "Missing Authorization header: send `Bearer <key>`.")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.strip().encode(), api_key.encode()
        ):
            return _json_error(401, "Invalid API key.")
        return None

    async def chat_completions(request: Request) -> Response:
        if (denied := unauthorized(request)) is not None:
            return denied
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError as exc:
            return _json_error(400, f"The request body is not valid JSON: {exc}.")
        parsed = parse_request(body, os.environ)
        if isinstance(parsed, ErrorReply):
            return _respond(parsed)
        if not parsed.stream:
            # The whole completion at once: the usage is always part of it.
            parsed = dataclasses.replace(parsed, include_usage=True)
        if parsed.model == "sim/replay":
            reply = await _read_replay(parsed)
        else:
            seen = 0
            if picked_to_fail(parsed):
                digest = request_digest(parsed)
                seen = faults_seen.get(digest, 0)
                faults_seen[digest] = seen + 1
            # a new id each time: the nonce goes into the completion id only
            reply = scenario(parsed, int(time.time()), secrets.token_hex(6), seen)
        if isinstance(reply, ErrorReply):
            return _respond(reply)
        options = parsed.options
        pacing = Pacing.of(options)
        if parsed.model == "sim/replay" and options.speed == 0:
            pacing = dataclasses.replace(pacing, ttft_s=0.0, tps=0.0)
        if reply.headers_delay_s:
            await shutdown.sleep(reply.headers_delay_s)
        pieces = schedule(reply.events, pacing, options.keepalive_s)
        if not parsed.stream:
            return await _completion(pieces, parsed)
        headers = {
            **reply.headers,
            "cache-control": "no-cache",
            "x-accel-buffering": "no",
        }
        if reply.content_type:
            headers["content-type"] = reply.content_type
        body = (stamped_body if parsed.options.stamp else paced_body)(pieces, shutdown)
        return StreamingResponse(body, reply.status, headers=headers)

    async def _completion(
        pieces: Iterable[tuple[float, bytes | None]], parsed: SimRequest
    ) -> Response:
        events: list[Event] = []
        last = 0.0
        for due, data in pieces:
            last = due
            events.append(Event("drop") if data is None else Event("send", data))
        # The whole generation time, as a buffering gateway would take it.
        if last > 0:
            await shutdown.sleep(last)
        result = collect_completion(events, parsed)
        if isinstance(result, ErrorReply):
            return _respond(result)
        return JSONResponse(result)

    async def list_models(request: Request) -> Response:
        if (denied := unauthorized(request)) is not None:
            return denied
        data = [_model_entry(name, text) for name, text in SIM_MODELS.items()]
        return JSONResponse({"object": "list", "data": data})

    async def get_model(request: Request) -> Response:
        if (denied := unauthorized(request)) is not None:
            return denied
        name = request.path_params["name"]
        if name not in SIM_MODELS:
            return _json_error(404, f"Model {name!r} not found.")
        return JSONResponse(_model_entry(name, SIM_MODELS[name]))

    async def root(request: Request) -> Response:
        return JSONResponse(
            {"name": OWNER, "base_url": str(request.base_url) + "v1", "models": list(SIM_MODELS)}
        )

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return Response(
            error_body(exc.status_code, exc.detail),
            exc.status_code,
            headers={"content-type": "application/json", **(exc.headers or {})},
        )

    app = Starlette(
        routes=[
            Route("/", root, methods=["GET"]),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/v1/models/{name:path}", get_model, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error},
    )
    app.state.shutdown = shutdown
    return app
