"""Benchmark of a Stream as a marimo cell's output: renders, bytes sent, time the cell's thread spends.

    .venv/bin/python bench/bench_marimo.py                 # sim/long, 2,000 and 20,000 chunks
    .venv/bin/python bench/bench_marimo.py --chunks 50000 --tps 10000

marimo re-sends a cell's whole output on each change (``_display/marimo.py``), so the bytes sent
grow with the answer's length times the number of renders (at most 20 a second, the Jupyter
outputs' throttle). The cell output's ``replace`` is a no-op here: what is measured is nito_nb's
side (rendering in the cell's thread), not marimo's websocket. The simulator runs in this process,
paced (``sim.tps``), as an answer arrives from a real gateway.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("NITO_SIM_TTFT_MS", "0")

import nito_nb
from nito_nb._display.marimo import stream_output


def measure(chunks: int, tps: float) -> str:
    stream = nito_nb.stream("x", model="sim/long", sim={"chunks": chunks, "tps": tps, "ttft_ms": 0})
    spent = 0.0
    output = stream_output(stream, replace=lambda html: None)
    draw = output._draw

    def timed(*, live: bool) -> None:
        nonlocal spent
        started = time.perf_counter()
        draw(live=live)
        spent += time.perf_counter() - started

    output._draw = timed  # type: ignore[method-assign]
    started = time.perf_counter()
    output.follow_here(interrupted=stream.close)
    wall = time.perf_counter() - started
    return (
        f"sim/long chunks={chunks} tps={tps:g}: {len(stream.content):,} chars in {stream.elapsed:.1f} s, "
        f"{output.n_updates} renders, {output.bytes_sent / 1e6:.1f} MB sent, rendering {spent:.2f} s "
        f"({spent / wall:.0%} of the cell's thread), last output {len(output.shown) / 1e3:.0f} KB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, nargs="*", default=[2000, 20000])
    parser.add_argument("--tps", type=float, default=4000.0)
    args = parser.parse_args()
    for chunks in args.chunks:
        print(measure(chunks, args.tps))


if __name__ == "__main__":
    main()
