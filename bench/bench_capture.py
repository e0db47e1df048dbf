"""What capture costs each library, on each HTTP stack, over loopback, in one run.

    .venv/bin/python bench/bench_capture.py [--chunks 20000] [--repeats 5] [--only openai]

A server in a child process (so that this process's CPU time is the client's alone) sends the
same pre-built body (bench_stream.py's, in 64 KB writes) to every contender. Each library reads it
twice per round, interleaved: through a plain client of its stack and through nito_nb's capturing
client of the same stack, which also records the Stream (a pump thread or task reads the body as
it arrives, decodes, accumulates, keeps the timed log) and hands the library the same bytes:

- openai sync and async, on httpx2 (the SDK's own stack: ``httpx2_client()``) and on httpx
  (its legacy path: ``httpx_client()``), iterating ``chat.completions.create(stream=True)``;
- LangChain's ``ChatOpenAI(streaming=True).stream()`` on httpx;
- pydantic-ai's ``Agent.run_stream()`` (``stream_text``) on httpx2 (if installed).

For each it prints the best wall time and the best client CPU time (``time.process_time()``:
every thread of this process, the pump's included) with and without capture, and their ratios
(client CPU: of the best times; wall: the median of each round's ratio, the two reads of a round
having seen the same load of the machine).
The project promises at most 1.10x client CPU, and a wall time no longer than without capture by
more than that (the pump must not slow a library that reads fast): PASS or MISS on each line.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
from bench_stream import build_body, serve

import nito_nb
from nito_nb import _capture

LIMIT = 1.10  # capture / plain, client CPU and wall time
# as long as a real key: the capture redacts it from every read
KEY = "sk-bench-" + "0123456789abcdef" * 3
MESSAGES: Any = [{"role": "user", "content": "bench"}]


def _serve_forever(chunks: int, ready: Any) -> None:
    base, _, thread = serve(build_body(chunks))
    ready.send(base)
    thread.join()


def measure(run: Callable[[], str]) -> tuple[float, float]:
    """(wall seconds, client CPU seconds) of one read."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def openai_sync(base: str, http: Any) -> Callable[[], str]:
    client = openai.OpenAI(api_key=KEY, base_url=base, http_client=http, max_retries=0)

    def run() -> str:
        parts = []
        for chunk in client.chat.completions.create(
            model="bench/model", messages=MESSAGES, stream=True
        ):
            for choice in chunk.choices:
                parts.append(choice.delta.content or "")
        return "".join(parts)

    return run


def openai_async(base: str, make_http: Callable[[], Any]) -> Callable[[], str]:
    def run() -> str:
        async def read() -> str:
            async with openai.AsyncOpenAI(
                api_key=KEY, base_url=base, http_client=make_http(), max_retries=0
            ) as c:
                parts = []
                async for chunk in await c.chat.completions.create(
                    model="bench/model", messages=MESSAGES, stream=True
                ):
                    for choice in chunk.choices:
                        parts.append(choice.delta.content or "")
                return "".join(parts)

        return asyncio.run(read())

    return run


def langchain(base: str, http: Any) -> Callable[[], str]:
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(
        model="bench/model", base_url=base, api_key=KEY, streaming=True, http_client=http
    )  # type: ignore[arg-type]

    def run() -> str:
        return "".join(str(chunk.content) for chunk in llm.stream("bench"))

    return run


def pydantic_ai(base: str, make_http: Callable[[], Any]) -> Callable[[], str]:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    def run() -> str:
        async def read() -> str:
            async with make_http() as http:
                agent = Agent(
                    OpenAIChatModel(
                        "bench/model",
                        provider=OpenAIProvider(base_url=base, api_key=KEY, http_client=http),
                    )
                )
                async with agent.run_stream("bench") as result:
                    return "".join([text async for text in result.stream_text(delta=True)])

        return asyncio.run(read())

    return run


