"""Benchmark of runs (nito_nb.run) against a raw asyncio floor, on the simulator's chunk shapes.

    .venv/bin/python bench/bench_runs_floor.py                # prints the figures; exit 1 if a target fails
    .venv/bin/python bench/bench_runs_floor.py --requests 2000 --rounds 3
    .venv/bin/python bench/bench_runs_floor.py --workloads sim/chat --concurrency 64 --contenders run --memory 0

The floor is the least a client can do with the same requests (issue 32): one
``asyncio.open_connection`` per request, HTTP/1.1 written by hand (``POST /v1/chat/completions``
with the JSON body ``nito_nb.run`` sends and its ``Content-Length``), the response's chunked (or
plain) body read and cut into SSE events, ``json.loads`` per event and the text kept, at the same
concurrency (a semaphore). No timing per chunk, no log, no retries: a run does all three, so the
ratio is what they cost. (The earlier floor of ``bench_runs.py``, ``asyncio.gather`` over
``nito_nb.astream``, goes through httpx and is slower than a run.)

Workloads, the simulator in its own process at ``tps 0`` (``bench_magic.start_simulator``), each
sending the same bytes to every contender (same model, same ``"sim"`` options):

- ``sim/chat``: the simulator's uniform chunks (about 270 each);
- ``openai``: ``sim/chat`` with ``"sim": {"obfuscation": true}``, OpenAI's random-length padding in
  every chunk, so no two chunks share a byte layout;
- ``reasoning``: ``sim/reasoning``, reasoning chunks (``reasoning`` and ``reasoning_details``) then
  the answer (about 140 events, 36 KiB);
- ``tools``: ``sim/tools``, tool-call fragments (27 events, 6 KiB: the request's fixed costs weigh
  most here).

For each workload and concurrency (64 and 500), three contenders, interleaved in every round:
the floor, ``nito_nb.run`` without a store, and with ``store=`` a fresh folder. Printed: the
median requests/s of the rounds with their spread, and the median and spread of the per-round
ratios to the floor, with PASS/MISS against the targets (run >= 0.8x, with a store >= 0.6x).

Memory: in a fresh process, the RSS a run without a store keeps after ``--memory`` requests
(``gc.collect()``, the Run still held), per request, against the bytes of one request's body
(target <= 1.2x).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_magic import start_simulator  # noqa: E402

import nito_nb  # noqa: E402

KEY = "bench-key"  # an explicit base URL sends a key; the standalone simulator takes any
CONCURRENCIES = (64, 500)
WORKLOADS: dict[str, dict[str, Any]] = {
    "sim/chat": {},
    "openai": {"sim": {"obfuscation": True}},
    "reasoning": {"model": "sim/reasoning"},
    "tools": {"model": "sim/tools"},
}
TARGET_RUN, TARGET_STORE, TARGET_MEMORY = 0.8, 0.6, 1.2


def prompts(n: int, salt: str) -> list[str]:
    return [f"request {i} of {salt}" for i in range(n)]


def _model(params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A workload's model (``sim/chat`` unless it names one) and its other parameters."""
    rest = dict(params)
    return rest.pop("model", "sim/chat"), rest


def body_of(prompt: str, params: dict[str, Any]) -> bytes:
    """The JSON body ``nito_nb.run`` sends for ``prompt`` (``_client/base.py`` ``_build``)."""
    model, params = _model(params)
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        **params,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return json.dumps(body).encode()


