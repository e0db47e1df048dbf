"""Benchmark of the pandas adapter (issue 4): how fast ``frame()`` and ``metrics()`` are.

    .venv/bin/python bench/bench_frame.py            # prints the figures and the ratio
    .venv/bin/python bench/bench_frame.py --without-pyarrow   # as an install without pyarrow
    .venv/bin/python bench/bench_frame.py --repeats 3          # fewer interleaved rounds
    .venv/bin/python bench/bench_frame.py --shapes openrouter,reasoning   # other shapes
    .venv/bin/python bench/bench_frame.py --many-short         # only 3. below

1. ``frame()`` of one log of 100,000 events, against
   ``pandas.json_normalize(chunks, record_path="choices", meta=[...])`` on the same chunks, for
   each chunk shape of ``bench/shapes.py`` (uniform, OpenAI's with ``obfuscation``, DeepSeek's
   reasoning, OpenAI's tool fragments) and two more logs: a synthetic one (99,998 content chunks of
   the docs/PROTOCOL.md example, a usage chunk, [DONE];
   arrival times set 1 ms apart) and a real stream of the embedded simulator (``sim/long``, ~4-byte
   Markdown deltas, a finish chunk, a usage chunk, [DONE], real arrival times). json_normalize gets
   the chunks already parsed (a list of dicts, parsed
   beforehand and not timed): only json_normalize itself is timed. ``frame()`` starts from the
   Stream (raw bytes in its log) and includes decoding the JSON again.
2. ``df.nito.metrics()`` over a frame of 1,000 streams of 100 events each.
3. ``frame()`` of many short streams: 128 streams of a run of each workload of
   ``bench/bench_runs_floor.py`` (a run store's batch), per stream and per event.

Each figure is the median (and spread) of several rounds, the contenders interleaved so that a
busy machine slows all alike. Targets (issues 4 and 32): frame() at most 0.2 s and at least 5x
faster than json_normalize on every shape (goal: within 2x of pyarrow's ``read_json`` of the
same lines, the near-limit, timed beside them); metrics() over 1,000 streams under a second; the
peak memory while framing each shape's log at most twice the log's bytes (a fresh process
each). Each line says PASS or MISS against its target. The first line says where the text
columns live: pyarrow, a dependency (``--without-pyarrow`` hides it, to measure the fallback
on Python strings of an install made with ``--no-deps``).
"""

from __future__ import annotations

import gc
import io
import json
import os
import statistics
import sys
import time
from array import array
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


class _HidePyarrow:
    """An import hook that makes pyarrow look absent (installed before pandas is imported)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.split(".")[0] == "pyarrow":
            raise ImportError(f"{name} hidden by --without-pyarrow")


if "--without-pyarrow" in sys.argv:
    sys.meta_path.insert(0, _HidePyarrow())

import pandas as pd  # noqa: E402
import shapes  # noqa: E402

import nito_nb  # noqa: E402

CHUNK = (
    '{"id":"gen-1","object":"chat.completion.chunk","created":1751299200,"model":"z-ai/glm-5.2",'
    '"choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}'
)
FINISH = (
    '{"id":"gen-1","object":"chat.completion.chunk","created":1751299200,"model":"z-ai/glm-5.2",'
    '"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
    '"usage":{"prompt_tokens":14,"completion_tokens":%d,"total_tokens":%d}}'
)
WORDS = [
    "A",
    " gateway",
    " is",
    " a",
    " single",
    " entry",
    " point",
    " for",
    " many",
    " models",
    ".",
]


def body(n_events: int) -> bytes:
    n = n_events - 2
    lines = [f"data: {CHUNK % WORDS[i % len(WORDS)]}\n\n" for i in range(n)]
    lines.append(f"data: {FINISH % (n, n + 14)}\n\n")
    lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


def timed_stream(
    n_events: int, step_ns: int, ttfb_ns: int = 50_000_000, shape: str | None = None
) -> nito_nb.Stream:
    """A finished Stream of ``n_events`` events with chosen arrival times (read_sse gives none):
    the docs/PROTOCOL.md example's chunks, or about that many of a shape of ``bench/shapes.py``."""
    s = nito_nb.read_sse(body(n_events) if shape is None else shapes.build(shape, n_events - 3))
    s.log.t0_ns = 0
    s.log.headers_ns = ttfb_ns
    s.log._times = array("q", (ttfb_ns + step_ns * (i + 1) for i in range(len(s.log))))
    s.log.timed = True  # read_sse marks its logs untimed (no arrival times); these have some now
    return s