def pairs(base: str, only: str | None) -> dict[str, tuple[Callable[[], str], Callable[[], str]]]:
    """(plain, captured) readers by "library, stack"."""
    found: dict[str, tuple[Callable[[], str], Callable[[], str]]] = {}
    try:
        import httpx2
    except ImportError:  # Python 3.10, or not installed: the httpx lines only
        httpx2 = None
    if httpx2 is not None:
        found["openai sync, httpx2"] = (
            openai_sync(base, httpx2.Client(timeout=60)),
            openai_sync(base, nito_nb.httpx2_client(timeout=60)),
        )
        found["openai async, httpx2"] = (
            openai_async(base, lambda: httpx2.AsyncClient(timeout=60)),
            openai_async(base, lambda: nito_nb.async_httpx2_client(timeout=60)),
        )
    found["openai sync, httpx"] = (
        openai_sync(base, httpx.Client(timeout=60)),
        openai_sync(base, nito_nb.httpx_client(timeout=60)),
    )
    found["openai async, httpx"] = (
        openai_async(base, lambda: httpx.AsyncClient(timeout=60)),
        openai_async(base, lambda: nito_nb.async_httpx_client(timeout=60)),
    )
    try:
        found["langchain, httpx"] = (
            langchain(base, httpx.Client(timeout=60)),
            langchain(base, nito_nb.httpx_client(timeout=60)),
        )
    except ImportError:
        pass
    if httpx2 is not None:
        try:
            found["pydantic-ai, httpx2"] = (
                pydantic_ai(base, lambda: httpx2.AsyncClient(timeout=60)),
                pydantic_ai(base, lambda: nito_nb.async_httpx2_client(timeout=60)),
            )
        except ImportError:
            pass
    return {name: pair for name, pair in found.items() if only is None or only in name}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--only", help="only the lines whose name contains this (openai, httpx2...)"
    )
    args = parser.parse_args()

    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    server = ctx.Process(target=_serve_forever, args=(args.chunks, theirs), daemon=True)
    server.start()
    base = ours.recv()
    expected = nito_nb.read_sse(build_body(args.chunks)).content
    try:
        contenders = pairs(base, args.only)
        for name, (plain, captured) in contenders.items():  # warm up; all read the same answer
            assert plain() == expected, name
            assert captured() == expected, name
            last = nito_nb.last()
            assert last is not None and last.content == expected and last.status == "done", (
                name,
                last,
            )
        print(
            f"{args.chunks:,} chunks, best of {args.repeats} interleaved rounds over loopback "
            f"(server in another process); capture / plain must be <= {LIMIT:.2f}x"
        )
        print(
            f"  {'':22s} {'wall plain':>10s} {'capture':>8s} {'ratio':>6s}   {'CPU plain':>9s} {'capture':>8s} "
            f"{'ratio':>6s}   median CPU ratio   (wall: best times, median of the rounds' ratios)"
        )
        misses = 0
        for name, (plain, captured) in contenders.items():
            times: dict[str, list[tuple[float, float]]] = {"plain": [], "capture": []}
            for _ in range(args.repeats):
                times["plain"].append(measure(plain))
                _capture.REGISTRY.clear()  # each captured run starts with the same heap
                times["capture"].append(measure(captured))
            wall = {k: min(w for w, _ in v) for k, v in times.items()}
            cpu = {k: min(c for _, c in v) for k, v in times.items()}
            # Wall time: the median of each round's ratio (the two reads of a round saw the same
            # load), as a busy machine's best times can come from different moments.
            wall_ratio = statistics.median(
                c[0] / p[0] for p, c in zip(times["plain"], times["capture"], strict=True)
            )
            cpu_ratio = cpu["capture"] / cpu["plain"]
            median_cpu = statistics.median(c for _, c in times["capture"]) / statistics.median(
                c for _, c in times["plain"]
            )
            ok = wall_ratio <= LIMIT and cpu_ratio <= LIMIT
            misses += not ok
            print(
                f"  {name:22s} {wall['plain']:9.3f}s {wall['capture']:7.3f}s {wall_ratio:5.2f}x   "
                f"{cpu['plain']:8.3f}s {cpu['capture']:7.3f}s {cpu_ratio:5.2f}x   {median_cpu:5.2f}x   "
                f"{'PASS' if ok else 'MISS'}"
            )
        print("PASS" if not misses else f"MISS ({misses} of {len(contenders)} above {LIMIT:.2f}x)")
    finally:
        server.terminate()
        server.join(timeout=10)


if __name__ == "__main__":
    main()