async def _one(host: str, port: int, path: str, body: bytes) -> str:
    """One request by hand: its answer's text (content of every chunk)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(
            b"POST %s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n"
            b"Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n"
            % (path.encode(), host.encode(), port, KEY.encode(), len(body))
            + body
        )
        head = await reader.readuntil(b"\r\n\r\n")
        status = head[9:12]
        if status != b"200":
            raise RuntimeError(f"the simulator answered {head[:200]!r}")
        chunked = b"transfer-encoding: chunked" in head.lower()
        parts: list[str] = []
        pending = b""
        while True:
            if chunked:
                size = int((await reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
                if size == 0:
                    break
                data = (await reader.readexactly(size + 2))[:-2]
            else:
                data = await reader.read(65536)
                if not data:
                    break
            pending += data
            *events, pending = pending.split(b"\n\n")
            for event in events:
                if event.startswith(b"data: {"):
                    chunk = json.loads(event[6:])
                    for choice in chunk.get("choices") or ():
                        delta = choice.get("delta") or {}
                        # the text of each shape: answer, reasoning, tool arguments
                        for name in ("content", "reasoning"):
                            if delta.get(name):
                                parts.append(delta[name])
                        for call in delta.get("tool_calls") or ():
                            arguments = (call.get("function") or {}).get("arguments")
                            if arguments:
                                parts.append(arguments)
        return "".join(parts)
    finally:
        writer.close()


def floor(base_url: str, n: int, salt: str, concurrency: int, params: dict[str, Any]) -> float:
    url = urlsplit(base_url)
    host, port, path = (
        url.hostname or "127.0.0.1",
        url.port or 80,
        url.path.rstrip("/") + "/chat/completions",
    )
    bodies = [body_of(p, params) for p in prompts(n, salt)]

    async def main() -> None:
        semaphore = asyncio.Semaphore(concurrency)

        async def one(body: bytes) -> str:
            async with semaphore:
                return await _one(host, port, path, body)

        answers = await asyncio.gather(*(one(b) for b in bodies))
        assert all(answers), "a floor request kept no text"

    start = time.perf_counter()
    asyncio.run(main())
    return time.perf_counter() - start


def with_run(
    base_url: str, n: int, salt: str, concurrency: int, params: dict[str, Any], store: str | None
) -> float:
    model, params = _model(params)
    start = time.perf_counter()
    run = nito_nb.run(
        prompts(n, salt),
        model=model,
        concurrency=concurrency,
        base_url=base_url,
        api_key=KEY,
        store=store,
        progress=False,
        **params,
    )
    run.wait()
    elapsed = time.perf_counter() - start
    results = run.results()
    assert len(results) == n and set(results["status"]) == {"done"}, results[
        "status"
    ].value_counts()
    return elapsed


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_child(base_url: str, n: int, workload: str) -> None:
    """In a fresh process: print the RSS a run without a store keeps per request, and the bytes
    of one request's body."""
    params = WORKLOADS[workload]
    url = urlsplit(base_url)
    body = body_of("request 0 of memory", params)
    model, params = _model(params)
    raw = asyncio.run(
        _raw_body(
            url.hostname or "127.0.0.1",
            url.port or 80,
            url.path.rstrip("/") + "/chat/completions",
            body,
        )
    )
    warm = nito_nb.run(
        prompts(50, "warm"),
        model=model,
        concurrency=64,
        base_url=base_url,
        api_key=KEY,
        progress=False,
        **params,
    )
    warm.wait()
    warm.results()
    del warm
    gc.collect()
    before = _rss()
    run = nito_nb.run(
        prompts(n, "memory"),
        model=model,
        concurrency=64,
        base_url=base_url,
        api_key=KEY,
        progress=False,
        **params,
    )
    run.wait()
    gc.collect()
    kept = (_rss() - before) / n
    results = run.results()
    assert len(results) == n and set(results["status"]) == {"done"}, results[
        "status"
    ].value_counts()
    print(kept, raw)


