"""The simulator's scenarios: pure functions from a chat request to the bytes of a reply.

Nothing here (or in the modules below it) does I/O, reads the clock or the environment: a
request (and, for replay, the bytes of a recording) goes in, a `Reply` comes out. A streamed
reply is a lazy sequence of `Event`s, each already encoded as SSE bytes; `schedule()`
(`_pacing.py`) turns them into `(time offset, bytes)` pairs according to the pacing, and the ASGI
shell in `_app.py` only sleeps and writes. Keeping the generators pure lets the tests check every
scenario without a server.

This module is the catalogue: which model is which scenario (`SIM_MODELS`), and `scenario()`,
which answers a request. The scenarios themselves live by kind in `_stories.py`,
`_tool_calls.py`, `_faults.py`, `_structured.py`, `_judge.py` and `_recordings.py`; they all write
through `_writer.ChunkWriter`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

from ._faults import FAULT_STREAMS, fault_midstream, fault_status, http_error, picked_to_fail
from ._judge import judge
from ._reply import DONE, Event, Reply, StreamReply, error_reply, round_robin
from ._request import SimRequest
from ._stories import STORIES
from ._structured import STRUCTURED
from ._tool_calls import tool_calls
from ._writer import ChunkWriter, Generate

# The scenario models, with the one-line description shown by `GET /v1/models`.
SIM_MODELS: dict[str, str] = {
    "sim/echo": "Answers with the prompt, word by word.",
    "sim/chat": "Plausible Markdown prose: headings, lists, a code block, a table, non-ASCII text"
    " (JSON when `response_format` asks for it, as every model that answers in words).",
    "sim/server": "A model server with a capacity: a 64-token answer from a batch of slots and a queue"
    " (4 and 8 by default; then HTTP 429), slower as the batch fills (`sim.capacity`, docs/SIMULATOR.md).",
    "sim/reasoning": "reasoning_details of types text, summary and encrypted (readable ones with the"
    " same text in `reasoning`), then the answer.",
    "sim/mistral": "Mistral's format: `content` as a list of parts, thinking parts then text parts.",
    "sim/tools": "Parallel tool calls built from the request's `tools`; answers after a tool message.",
    "sim/websearch": "An answer with citations and a `web_search` object.",
    "sim/free": "An answer carrying a `free_tier` object.",
    "sim/slow": "Long thinking with keep-alive comments (`sim.think_s`), then a short answer.",
    "sim/error-midstream": "Some content, then an error chunk with finish_reason `error`.",
    "sim/drop": "Some content, then the connection is cut: no [DONE].",
    "sim/stall": "Some content, then silence for `sim.stall_s` (default 60 s), then the rest.",
    "sim/garbage": "A data line that is not JSON in the middle of a normal stream.",
    "sim/http-401": "HTTP 401 with a JSON error body.",
    "sim/http-402": "HTTP 402 (out of credits) with a JSON error body.",
    "sim/http-429": "HTTP 429 with `Retry-After` (`sim.retry_after`, default 1) and a JSON body.",
    "sim/http-500-html": "HTTP 500 with an HTML page (CRLF line ends).",
    "sim/http-503": "HTTP 503 (no provider available) with a JSON error body.",
    "sim/bigchunk": "One content delta of 1 MiB (`sim.size`).",
    "sim/long": "Tens of thousands of ~4-byte chunks of Markdown (`sim.chunks`, default 20000).",
    "sim/replay": "Replays a recorded .sse body or a nito_nb .jsonl log (`sim.replay`, `sim.speed`).",
    "sim/json-invalid": "JSON that breaks the `response_format` schema (a field of the wrong type, or a"
    " required one missing); without a schema, JSON with a syntax error.",
    "sim/json-cut": "A JSON answer (`response_format`'s, else an answer object) that stops mid-object:"
    " finish_reason `length`.",
    "sim/judge": "A grader: the `response_format` schema's JSON, its `score` the last `score: N` written"
    " in the messages and its `reason` the rest of that line (docs/SIMULATOR.md).",
}


_STREAMS: dict[str, Generate] = {
    **STORIES,
    "sim/tools": tool_calls,
    **FAULT_STREAMS,
    **STRUCTURED,
    "sim/judge": judge,
}


def scenario(request: SimRequest, created: int, nonce: str = "", seen: int = 0) -> Reply:
    """The reply of a scenario model to a validated request (not `sim/replay`: see `replay_*`).

    ``nonce`` goes into the completion id only (the server draws one per request), so the same
    request and seed give the same content under a new id. `seen`: how many times the server
    already answered this same request (`request_digest`); a request picked by `sim.fail_rate`
    fails its first `sim.fail_attempts` times.
    """
    model = request.model
    options = request.options
    faulty = picked_to_fail(request) and seen < options.fail_attempts
    if faulty and isinstance(options.fail_status, int):
        return fault_status(options)
    if model.startswith("sim/http-") and model in SIM_MODELS:
        return http_error(model, request.options)
    generate = _STREAMS.get(model)
    if generate is None:
        return error_reply(
            404,
            f"Model {model!r} not found: the simulator serves {', '.join(SIM_MODELS)}.",
        )
    if request.n > 1:
        total = ChunkWriter(request, created, nonce)
        events: Iterable[Event] = _choices(generate, request, total)
        writer = total
    else:
        writer = ChunkWriter(request, created, nonce)
        events = generate(writer)
    if faulty:
        events = fault_midstream(events, writer, str(options.fail_status))
    return StreamReply(events)


def _choices(
    generate: Generate,
    request: SimRequest,
    total: ChunkWriter,
) -> Iterator[Event]:
    """``n`` choices interleaved as OpenAI streams them: one choice per chunk, in turn, each with
    its own role, text (seed + its index) and terminal chunk; then one usage chunk for all
    (``total``: the completion's writer, one id and one usage chunk)."""
    created = total.created
    writers = []
    streams = []
    for index in range(request.n):
        options = dataclasses.replace(request.options, seed=request.options.seed + index)
        one = dataclasses.replace(request, options=options, include_usage=False)
        writer = ChunkWriter(one, created, choice=index, completion_id=total.id)
        writers.append(writer)
        streams.append(generate(writer))
    # Each choice ends with its own [DONE]; the completion ends once, after the usage chunk.
    yield from (event for event in round_robin(streams) if event.data != DONE)
    total.completion_tokens = sum(w.completion_tokens for w in writers)
    total.reasoning_tokens = sum(w.reasoning_tokens for w in writers)
    yield from total.usage_and_done()
