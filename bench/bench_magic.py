"""Benchmark of the %%nito magic end to end: update messages, bytes sent, slowdown of the display.

    .venv/bin/python bench/bench_magic.py            # prints the figures; exit 1 if a target fails
    .venv/bin/python bench/bench_magic.py --rounds 5 --chunks 50000 --shapes uniform,openai
    .venv/bin/python bench/bench_magic.py --kernel       # in a real kernel, counted on IOPub

The answers, 50,000 chunks each at full speed (``sim={"tps": 0}``), served by the simulator in its
own process (``python -m nito_nb.sim``) so that the server does not compete with the magic for
this process's GIL, on the chunk shapes real gateways send (``bench/bench_display.py``'s): ``sim/long``
itself (``uniform``, about 200 KB of Markdown), and the same text in OpenAI's chunks with
``obfuscation`` (``openai``), as DeepSeek's reasoning (``reasoning``) and as a tool call's JSON
arguments (``tools``): ``bench/shapes.py`` bodies, sent by the simulator's ``sim/replay``.

Two cells, interleaved, per shape and round:

- "magic": ``%%nito -m MODEL --param sim=...``, the live HTML display;
- "no display": the same request iterated with ``nito_nb.stream`` and nothing else.

Where they run: by default an IPython ``InteractiveShell`` that behaves as a kernel (``in_kernel``
patched, so the notebook path is taken: HTML parts, display ids), its display publisher counting
every message a kernel would send (display + update_display) and its bytes (the JSON of its mime
bundle, as it goes over IOPub), timed around ``run_cell``; with ``--kernel``, a real IPython
kernel (jupyter_client), timed from the execute request to the kernel's idle, the messages counted
as they arrive on IOPub (what a frontend receives, after the kernel's serialization and signing).

Renders are counted where they happen: each ``LiveDisplay`` the cell made is kept (its
``__init__`` wrapped by a setup cell), and its ``n_updates`` (renders that sent something) and
``n_messages`` read after the cell; the messages counted on IOPub must be those it sent.

Interleaved rounds (a busy machine slows both alike), each contender first in every other round,
after one warm-up cell of each per shape (imports, connections, the kernel's first messages); the
medians of the per-round figures with their spread, and the load average. Both cells do the same
work but the display: the same request to the same simulator, read to its end by the engine in the
cell's thread; the magic adds its options, its checks and keeping the Stream (``_nito``, a few
dozen objects for the collector: measured, not a cost that grows with the rounds).

Targets (issue 32), per shape: bytes sent <= 2x the text the
model sent (content, reasoning, tool arguments); speed with display >= 0.8x the speed without;
renders at most 20 a second, besides the first (a quarter second after the view starts,
``FIRST_RENDER_DELAY``: a stream that ends sooner has only its final render) and the final one (the
throttle's interval runs from the end of one render to the start of the next). The floor, one render of the
final answer (its HTML and its text/plain, JSON-escaped, ``final_bundle``), is printed beside the
bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_display import SHAPES, shape_requests  # noqa: E402
from IPython.core.displaypub import DisplayPublisher  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

import nito_nb  # noqa: E402
from nito_nb._display import notebook as _display  # noqa: E402

#: Run once in the shell or kernel: keeps every LiveDisplay a cell makes, to read its counters.
COUNT_VIEWS = """
from nito_nb._display.notebook import LiveDisplay as _BenchView
_bench_views = []
_bench_init = _BenchView.__init__
def _bench_kept(self, *args, **kwargs):
    _bench_init(self, *args, **kwargs)
    _bench_views.append(self)