async def _raw_body(host: str, port: int, path: str, body: bytes) -> int:
    """The bytes of one response's SSE body (without the chunked framing)."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        b"POST %s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n"
        % (path.encode(), host.encode(), port, KEY.encode(), len(body))
        + body
    )
    head = await reader.readuntil(b"\r\n\r\n")
    total = 0
    if b"transfer-encoding: chunked" in head.lower():
        while size := int((await reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16):
            total += len(await reader.readexactly(size + 2)) - 2
    else:
        total = len(await reader.read())
    writer.close()
    return total


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}–{max(values):.2f}"


def overhead(
    base_url: str,
    n: int,
    rounds: int,
    workloads: list[str],
    concurrencies: list[int],
    contenders: tuple[str, ...],
    cpu: bool = False,
) -> bool:
    """Interleaved rounds of every workload × concurrency × contender; True if every target is met.
    ``cpu``: also this process's CPU time per request of each (the simulator is another process),
    which a machine shared with other work changes far less than the time."""
    seconds: dict[tuple[str, int, str], list[float]] = {}
    cpu_ms: dict[tuple[str, int, str], list[float]] = {}

    def measured(key: tuple[str, int, str], measure: Callable[[], float]) -> None:
        started = time.process_time()
        seconds.setdefault(key, []).append(measure())
        cpu_ms.setdefault(key, []).append((time.process_time() - started) / n * 1e3)

    for round_ in range(rounds):
        for workload in workloads:
            params = WORKLOADS[workload]
            for concurrency in concurrencies:
                salt = f"{workload}{concurrency}r{round_}"
                key = (workload, concurrency)
                measured((*key, "floor"), partial(floor, base_url, n, salt, concurrency, params))
                if "run" in contenders:
                    measured(
                        (*key, "run"),
                        partial(with_run, base_url, n, salt, concurrency, params, None),
                    )
                if "store" in contenders:
                    with tempfile.TemporaryDirectory() as folder:
                        store = str(Path(folder) / "s")
                        measured(
                            (*key, "store"),
                            partial(with_run, base_url, n, salt, concurrency, params, store),
                        )
        print(f"  round {round_ + 1} of {rounds} done ({time.strftime('%H:%M:%S')})", flush=True)
    ok = True
    print(
        f"{n:,} requests per measurement, medians of {rounds} interleaved rounds (spread: min–max):"
    )
    for workload in workloads:
        for concurrency in concurrencies:
            rate = {
                c: [n / s for s in seconds[(workload, concurrency, c)]]
                for c in ("floor", *contenders)
            }
            print(
                f"  {workload}, concurrency {concurrency}: floor {statistics.median(rate['floor']):,.0f} "
                f"requests/s ({min(rate['floor']):,.0f}–{max(rate['floor']):,.0f})"
            )
            for contender, target, label in (
                ("run", TARGET_RUN, "nito_nb.run"),
                ("store", TARGET_STORE, "nito_nb.run, store"),
            ):
                if contender not in contenders:
                    continue
                ratios = [r / f for r, f in zip(rate[contender], rate["floor"], strict=True)]
                median = statistics.median(ratios)
                verdict = "PASS" if median >= target else "MISS"
                ok = ok and median >= target
                print(
                    f"    {label:<20} {statistics.median(rate[contender]):,.0f} requests/s "
                    f"({min(rate[contender]):,.0f}–{max(rate[contender]):,.0f}) = {median:.2f}x the floor "
                    f"({_spread(ratios)}), target >= {target}: {verdict}"
                )
            if cpu:
                floor_cpu = cpu_ms[(workload, concurrency, "floor")]
                shown = [f"floor {statistics.median(floor_cpu):.3f} ms ({_spread(floor_cpu)})"]
                for contender in contenders:
                    mine = cpu_ms[(workload, concurrency, contender)]
                    ratios = [f / m for f, m in zip(floor_cpu, mine, strict=True)]
                    shown.append(
                        f"{contender} {statistics.median(mine):.3f} ms ({_spread(mine)}), floor/"
                        f"{contender} {statistics.median(ratios):.2f}x ({_spread(ratios)})"
                    )
                print(f"    CPU per request (this process): {'; '.join(shown)}")
    return ok


def memory(base_url: str, n: int, workloads: list[str]) -> bool:
    ok = True
    for workload in workloads:
        child = subprocess.run(
            [
                sys.executable,
                __file__,
                "--memory-child",
                str(n),
                "--workload",
                workload,
                "--base-url",
                base_url,
            ],
            capture_output=True,
            text=True,
        )
        if child.returncode:
            raise RuntimeError(f"the memory child failed:\n{child.stderr[-3000:]}")
        kept, raw = (float(x) for x in child.stdout.strip().splitlines()[-1].split())
        ratio = kept / raw
        verdict = "PASS" if ratio <= TARGET_MEMORY else "MISS"
        ok = ok and ratio <= TARGET_MEMORY
        print(
            f"  {workload}: a run without a store keeps {kept / 1024:.1f} KiB per request after {n:,} "
            f"(RSS), its body {raw / 1024:.1f} KiB: {ratio:.2f}x (target <= {TARGET_MEMORY}): {verdict}"
        )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--requests", type=int, default=1000, help="per measurement; 0: only the memory test"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--memory", type=int, default=2000, help="requests of the memory test (0 to skip)"
    )
    parser.add_argument(
        "--workloads",
        nargs="+",
        choices=list(WORKLOADS),
        default=list(WORKLOADS),
        metavar="WORKLOAD",
        help=f"only these workloads (of {', '.join(WORKLOADS)}); all by default",
    )
    parser.add_argument(
        "--concurrency",
        nargs="+",
        type=int,
        default=list(CONCURRENCIES),
        help="only these concurrencies; 64 and 500 by default",
    )
    parser.add_argument(
        "--contenders",
        nargs="+",
        choices=("run", "store"),
        default=["run", "store"],
        help="besides the floor (always measured): run (without a store), store; both by default",
    )
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="also print this process's CPU time per request of each contender (the simulator "
        "runs in another): steadier than the rates on a machine shared with other work",
    )
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.base_url, args.memory_child, args.workload)
        return 0
    proc, base_url = start_simulator()
    ok = True
    try:
        print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
        if args.requests:
            ok = overhead(
                base_url,
                args.requests,
                args.rounds,
                args.workloads,
                args.concurrency,
                tuple(args.contenders),
                cpu=args.cpu,
            )
        if args.memory:
            ok = memory(base_url, args.memory, args.workloads) and ok
        print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        proc.kill()
        proc.wait()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
