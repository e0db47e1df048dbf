"""Benchmark of runs (nito_nb.run): overhead against a hand-written floor, and memory with a store.

    .venv/bin/python bench/bench_runs.py                  # prints the figures; exit 1 if a target fails
    .venv/bin/python bench/bench_runs.py --requests 2000 --rounds 2 --rss 2000,10000

Overhead: N requests of ``sim/chat`` (about 270 chunks each) at ``tps 0``, concurrency 64, from the
simulator in its own process (``python -m nito_nb.sim``, as bench_magic.py starts it). Three
contenders, interleaved, best of ``--rounds``:

- floor: ``asyncio.gather`` over ``nito_nb.astream(...).wait()`` behind an ``asyncio.Semaphore(64)``;
- run: ``nito_nb.run(prompts, model="sim/chat", concurrency=64).wait()`` (no store);
- run + store: the same with ``store=`` a fresh folder (DuckDB, events and requests written).

This floor goes through httpx, which is slower than a run: the least a client can do, a raw asyncio
client (HTTP/1.1 by hand, ``json.loads`` per event), is ``bench_runs_floor.py``'s floor, and issue
32's targets are against that one. Here: run >= 0.8x the floor's requests/s, run + store >= 0.6x.
The progress display's update
count is printed (outside Jupyter: the stderr line, at most 4 updates/s).

Memory: the peak RSS of a fresh process that runs ``--rss`` requests with a store, for each count
(and, printed beside it, that of the store's events helper process, _runs/events.py): it must
stay flat in the number of requests (target: the largest count's peak <= 1.5x the smallest's).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_magic import start_simulator  # noqa: E402

import nito_nb  # noqa: E402

CONCURRENCY = 64
KEY = "bench-key"  # an explicit base URL sends a key; the standalone simulator takes any


def prompts(n: int, salt: str) -> list[str]:
    return [f"request {i} of {salt}" for i in range(n)]


def floor(base_url: str, n: int, salt: str) -> float:
    async def main() -> None:
        semaphore = asyncio.Semaphore(CONCURRENCY)

        async def one(prompt: str) -> None:
            async with semaphore:
                await nito_nb.astream(
                    prompt, model="sim/chat", base_url=base_url, api_key=KEY
                ).wait()

        await asyncio.gather(*(one(p) for p in prompts(n, salt)))

    start = time.perf_counter()
    asyncio.run(main())
    return time.perf_counter() - start


def with_run(base_url: str, n: int, salt: str, store: str | None) -> tuple[float, int]:
    start = time.perf_counter()
    run = nito_nb.run(
        prompts(n, salt),
        model="sim/chat",
        concurrency=CONCURRENCY,
        base_url=base_url,
        api_key=KEY,
        store=store,
    )
    run.wait()
    elapsed = time.perf_counter() - start
    results = run.results()
    assert len(results) == n and set(results["status"]) == {"done"}, results[
        "status"
    ].value_counts()
    return elapsed, run.progress.n_updates if run.progress is not None else 0


def rss_child(base_url: str, n: int) -> None:
    """In a fresh process: run n requests with a store, print the peak RSS in MiB."""
    with tempfile.TemporaryDirectory() as folder:
        run = nito_nb.run(
            prompts(n, "rss"),
            model="sim/chat",
            concurrency=CONCURRENCY,
            base_url=base_url,
            api_key=KEY,
            store=str(Path(folder) / "store"),
            progress=False,
        )
        run.wait()
        results = run.results()
        assert len(results) == n and set(results["status"]) == {"done"}, results[
            "status"
        ].value_counts()
    # This process's peak, then the largest of its ended children's: the store's events helper.
    print(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000, help="0: only the memory test")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--rss", default="2000,10000", help="request counts for the memory test ('' to skip)"
    )
    parser.add_argument("--rss-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.base_url, args.rss_child)
        return 0
    proc, base_url = start_simulator()
    ok = True
    try:
        n = args.requests
        counts = [int(c) for c in args.rss.split(",") if c.strip()]
        if n:
            ok = overhead(base_url, n, args.rounds)
        peaks = []
        for count in counts:
            child = subprocess.run(
                [sys.executable, __file__, "--rss-child", str(count), "--base-url", base_url],
                capture_output=True,
                text=True,
            )
            if child.returncode:
                raise RuntimeError(f"the {count:,}-request child failed:\n{child.stderr[-3000:]}")
            own, helper = (float(x) for x in child.stdout.strip().splitlines()[-1].split())
            peaks.append(own)
            print(
                f"  peak RSS with a store, {count:,} requests: {own:.0f} MiB "
                f"(its events helper process: {helper:.0f} MiB)"
            )
        if len(peaks) >= 2:
            growth = peaks[-1] / peaks[0]
            print(
                f"  peak RSS {counts[-1]:,} / {counts[0]:,} requests: {growth:.2f}x (target <= 1.5)"
            )
            ok = ok and growth <= 1.5
    finally:
        proc.kill()
        proc.wait()
    return 0 if ok else 1


def overhead(base_url: str, n: int, rounds: int) -> bool:
    """Print the three contenders' requests/s; True if both targets are met."""
    best = {"floor": float("inf"), "run": float("inf"), "store": float("inf")}
    updates = {"run": 0, "store": 0}
    for round_ in range(rounds):
        best["floor"] = min(best["floor"], floor(base_url, n, f"floor{round_}"))
        elapsed, updates["run"] = with_run(base_url, n, f"run{round_}", None)
        best["run"] = min(best["run"], elapsed)
        with tempfile.TemporaryDirectory() as folder:
            elapsed, updates["store"] = with_run(
                base_url, n, f"store{round_}", str(Path(folder) / "s")
            )
        best["store"] = min(best["store"], elapsed)
    rate = {name: n / seconds for name, seconds in best.items()}
    ratio_run, ratio_store = rate["run"] / rate["floor"], rate["store"] / rate["floor"]
    print(f"{n:,} requests of sim/chat, concurrency {CONCURRENCY}, best of {rounds}:")
    print(f"  floor (gather + semaphore over astream): {rate['floor']:,.0f} requests/s")
    print(
        f"  nito_nb.run:            {rate['run']:,.0f} requests/s = {ratio_run:.2f}x the floor "
        f"(target >= 0.8), {updates['run']} progress updates"
    )
    print(
        f"  nito_nb.run with store: {rate['store']:,.0f} requests/s = {ratio_store:.2f}x the floor "
        f"(target >= 0.6), {updates['store']} progress updates"
    )
    return ratio_run >= 0.8 and ratio_store >= 0.6


if __name__ == "__main__":
    sys.exit(main())
