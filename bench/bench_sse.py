"""One long SSE line (issue 11, item 18): the decoder must stay linear in the line's length.

    .venv/bin/python bench/bench_sse.py [--sizes 1,10,50] [--read 65536] [--repeats 3]

A chunk whose ``data:`` line is 1, 10 and 50 MB long (an answer's content of that many ``x``) is
fed in reads of 64 KiB, as httpx hands a body over, to:

- the decoder: ``SSEDecoder.decode`` per read, then ``flush``;
- a Stream: the full path of every read (decode, parse the JSON, accumulate, log), as a live
  stream runs it, with the default ``max_event_size`` (64 MiB);
- the floor, on the same reads: ``b"".join`` of them, ``bytes.find`` of the blank line and the
  line decoded to text (and, for the Stream, ``json.loads`` of it): the least any decoder does.

Each figure is the best of N (more for the small lines, which take milliseconds), the contenders
interleaved. It prints the time per MB and its ratio to the floor, then the linearity: that ratio
at the largest line over the ratio at the smallest. (Time per MB alone also grows with the line for
the floor, as buffers outgrow the caches and fresh pages fault in: the floor takes that out.) A
decoder that re-joins its buffer on every read scales with the square of the line: 50x there;
linear is about 1x. Then the peak memory of the 50 MB Stream against the line's size.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nito_nb._client import DEFAULT_MAX_EVENT_SIZE
from nito_nb._core.sse import SSEDecoder
from nito_nb._stream_source import StreamSource


def body(megabytes: int) -> bytes:
    chunk = {
        "id": "gen-1",
        "object": "chat.completion.chunk",
        "model": "bench/model",
        "choices": [{"index": 0, "delta": {"content": "x" * (megabytes * 1_000_000)}}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n"


def run_decoder(reads: list[bytes]) -> int:
    decoder = SSEDecoder(DEFAULT_MAX_EVENT_SIZE)
    events = []
    for read in reads:
        events += decoder.decode(read)
    events += decoder.flush()
    return len(events[0].data)


def run_stream(reads: list[bytes]) -> int:
    source = StreamSource({"model": "bench/model"}, max_event_size=DEFAULT_MAX_EVENT_SIZE)
    for read in reads:
        source.feed(read, time.perf_counter_ns())
    source.end(time.perf_counter_ns())
    assert source.stream.status == "done"
    return len(source.stream.content)


def floor_decoder(reads: list[bytes]) -> int:
    whole = b"".join(reads)
    return len(whole[6 : whole.find(b"\n\n")].decode("utf-8"))


def floor_stream(reads: list[bytes]) -> int:
    whole = b"".join(reads)
    chunk = json.loads(whole[6 : whole.find(b"\n\n")].decode("utf-8"))
    return len(chunk["choices"][0]["delta"]["content"])


def best(run: Callable[[list[bytes]], int], reads: list[bytes], times: list[float]) -> None:
    gc.collect()
    start = time.perf_counter()
    run(reads)
    times.append(time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1,10,50", help="line sizes in MB, comma-separated")
    parser.add_argument("--read", type=int, default=65536, help="bytes per read")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    contenders = {"decoder": (run_decoder, floor_decoder), "Stream": (run_stream, floor_stream)}
    per_mb: dict[str, list[float]] = {name: [] for name in contenders}
    floor_per_mb: dict[str, list[float]] = {name: [] for name in contenders}
    print(
        f"one data line of N MB in {args.read:,}-byte reads, best of {args.repeats} or more interleaved runs"
    )
    for megabytes in sizes:
        data = body(megabytes)
        reads = [data[i : i + args.read] for i in range(0, len(data), args.read)]
        for name, (run, floor) in contenders.items():
            assert run(reads) == floor(reads), name
            ours: list[float] = []
            least: list[float] = []
            for _ in range(max(args.repeats, 30 // megabytes)):
                best(run, reads, ours)
                best(floor, reads, least)
            t, f = min(ours), min(least)
            per_mb[name].append(t / megabytes)
            floor_per_mb[name].append(f / megabytes)
            print(
                f"  {megabytes:>3} MB {name:8s} {t:7.3f} s = {1000 * t / megabytes:6.2f} ms/MB   "
                f"floor {1000 * f / megabytes:6.2f} ms/MB   {t / f:5.2f}x the floor"
            )
    if len(sizes) > 1:
        for name, values in per_mb.items():
            floors = floor_per_mb[name]
            ratio = (values[-1] / floors[-1]) / (values[0] / floors[0])
            print(
                f"  linearity, {name}: its ratio to the floor at {sizes[-1]} MB / at {sizes[0]} MB = "
                f"{ratio:.2f}x  (required <= 3x)  {'ok' if ratio <= 3 else 'ABOVE'}"
                f"  [time per MB: {values[-1] / values[0]:.2f}x, the floor's {floors[-1] / floors[0]:.2f}x]"
            )

    data = body(sizes[-1])
    reads = [data[i : i + args.read] for i in range(0, len(data), args.read)]
    gc.collect()
    tracemalloc.start()
    run_stream(reads)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(
        f"memory: a {sizes[-1]} MB line through a Stream peaks at {peak / len(data):.1f}x its size"
        f" (the reads themselves not counted)"
    )


if __name__ == "__main__":
    main()
