"""The simulator's ASGI app: a thin Starlette shell around the pure scenarios of `_scenarios.py`.

It validates requests like a gateway, asks a scenario for its reply, and writes the bytes when
`schedule()` says they are due (`_sending.paced_body`). Everything about what is sent lives in
the pure modules below `_scenarios.py`; this module only reads files and speaks HTTP.

Routes (all JSON errors have the gateway's shape `{"error": {"code", "message"}}`):
- `POST /v1/chat/completions`: the scenarios; `stream: true` streams SSE, otherwise the same
  scenario is collected into one `chat.completion` object (handy for the openai SDK's
  non-streaming mode).
- `GET /v1/models`, `GET /v1/models/{id}`: the simulated models, OpenAI-style.

Before any route, every request passes the guards of `_access.py` (a loopback Host, the key if
there is one, a JSON body); `sim/replay` reads only what `_files.py` allows. A request with a
capacity (sim/server, `sim.capacity`) goes to `_batching.py`: a slot, the queue, or a 429.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import time
from collections.abc import Iterable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ._access import host_refusal, key_refusal, type_refusal
from ._batching import Batches
from ._completion import collect_completion
from ._faults import picked_to_fail
from ._files import Recording, read_recording
from ._pacing import Pacing, schedule
from ._recordings import replay_file
from ._reply import ErrorReply, Event, Reply, StreamReply, error_body, error_reply, padded
from ._request import SimRequest, parse_request, request_digest
from ._scenarios import SIM_MODELS, scenario
from ._sending import Shutdown, install_log_filter, paced_body, stamped_body

OWNER = "nito_nb-sim"
#: Where a client refused for want of the key is told to find it, when whoever made the app
#: did not say (``create_app(key_hint=...)``).
KEY_HINT = "the key this simulator was started with"


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


async def _read_replay(request: SimRequest, replay_dirs: Sequence[str] | None) -> Reply:
    """The recording named by `sim.replay`, read from a replay directory (`_files.py`); what is
    sent is `replay_file`'s."""
    options = request.options
    if not options.replay:
        return error_reply(
            400, "sim/replay needs `sim.replay`: the path of a .sse recording or a nito_nb log."
        )
    found = await run_in_threadpool(read_recording, options.replay, replay_dirs, os.environ)
    if not isinstance(found, Recording):
        return found
    return replay_file(found.name, found.body, options, found.sources_tsv)


class _Guard:
    """Before any route: a Host that is not loopback (or the address listened on), a request
    without the key, a POST body that is not JSON get their refusal (`_access.py`), and the
    request goes no further (its body is never read)."""

    def __init__(self, app: ASGIApp, api_key: str | None, key_hint: str) -> None:
        self.app = app
        self.api_key = api_key
        self.key_hint = key_hint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            server = scope.get("server")  # the address this connection arrived on
            refusal = (
                host_refusal(headers.get("host"), server[0] if server else None)
                or key_refusal(headers.get("authorization"), self.api_key, self.key_hint)
                or (
                    type_refusal(headers.get("content-type")) if scope["method"] == "POST" else None
                )
            )
            if refusal is not None:
                await _respond(refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(
    api_key: str | None = None,
    *,
    key_hint: str = KEY_HINT,
    replay_dirs: Sequence[str] | None = None,
) -> Starlette:
    """The simulator as an ASGI app. With `api_key`, requests must carry `Bearer <api_key>`
    (`key_hint` says where a refused client finds it). Requests must be addressed to a loopback
    name or address (or the one the connection arrived on), and a POST must send JSON.
    `sim/replay` reads only files under `replay_dirs` (default: `NITO_SIM_REPLAY_DIRS`, else the
    working directory, at each request; `_files.py`).

    `app.state.shutdown.trigger()` ends the streams in progress (cut, like a gateway going away).
    """
    install_log_filter()
    shutdown = Shutdown()
    named_dirs = None if replay_dirs is None else tuple(replay_dirs)
    # How many times each request picked by sim.fail_rate was answered (its digest -> count):
    # such a request fails its first sim.fail_attempts times, then goes through.
    faults_seen: dict[str, int] = {}
    # The capacity models' slots and queues (sim/server, `sim.capacity`), shared by this app's
    # requests: one simulator process is one set of servers.
    batches = Batches(shutdown)

    async def chat_completions(request: Request) -> Response:
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
            reply = await _read_replay(parsed, named_dirs)
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
        if options.obfuscation:
            reply = dataclasses.replace(reply, events=padded(reply.events, options.seed))
        if options.capacity is not None:
            return await _served(parsed, reply)
        pacing = Pacing.of(options)
        if parsed.model == "sim/replay" and options.speed == 0:
            pacing = dataclasses.replace(pacing, ttft_s=0.0, tps=0.0)
        if reply.headers_delay_s:
            await shutdown.sleep(reply.headers_delay_s)
        pieces = schedule(reply.events, pacing, options.keepalive_s)
        if not parsed.stream:
            return await _completion(pieces, parsed)
        body = (stamped_body if parsed.options.stamp else paced_body)(pieces, shutdown)
        return StreamingResponse(body, reply.status, headers=_stream_headers(reply))

    async def _served(parsed: SimRequest, reply: StreamReply) -> Response:
        """A request to a server with a capacity (`_batching.py`): a slot, the queue, or 429."""
        admitted = batches.arrive(parsed)
        if isinstance(admitted, ErrorReply):
            return _respond(admitted)
        if parsed.stream:
            return batches.stream(admitted, parsed, reply, _stream_headers(reply))
        result = await batches.complete(admitted, parsed, reply)
        return _respond(result) if isinstance(result, ErrorReply) else JSONResponse(result)

    def _stream_headers(reply: StreamReply) -> dict[str, str]:
        headers = {**reply.headers, "cache-control": "no-cache", "x-accel-buffering": "no"}
        if reply.content_type:
            headers["content-type"] = reply.content_type
        return headers

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
        data = [_model_entry(name, text) for name, text in SIM_MODELS.items()]
        return JSONResponse({"object": "list", "data": data})

    async def get_model(request: Request) -> Response:
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
        middleware=[Middleware(_Guard, api_key=api_key, key_hint=key_hint)],
    )
    app.state.shutdown = shutdown
    return app
