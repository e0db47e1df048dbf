"""What grading each row costs a run (issue 34, docs/SCORES.md): ``nito_nb.run`` on the
``bench_runs_floor.py`` workload (``sim/chat`` at ``tps 0``, the simulator in its own process),
without scores and with cheap ones (``regex`` and ``under``, graded on the writer's thread as
rows finish), interleaved in every round, with and without a store.

    .venv/bin/python bench/bench_scores.py                      # 1,000 requests, 5 rounds
    .venv/bin/python bench/bench_scores.py --requests 2000 --rounds 7

Printed: the median requests/s of each contender with its spread, and the median and spread of
the per-round ratios scored / plain (1.00: no cost). On a machine shared with other work the
requests/s swing with the load, so the script also measures what grading adds where it runs: the
writer thread's CPU time (``time.thread_time``) to make a batch's result rows
(``results.result_rows``) with and without grading them, on the Streams of a finished run,
interleaved.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_magic import start_simulator  # noqa: E402
from bench_runs_floor import KEY, prompts  # noqa: E402

import nito_nb  # noqa: E402
from nito_nb import scores  # noqa: E402

CHEAP = {"src": scores.regex(r"https?://"), "fast": scores.under("ttft", 1.0)}


def one(
    base_url: str, n: int, salt: str, concurrency: int, scored: bool, store: str | None
) -> float:
    start = time.perf_counter()
    run = nito_nb.run(
        prompts(n, salt),
        model="sim/chat",
        concurrency=concurrency,
        base_url=base_url,
        api_key=KEY,
        store=store,
        progress=False,
        score=CHEAP if scored else None,
    )
    run.wait()
    elapsed = time.perf_counter() - start
    results = run.results()
    assert len(results) == n and set(results["status"]) == {"done"}
    if scored:
        assert results["score.fast"].notna().all()
    return elapsed


def writer_cost(base_url: str, n: int, rounds: int) -> None:
    """The writer's CPU time per row: result rows alone, and result rows then graded."""
    from datetime import datetime, timezone

    from nito_nb._runs.results import Finished, result_rows
    from nito_nb._runs.scoring import Scorer

    run = nito_nb.run(
        prompts(n, "writer"), model="sim/chat", base_url=base_url, api_key=KEY, progress=False
    ).wait()
    kept = run._writer.kept_streams()  # a run without a store keeps its Streams
    now = datetime.now(timezone.utc)
    items = [Finished(r, kept[r.key], 1, now) for r in run.plan.requests]
    scorer = Scorer(CHEAP, run.plan.inputs, None)
    plain: list[float] = []
    graded: list[float] = []
    for _ in range(rounds):
        start = time.thread_time()
        result_rows(items, "bench")
        plain.append(time.thread_time() - start)
        start = time.thread_time()
        rows = result_rows(items, "bench")
        scorer.grade(rows, [item.stream for item in items], scorer.plain)
        graded.append(time.thread_time() - start)
    p, g = statistics.median(plain), statistics.median(graded)
    print(
        f"  the writer's CPU per row ({len(items):,} rows, median of {rounds}): result rows "
        f"{p / len(items) * 1e6:.1f} µs, with the two scores {g / len(items) * 1e6:.1f} µs "
        f"(+{(g - p) / p:.0%}; spread of the graded/plain ratios "
        f"{min(b / a for a, b in zip(plain, graded, strict=True)):.2f}–"
        f"{max(b / a for a, b in zip(plain, graded, strict=True)):.2f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    n = args.requests
    proc, base_url = start_simulator()
    seconds: dict[str, list[float]] = {}
    try:
        writer_cost(base_url, n, args.rounds)
        print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
        for round_ in range(args.rounds):
            for store in (False, True):
                # the order of the pair alternates, so neither always runs on a warmer process
                order = (False, True) if round_ % 2 == 0 else (True, False)
                for scored in order:
                    name = f"{'store, ' if store else ''}{'scored' if scored else 'plain'}"
                    salt = f"r{round_}{name}"
                    with tempfile.TemporaryDirectory() as folder:
                        path = str(Path(folder) / "s") if store else None
                        seconds.setdefault(name, []).append(
                            one(base_url, n, salt, args.concurrency, scored, path)
                        )
            print(f"  round {round_ + 1} of {args.rounds} done", flush=True)
        print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        proc.kill()
        proc.wait()
    print(
        f"{n:,} requests per measurement, concurrency {args.concurrency}, medians of "
        f"{args.rounds} interleaved rounds (spread: min–max):"
    )
    for prefix in ("", "store, "):
        plain = [n / s for s in seconds[f"{prefix}plain"]]
        scored = [n / s for s in seconds[f"{prefix}scored"]]
        ratios = [s / p for s, p in zip(scored, plain, strict=True)]
        print(
            f"  {prefix or 'no store, '}plain {statistics.median(plain):,.0f} requests/s "
            f"({min(plain):,.0f}–{max(plain):,.0f}); scored {statistics.median(scored):,.0f} "
            f"({min(scored):,.0f}–{max(scored):,.0f}); scored/plain {statistics.median(ratios):.2f} "
            f"({min(ratios):.2f}–{max(ratios):.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
