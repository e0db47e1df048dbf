"""Benchmark of a sweep on the embedded simulator: the issue's cell, ``nito_nb.sweep(prompts,
model="sim/chat", rates=[...])`` with no base URL, once with the simulator in a process of its own
(what a Run does: ``nito_nb/sim/_process.py``) and once with it in the run's own process (what a
Run did before, and still does where the child cannot start), in turn, ``--rounds`` times.

    .venv/bin/python bench/bench_sweep_sim.py                       # exit 1 if a target fails
    .venv/bin/python bench/bench_sweep_sim.py --rates 10 20 40 --duration 5 --rounds 2

Printed per rate: the send delay p99, the client's loop lag p99 and highest CPU share (of the
run's process), the p99 TTFT, and whether the summary called the client the bottleneck. Target:
with the simulator apart, no rate up to 40/s is client-bound and the send delay p99 stays at most
5 ms (docs/LOAD.md, "Is the client the bottleneck?"). The in-process figures are the comparison,
measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import nito_nb  # noqa: E402

TARGET_SEND_DELAY_S = 0.005


def one_sweep(rates: list[float], duration: float, apart: bool) -> list[dict[str, float]]:
    # The one switch between the two: the package root's record that the child could not start
    # (then every Run uses the in-process simulator, as where it cannot start).
    nito_nb._apart_failed = None if apart else "benchmark: the simulator in the run's process"
    prompts = [f"Tell me about topic {i}" for i in range(20)]
    sweep = nito_nb.sweep(prompts, model="sim/chat", rates=rates, duration=duration, progress=False)
    sweep.wait()
    if sweep.error is not None:
        raise RuntimeError(f"the sweep failed: {sweep.error}")
    s = sweep.summary()
    return [
        {
            "rate": float(rate),
            "send_delay_p99": row["send_delay_p99"],
            "lag_p99": row["client_lag_p99"],
            "cpu_max": row["client_cpu_max"],
            "ttft_p99": row["ttft_p99"],
            "bound": bool(row["client_bound"]),
        }
        for rate, row in s.iterrows()
    ]


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rates", type=float, nargs="+", default=[10.0, 20.0, 40.0])
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    os.environ.pop("NITO_BASE_URL", None)  # sim/ models go to the embedded simulator either way
    failed = []
    print(
        f"nito_nb.sweep of sim/chat at {args.rates} requests/s, {args.duration:g} s each, default engine:"
    )
    for round_ in range(args.rounds):
        for apart in (True, False):
            name = "simulator apart" if apart else "simulator in the run's process"
            for r in one_sweep(args.rates, args.duration, apart):
                print(
                    f"  round {round_ + 1} {name:31s} {r['rate']:5g}/s: send delay p99 "
                    f"{r['send_delay_p99'] * 1e3:7.2f} ms,"
                    f" loop lag p99 {r['lag_p99'] * 1e3:6.2f} ms, CPU max {r['cpu_max']:4.0%},"
                    f" ttft p99 {r['ttft_p99']:.3f} s{', client-bound' if r['bound'] else ''}"
                )
                if apart and (r["bound"] or r["send_delay_p99"] > TARGET_SEND_DELAY_S):
                    failed.append(
                        f"round {round_ + 1} at {r['rate']:g}/s with the simulator apart: "
                        f"send delay p99 {r['send_delay_p99'] * 1e3:.2f} ms"
                        + (", client-bound" if r["bound"] else "")
                    )
    for line in failed:
        print(f"TARGET MISSED: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