def timed_call(fn: Callable[[], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def simulated_stream(n_chunks: int) -> nito_nb.Stream:
    """A real stream of the embedded simulator: real arrival times, ~4-byte Markdown deltas."""
    with nito_nb.Client() as client:
        s = client.stream(
            "x",
            model="sim/long",
            sim={"tps": 0, "ttft_ms": 0, "chunks": n_chunks},
            stream_options={"include_usage": True},
        )
        return s.wait()


def read_json(lines: bytes) -> Callable[[], object] | None:
    """pyarrow's JSON reader of the chunks' lines (the near-limit: C++ that parses and types
    every field), None without pyarrow. One block: with several, a field that is null in the
    first block and an object later (OpenAI's ``usage``) stops it."""
    try:
        import pyarrow.json
    except ImportError:
        return None
    options = pyarrow.json.ReadOptions(block_size=len(lines) + 1)
    return lambda: pyarrow.json.read_json(io.BytesIO(lines), read_options=options)


def compare(title: str, stream: nito_nb.Stream, repeats: int) -> None:
    chunks = [json.loads(ev.data) for ev in stream.log if ev.kind == "chunk"]
    lines = b"\n".join(ev.data.encode() for ev in stream.log if ev.kind == "chunk")
    reader = read_json(lines)
    meta = ["id", "object", "created", "model"]
    frame_times, normalize_times, reader_times = [], [], []
    for _ in range(repeats):  # interleaved: a busy machine slows all alike
        frame_times.append(timed_call(lambda: nito_nb.frame(stream)))
        normalize_times.append(
            timed_call(lambda: pd.json_normalize(chunks, record_path="choices", meta=meta))
        )
        if reader is not None:
            reader_times.append(timed_call(reader))
    df = nito_nb.frame(stream)
    assert df.nito.text().iloc[0] == stream.content
    ratios = [j / f for f, j in zip(frame_times, normalize_times, strict=True)]
    f = statistics.median(frame_times)
    print(f"{title}: {len(stream.log):,} events; medians (min-max) of {repeats} interleaved rounds")
    print(
        f"  frame():                        {spread(frame_times)} s  (target <= 0.2 s)  {verdict(f <= 0.2)}"
    )
    print(
        f"  json_normalize of its chunks:   {spread(normalize_times)} s  ({len(chunks):,} chunks parsed beforehand, "
        "not timed)"
    )
    print(
        f"  ratio json_normalize / frame(): {spread(ratios)}x  (target >= 5x)  "
        f"{verdict(statistics.median(ratios) >= 5)}"
    )
    if reader_times:
        near = [f / r for f, r in zip(frame_times, reader_times, strict=True)]
        print(
            f"  pyarrow read_json of its lines: {spread(reader_times)} s  (the lines joined beforehand, not timed)"
        )
        print(
            f"  ratio frame() / read_json:      {spread(near)}x  (goal <= 2x)  "
            f"{verdict(statistics.median(near) <= 2)}"
        )


def memory(shape: str | None) -> None:
    """Peak memory while framing a 100,000-event log, in a fresh process (its high-water mark
    reset once the log is loaded: /proc/self/clear_refs), against the log's own bytes."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "body.sse"
        path.write_bytes(body(100_000) if shape is None else shapes.build(shape, 100_000 - 3))
        out = subprocess.run(
            [sys.executable, __file__, "--memory-child", str(path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    peak, log, frame = (int(x) for x in out[-3:])
    ratio = peak / log
    print(
        f"{shape or 'synthetic'}: peak while framing {peak / 1e6:.1f} MB, the log {log / 1e6:.1f} MB "
        f"({ratio:.2f}x; target <= 2x)  {verdict(ratio <= 2)}; the frame itself {frame / 1e6:.1f} MB"
    )


def _memory_child(path: str) -> None:
    def kib(field: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) * 1024
        raise RuntimeError(field)

    stream = nito_nb.read_sse(Path(path).read_bytes())
    nito_nb.frame(nito_nb.read_sse(Path(path).read_bytes()[:2000]))  # imports, first use
    log = stream.log
    log_bytes = len(log.body) + len(log) * (8 + 8 + 1)  # the body, times, offsets, kinds
    gc.collect()
    before = kib("VmRSS:")
    Path("/proc/self/clear_refs").write_text("5")  # the high-water mark starts again here
    df = nito_nb.frame(stream)
    peak = kib("VmHWM:") - before
    print(peak, log_bytes, frame_bytes(df))


def frame_bytes(df: pd.DataFrame) -> int:
    """The frame's bytes, each buffer once: its text columns without values share one all-null
    array (``_frame/dtypes.py`` ``_nulls``), which ``memory_usage(deep=True)`` counts once per
    column."""
    buffers: dict[int, int] = {}
    total = 0
    for name in df.columns:
        array = df[name].array
        if isinstance(array, pd.arrays.ArrowExtensionArray):
            for chunk in array.__arrow_array__().chunks:
                for buffer in chunk.buffers():
                    if buffer is not None:
                        buffers[buffer.address] = max(buffers.get(buffer.address, 0), buffer.size)
        else:
            total += int(df[name].memory_usage(deep=True, index=False))
    return total + sum(buffers.values())


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def many_short(repeats: int) -> None:
    """``frame()`` of a run's streams: 128 of each workload of bench/bench_runs_floor.py (a run
    store's batch, ``_runs/writer.py`` ``BATCH_SIZE``), each with its own id and texts, from the
    embedded simulator, framed by ``run.frame()``. Short logs of one frame are planned together
    (``_frame/plan.py`` ``_plan_together``); one by one, each paid a plan's fixed cost. Printed
    per stream: about what a run store's events helper pays per request (``_runs/events.py``)."""
    workloads = {
        "sim/chat": ("sim/chat", {}),
        "openai": ("sim/chat", {"obfuscation": True}),
        "reasoning": ("sim/reasoning", {}),
        "tools": ("sim/tools", {}),
    }
    print("many short streams: frame() of 128 streams of a run (a run store's batch)")
    for name, (model, sim) in workloads.items():
        run = nito_nb.run(
            [f"request {i}" for i in range(128)],
            model=model,
            sim={"tps": 0, "ttft_ms": 0, **sim},
            progress=False,
        )
        run.wait()
        events = len(run.frame()) - 128  # a response row each
        times = [timed_call(run.frame) for _ in range(repeats)]
        print(
            f"  {name:<10} {events / 128:4.0f} events a stream: ms a stream "
            f"{spread([t / 128 * 1000 for t in times])}, "
            f"{statistics.median(times) / events * 1e6:.2f} µs an event (median of {repeats})"
        )


def main(repeats: int = 7, shape_names: tuple[str, ...] = shapes.SHAPES) -> None:
    n = 100_000
    print(f"text columns: string[{nito_nb.frame(timed_stream(3, 1)).content.dtype.storage}]")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    compare("synthetic log (read_sse, times set 1 ms apart)", timed_stream(n, 1_000_000), repeats)
    for shape in shape_names:
        compare(
            f"{shape} chunks (bench/shapes.py, times set 1 ms apart)",
            timed_stream(n, 1_000_000, shape=shape),
            repeats,
        )
    compare("simulator stream (sim/long, real arrival times)", simulated_stream(n - 3), repeats)
    print("memory (fresh processes):")
    for shape in (None, *shape_names):
        memory(shape)

    streams = [timed_stream(100, 20_000_000 + 1000 * i) for i in range(1000)]
    build_times = [timed_call(lambda: nito_nb.frame(streams)) for _ in range(3)]
    many = nito_nb.frame(streams)
    metric_times = [timed_call(many.nito.metrics) for _ in range(repeats)]
    assert len(many.nito.metrics()) == 1000
    assert many.nito.metrics()["itl"].notna().all()  # timed streams: the timing path is measured
    print(f"1,000 streams of 100 events ({len(many):,} rows)")
    print(f"  frame():                        {min(build_times):.3f} s  (best of 3)")
    print(
        f"  metrics():                      {min(metric_times):.3f} s  (best of {repeats}; target < 1 s)"
    )
    many_short(repeats)


if __name__ == "__main__":
    if "--memory-child" in sys.argv:
        _memory_child(sys.argv[sys.argv.index("--memory-child") + 1])
        sys.exit()
    if "--many-short" in sys.argv:  # only the many short streams
        many_short(int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 7)
        sys.exit()
    main(
        int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 7,
        # the shapes of bench/shapes.py measured (default: SHAPES; build() knows "openrouter" too)
        tuple(sys.argv[sys.argv.index("--shapes") + 1].split(","))
        if "--shapes" in sys.argv
        else shapes.SHAPES,
    )
