"""The stream engine against its peers, over loopback, in one run.

    .venv/bin/python bench/bench_stream.py [--chunks 50000] [--repeats 7] [--api-key KEY]

A local server sends the same 50,000-chunk body (pre-built, in 64 KB writes, so the server costs
the same for everyone) to three clients, interleaved, best of N:

- nito_nb: the full path (SSE decode, accumulate, timed log of every event with its raw bytes),
  read by the Stream's background reader thread and handed to the iterating loop through a queue;
- openai: the openai SDK's ``chat.completions.stream()`` helper, which accumulates a snapshot;
- floor: httpx + httpx-sse + ``json.loads``, keeping only the content: the least a client can do.

It prints chunks/s for each and the ratios the project promises (nito_nb >= 0.8x the floor and
>= 10x the openai helper), then the memory of the log against the body's raw bytes (<= 3x).

The default key, ``bench``, is a placeholder that nito_nb does not look for in answers (under 8
characters); ``--api-key`` with a real key's length measures the path every real call takes, where
the key is taken out of each read and of the decoded text across chunks (``_core/redaction.py``).
"""

from __future__ import annotations

import argparse
import gc
import json
import socket
import statistics
import threading
import time
import tracemalloc
from collections.abc import Callable

import httpx
import httpx_sse
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

import nito_nb


def build_body(n: int) -> bytes:
    """A stream as gateways send it: compact JSON, one content fragment per chunk."""
    words = ["stream", "ing ", "chunk", "s ", "over ", "SSE", " with", " accents: é", ", ", "and more. "]
    lines = []
    for i in range(n):
        delta = {"role": "assistant", "content": words[i % len(words)]} if i == 0 else {"content": words[i % len(words)]}
        chunk = {"id": "gen-bench", "object": "chat.completion.chunk", "created": 1751299200, "model": "bench/model",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        lines.append(b"data: " + json.dumps(chunk, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n")
    final = {"id": "gen-bench", "object": "chat.completion.chunk", "created": 1751299200, "model": "bench/model",
             "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    usage = {"id": "gen-bench", "object": "chat.completion.chunk", "created": 1751299200, "model": "bench/model",
             "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": n + 5}}
    lines += [b"data: " + json.dumps(final).encode() + b"\n\n", b"data: " + json.dumps(usage).encode() + b"\n\n",
              b"data: [DONE]\n\n"]
    return b"".join(lines)


def serve(body: bytes) -> tuple[str, uvicorn.Server, threading.Thread]:
    pieces = [body[i : i + 65536] for i in range(0, len(body), 65536)]

    async def chat(request: Request) -> StreamingResponse:
        await request.body()

        async def gen():  # type: ignore[no-untyped-def]
            for piece in pieces:
                yield piece

        return StreamingResponse(gen(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    return f"http://127.0.0.1:{port}/v1", server, thread


def interleaved(
    contenders: dict[str, Callable[[], object]], repeats: int, before: Callable[[], None] | None = None
) -> dict[str, list[float]]:
    """Each contender's times over ``repeats`` rounds, the contenders in turn within a round, so
    that a busy machine slows them alike; ``before`` runs before each timed call (untimed)."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, run in contenders.items():
            if before is not None:
                before()
            gc.collect()
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return times


def print_rates(times: dict[str, list[float]], chunks: int, body_bytes: int) -> dict[str, float]:
    """Print chunks/s, best and median of each contender; return the best times."""
    repeats = len(next(iter(times.values())))
    print(f"{chunks:,} chunks, {body_bytes / 1e6:.1f} MB body, best of {repeats} interleaved runs over loopback")
    best = {name: min(t) for name, t in times.items()}
    width = max(len(name) for name in times)
    for name, t in times.items():
        print(f"  {name:{width}s} {chunks / best[name]:>10,.0f} chunks/s   best {best[name]:.3f} s"
              f"   median {statistics.median(t):.3f} s")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--api-key", default="bench", help="the key sent (8 characters or more: redacted from answers)")
    args = parser.parse_args()

    body = build_body(args.chunks)
    expected = nito_nb.read_sse(body).content
    base, server, thread = serve(body)
    messages = [{"role": "user", "content": "bench"}]

    http = httpx.Client(timeout=60)
    client = nito_nb.Client(api_key=args.api_key, base_url=base, http_client=http)

    def run_nito() -> str:
        s = client.stream(messages, model="bench/model")
        for _ in s:
            pass
        return s.content

    import openai

    oai = openai.OpenAI(api_key="bench", base_url=base, http_client=httpx.Client(timeout=60), max_retries=0)

    def run_openai() -> str:
        with oai.chat.completions.stream(model="bench/model", messages=messages) as s:  # type: ignore[arg-type]
            for _ in s:
                pass
            return s.get_final_completion().choices[0].message.content or ""

    def run_floor() -> str:
        parts = []
        with httpx_sse.connect_sse(http, "POST", f"{base}/chat/completions",
                                   json={"model": "bench/model", "messages": messages, "stream": True}) as source:
            for sse in source.iter_sse():
                if sse.data == "[DONE]":
                    break
                chunk = json.loads(sse.data)
                for choice in chunk["choices"]:
                    parts.append(choice["delta"].get("content") or "")
        return "".join(parts)

    contenders: dict[str, Callable[[], str]] = {"nito_nb": run_nito, "openai": run_openai, "floor": run_floor}
    for name, run in contenders.items():  # warm up, and check they all read the same answer
        assert run() == expected, name
    times = interleaved(contenders, args.repeats)
    best = print_rates(times, args.chunks + 2, len(body))
    floor_ratio = best["floor"] / best["nito_nb"]
    openai_ratio = best["openai"] / best["nito_nb"]
    print(f"  nito_nb / floor  = {floor_ratio:.2f}x  (required >= 0.8x)  {'ok' if floor_ratio >= 0.8 else 'BELOW'}")
    print(f"  nito_nb / openai = {openai_ratio:.1f}x  (required >= 10x)   {'ok' if openai_ratio >= 10 else 'BELOW'}")

    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    s = client.stream(messages, model="bench/model")
    s.wait()
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    raw = len(s.log.body)
    print(f"memory: log columns {s.log.nbytes / raw:.2f}x the raw bytes ({s.log.nbytes / 1e6:.1f} MB for {raw / 1e6:.1f} MB);"
          f" the whole Stream retains {retained / raw:.2f}x (required <= 3x)  {'ok' if retained <= 3 * raw else 'ABOVE'}")

    client.close()
    http.close()
    oai.close()
    server.should_exit = True
    thread.join(timeout=5)


if __name__ == "__main__":
    main()
