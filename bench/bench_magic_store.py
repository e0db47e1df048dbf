"""What ``%config Nito.store`` costs a cell, and the choice it measures (docs/RUNS.md).

    .venv/bin/python bench/bench_magic_store.py            # sim/chat, about 270 chunks a stream
    .venv/bin/python bench/bench_magic_store.py --model sim/echo --n 40

Streams of ``--model`` on the embedded simulator at ``tps 0``, then, per stream (median and max,
the first write left out), the two contenders interleaved (one stream each in turn):

- open + write + close: the steps of ``_runs/store_writer.write_streams``, what the magic does at the end
  of a cell (a ``StoreWriter`` opened, ``result_rows`` + ``write``, closed), each step timed;
- kept writer: one ``StoreWriter`` open throughout, ``result_rows`` + ``write`` per stream (what
  sharing one connection would cost);
- result rows alone: the metrics of the stream from its snapshot (``_runs/results.result_rows``),
  which both pay (the events file, built from the log, is part of each write);

and the time to rebuild every stored stream (``Store.streams``), what ``%nito history`` pays per
stream of earlier kernels. Prints the figures; no target (the choice is a trade: see the docs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("NITO_SIM_TPS", "0")
os.environ.setdefault("NITO_SIM_TTFT_MS", "0")

import nito_nb
from nito_nb._runs.plan import Request
from nito_nb._runs.results import Finished, result_rows
from nito_nb._runs.store import Store
from nito_nb._runs.store_writer import StoreWriter, stream_key


def keys_of(path: str) -> set[str]:
    with Store(path, shared=True) as store:
        return {key for (key,) in store.con.execute("SELECT key FROM requests").fetchall()}


def _ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.1f} ms, max {max(values) * 1000:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="sim/chat")
    parser.add_argument("--n", type=int, default=30, help="streams per contender")
    args = parser.parse_args()
    streams = [nito_nb.stream(f"prompt {i}", model=args.model) for i in range(2 * args.n)]
    for s in streams:
        s.wait()
    folder = tempfile.mkdtemp()

    def finished(s: nito_nb.Stream) -> list[Finished]:
        return [Finished(Request(stream_key(s), None, args.model, 0, [], {}), s, 1, s.t0_wall)]

    # Interleaved, one stream each in turn, so that a busy moment slows both alike; the per-write
    # side timed in its three steps (the magic's: StoreWriter(), write, close).
    opened, wrote, closed, per_write, kept = [], [], [], [], []
    writer = StoreWriter(folder + "/kept")
    try:
        for own, shared in zip(streams[: args.n], streams[args.n :], strict=True):
            t = time.perf_counter()
            single = StoreWriter(folder + "/per-write")
            t1 = time.perf_counter()
            items = finished(own)
            single.write(items, result_rows(items, "magic-bench"))
            t2 = time.perf_counter()
            single.close()
            t3 = time.perf_counter()
            opened.append(t1 - t)
            wrote.append(t2 - t1)
            closed.append(t3 - t2)
            per_write.append(t3 - t)
            t = time.perf_counter()
            items = finished(shared)
            writer.write(items, result_rows(items, "magic-bench"))
            kept.append(time.perf_counter() - t)
    finally:
        writer.close()
    assert keys_of(folder + "/per-write") == {stream_key(s) for s in streams[: args.n]}
    rows_only = []
    for s in streams[args.n :]:
        t = time.perf_counter()
        result_rows(finished(s), "magic-bench")
        rows_only.append(time.perf_counter() - t)
    t = time.perf_counter()
    with Store(folder + "/per-write", shared=True) as store:
        keys = [key for (key,) in store.con.execute("SELECT key FROM requests").fetchall()]
        for key in keys:
            store.streams(key)
    rebuild = (time.perf_counter() - t) / len(keys)
    ratios = [a / b for a, b in zip(per_write[1:], kept[1:], strict=True)]
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{args.model}, {args.n} streams each, interleaved; load average {load}")
    print(f"  open + write + close per stream: {_ms(per_write[1:])}")
    print(f"    of which open {_ms(opened[1:])}; write {_ms(wrote[1:])}; close {_ms(closed[1:])}")
    print(f"  kept writer, write per stream:   {_ms(kept[1:])}")
    print(
        f"  open + write + close / kept:     {statistics.median(per_write[1:]) / statistics.median(kept[1:]):.1f}x "
        f"(per stream {min(ratios):.1f}-{max(ratios):.1f}x)"
    )
    print(f"  result rows alone:               {_ms(rows_only[1:])}")
    print(f"  rebuild a stored stream:         {rebuild * 1000:.1f} ms")


if __name__ == "__main__":
    main()