_BenchView.__init__ = _bench_kept
"""

#: Run after each magic cell: what it showed and how, as the JSON of ``_bench_figures``.
FIGURES = """
import json as _json
from nito_nb._render import final_bundle as _final_bundle
_texts = [_nito.content or "", _nito.reasoning or "", *(c.arguments or "" for c in _nito.tool_calls)]
_bench_figures = {
    "answer": sum(len(t.encode("utf-8")) for t in _texts),
    "floor": len(_json.dumps(_final_bundle(_nito), ensure_ascii=False).encode("utf-8")),
    "status": _nito.status,
    "n_chunks": _nito.n_chunks,
    "tails": [t[-100:] for t in _texts[:2] if t],
    "renders": sum(v.n_updates for v in _bench_views),
    "messages": sum(v.n_messages for v in _bench_views),
}
_bench_views.clear()
"""


class CountingPublisher(DisplayPublisher):
    """Keeps what a kernel would send for each display / update_display call."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent: list[dict[str, Any]] = []

    def publish(
        self,
        data: Any,
        metadata: Any = None,
        source: Any = None,
        *,
        transient: Any = None,
        update: bool = False,
        **kwargs: Any,
    ) -> None:
        self.sent.append({"data": data, "display_id": (transient or {}).get("display_id")})

    def clear_output(self, wait: bool = False) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_simulator(replays: Path | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """The simulator in its own process at ``tps 0``, serving ``replays`` (a folder of recordings
    for ``sim/replay``) when given; the other benches start it too."""
    port = free_port()
    env = {**os.environ, "NITO_SIM_TPS": "0", "NITO_SIM_TTFT_MS": "0"}
    if replays is not None:
        env["NITO_SIM_REPLAY_DIRS"] = str(replays)
    env.pop("NITO_SIM_API_KEY", None)
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nito_nb.sim", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60  # generous: a busy CI machine starts Python slowly
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, base_url
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                log.seek(0)
                output = log.read().decode("utf-8", "replace")[-2000:]
                raise RuntimeError(f"the simulator did not start:\n{output}") from None
            time.sleep(0.1)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--chunks", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default=",".join(SHAPES), help="of " + ",".join(SHAPES))
    ap.add_argument("--kernel", action="store_true", help="measure in a real kernel, on IOPub")
    args = ap.parse_args()
    chosen = [s for s in args.shapes.split(",") if s]
    unknown = sorted(set(chosen) - set(SHAPES))
    if unknown:
        ap.error(f"--shapes: unknown {', '.join(unknown)}; choose among {', '.join(SHAPES)}")

    folder = Path(tempfile.mkdtemp(prefix="nito-bench-magic-"))
    proc, base_url = start_simulator(folder)
    # An explicit base URL sends a key even for sim/ models; the standalone simulator takes any.
    os.environ["NITO_API_KEY"] = "sk-bench-not-a-secret"
    where = "a real kernel, counted on IOPub" if args.kernel else "IPython's shell, at publish"
    try:
        text = (
            nito_nb.stream(
                "Write a long answer.",
                model="sim/long",
                base_url=base_url,
                sim={"chunks": args.chunks, "tps": 0, "ttft_ms": 0},
            )
            .wait()
            .content
        )
        requests = shape_requests(text, args.chunks, folder)
        cells = kernel_cells if args.kernel else shell_cells
        with cells(base_url) as run:
            rows, load_before, load_after = rounds_of(run, base_url, requests, chosen, args.rounds)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(folder, ignore_errors=True)
    print(f"%%nito, {args.chunks:,} chunks of each shape, {args.rounds} interleaved rounds "
          f"({where}; simulator in its own process), load average {load_before[0]:.1f} before, "
          f"{load_after[0]:.1f} after")  # fmt: skip
    ok = True
    for shape in chosen:
        ok = report(shape, rows[shape]) and ok
    return 0 if ok else 1


#: A cell runner: code -> (seconds, CPU seconds of the shell's or kernel's process, the display
#: messages the cell sent, ``_bench_figures`` if the cell set it).
Ran = tuple[float, float, list[dict[str, Any]], dict[str, Any] | None]
Run = Callable[[str], Ran]


def rounds_of(
    run: Run,
    base_url: str,
    requests: dict[str, tuple[str, dict[str, Any]]],
    chosen: list[str],
    rounds: int,
) -> tuple[dict[str, list[dict[str, Any]]], tuple[float, ...], tuple[float, ...]]:
    """The magic and the plain stream of each shape, interleaved; the figures of each round."""
    run(
        "%load_ext nito_nb\n"
        "import os, nito_nb; os.environ['NITO_API_KEY'] = 'sk-bench-not-a-secret'\n"
        f"%config Nito.base_url = {base_url!r}\n" + COUNT_VIEWS
    )

    def magic(shape: str) -> str:
        model, sim = requests[shape]
        return f"%%nito -m {model} --param sim='{json.dumps(sim)}'\nWrite a long answer."

    def plain(shape: str) -> str:
        model, sim = requests[shape]
        return (
            f"_s = nito_nb.stream('Write a long answer.', model={model!r}, "
            f"base_url={base_url!r}, sim={sim!r})\nfor _ in _s: pass"
        )

    for shape in chosen:  # warm-up: imports, markdown-it, connections, the bodies read once
        run(magic(shape))
        run(plain(shape))
    run(FIGURES)
    load_before = os.getloadavg()
    rows: dict[str, list[dict[str, Any]]] = {shape: [] for shape in chosen}
    for round_ in range(rounds):
        for shape in chosen:
            # Each contender goes first in every other round: the cell after another one may find
            # the machine (its caches, the simulator, the kernel's IOPub thread) in another state.
            if round_ % 2:
                took, cpu, messages, _ = run(magic(shape))
                plain_took, plain_cpu, _, _ = run(plain(shape))
            else:
                plain_took, plain_cpu, _, _ = run(plain(shape))
                took, cpu, messages, _ = run(magic(shape))
            figures = run(FIGURES)[3]
            assert figures is not None and figures["status"] == "done", (shape, figures)
            # What each output shows at the end: its last message's text/plain, in order.
            last: dict[Any, str] = {}
            for position, message in enumerate(messages):
                last[message["display_id"] or position] = message["data"].get("text/plain", "")
            final = "".join(last.values())
            assert all(tail in final for tail in figures["tails"]), "the end of the answer shows"
            assert len(messages) == figures["messages"], (len(messages), figures["messages"])
            rows[shape].append(
                {
                    **figures,
                    "ratio": plain_took / took,
                    "cpu_ratio": plain_cpu / cpu,
                    "took": took,
                    "plain": plain_took,
                    "bytes": sum(
                        len(json.dumps(m["data"], ensure_ascii=False).encode("utf-8"))
                        for m in messages
                    ),
                }
            )
    return rows, load_before, os.getloadavg()


def report(shape: str, rows: list[dict[str, Any]]) -> bool:
    def med(key: str) -> float:
        return statistics.median(row[key] for row in rows)

    def span(values: list[float], fmt: str = ".2f") -> str:
        return f"{min(values):{fmt}}-{max(values):{fmt}}"

    answer = rows[-1]["answer"]
    factors = [row["bytes"] / row["answer"] for row in rows]
    ratios = [row["ratio"] for row in rows]
    # The throttle allows one render per 1/20 s, from the end of one to the start of the next,
    # and the first (at once) and the final render come on top: a round whose live renders
    # exceed 20 a second is a MISS, in any round, not only the median's.
    rates = [max(0, row["renders"] - 2) / row["took"] for row in rows]
    rate_ok = all(row["renders"] <= 20 * row["took"] + 2 for row in rows)
    bytes_ok = statistics.median(factors) <= 2.0
    speed_ok = statistics.median(ratios) >= 0.8
    verdict = {True: "PASS", False: "MISS"}
    print(f"  {shape:<9} answer {answer / 1e3:.0f} KB in {rows[-1]['n_chunks']:,} chunks")
    print(
        f"    renders           median {med('renders'):.0f} ({span(rates, '.1f')} a second "
        f"besides the first and the final), {med('messages'):.0f} messages  "
        f"<= 20/s: {verdict[rate_ok]}"
    )
    print(
        f"    bytes sent        median {statistics.median(factors):.2f}x the answer "
        f"(rounds {span(factors)}); floor, one render of the final answer "
        f"{rows[-1]['floor'] / answer:.2f}x  <= 2x: {verdict[bytes_ok]}"
    )
    print(
        f"    time              median {med('took'):.3f} s with display, "
        f"{med('plain'):.3f} s without"
    )
    print(
        f"    speed with/without median {statistics.median(ratios):.2f}x (rounds {span(ratios)})"
        f"  >= 0.8x: {verdict[speed_ok]}"
    )
    cpu = [row["cpu_ratio"] for row in rows]
    print(
        f"    CPU time without/with median {statistics.median(cpu):.2f}x (rounds {span(cpu)}; "
        "all the process's threads, no target: less bent by a busy machine than the time)"
    )
    return bytes_ok and speed_ok and rate_ok


class shell_cells:
    """Cells run in an IPython shell that behaves as a kernel; ``run(code)`` returns (seconds,
    the display messages it published, ``_bench_figures`` if the cell set it)."""

    def __init__(self, base_url: str) -> None:
        self.shell = InteractiveShell.instance()
        self.publisher = CountingPublisher()
        self.shell.display_pub = self.publisher
        _display.in_kernel = lambda: True  # the notebook path: HTML parts, display ids

    def __enter__(self) -> Run:
        return self.run

    def __exit__(self, *exc_info: Any) -> None:
        pass

    def run(self, code: str) -> Ran:
        self.publisher.sent = []
        self.shell.user_ns.pop("_bench_figures", None)
        start, cpu = time.perf_counter(), time.process_time()
        result = self.shell.run_cell(code, store_history=False)
        took, cpu = time.perf_counter() - start, time.process_time() - cpu
        result.raise_error()
        return took, cpu, self.publisher.sent, self.shell.user_ns.get("_bench_figures")


class kernel_cells:
    """Cells run in a real kernel (jupyter_client); ``run(code)`` returns (seconds from the
    execute request to idle, the display messages that arrived on IOPub, ``_bench_figures`` if the
    cell set it)."""

    def __init__(self, base_url: str) -> None:
        from jupyter_client.manager import KernelManager

        self.km = KernelManager(kernel_name="python3")

    def __enter__(self) -> Run:
        self.km.start_kernel(cwd=tempfile.mkdtemp())
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        import psutil  # ipykernel's own dependency

        _, printed = self.execute("import os; print(os.getpid())")
        self.process = psutil.Process(int(printed_text(printed)))
        return self.run

    def __exit__(self, *exc_info: Any) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def execute(self, code: str) -> tuple[float, list[dict[str, Any]]]:
        start = time.perf_counter()
        msg_id = self.kc.execute(code)
        seen = []
        while True:
            msg = self.kc.get_iopub_msg(timeout=300)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "error":
                raise RuntimeError("\n".join(msg["content"]["traceback"]))
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return time.perf_counter() - start, seen
            seen.append(msg)

    def cpu(self) -> float:
        times = self.process.cpu_times()
        return float(times.user + times.system)

    def run(self, code: str) -> Ran:
        cpu = self.cpu()
        took, seen = self.execute(code)
        cpu = self.cpu() - cpu
        shown = [
            {
                "data": m["content"]["data"],
                "display_id": (m["content"].get("transient") or {}).get("display_id"),
            }
            for m in seen
            if m["msg_type"] in ("display_data", "update_display_data")
        ]
        figures = None
        if "_bench_figures = " in code:
            _, printed = self.execute("print(_json.dumps(_bench_figures))")
            figures = json.loads(printed_text(printed))
        return took, cpu, shown, figures


def printed_text(messages: list[dict[str, Any]]) -> str:
    """What a cell printed, from its IOPub messages."""
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")


if __name__ == "__main__":
    raise SystemExit(main())
