"""Runs in a real kernel (nbclient): nito_nb.run while the kernel's loop runs, its panel (a widget
with a static copy for the saved file), and the magic's --over."""

from __future__ import annotations

import queue
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import execute_cells, joined_text

#: Every test here starts a kernel or another process: `make check` leaves them to `make test`.
pytestmark = [pytest.mark.slow, pytest.mark.spawns]

WIDGET = "application/vnd.jupyter.widget-view+json"


def _outputs(cell: Any) -> list[dict[str, Any]]:
    return [dict(o) for o in cell.get("outputs", [])]


def _text(cell: Any, mime: str = "text/plain") -> str:
    texts = []
    for output in _outputs(cell):
        if output.get("output_type") in ("display_data", "execute_result"):
            texts.append((False, str(output["data"].get(mime, ""))))
        elif output.get("output_type") == "stream":
            texts.append((True, output["text"]))
    return joined_text(texts)


def test_run_panel_and_over_in_a_real_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NITO_SIM_TPS", "0")
    monkeypatch.setenv("NITO_SIM_TTFT_MS", "0")
    cells = [
        "import nito_nb, pandas as pd\n%load_ext nito_nb\n"
        "df = pd.DataFrame({'text': [f'row {i}' for i in range(20)]}, index=list('abcdefghijklmnopqrst')[::-1])",
        "run = nito_nb.run(df, template='Say {text}', model=['sim/echo', 'sim/chat'], concurrency=4, "
        "sim={'tps': 1000, 'ttft_ms': 0})\nrun",
        # At most 4 refreshes a second, the first at once, and the final one: a short run (about half a
        # second on a fast machine) has a rate above 4 by those two alone.
        "run.wait()\nthrottled = run.progress.n_updates <= 4 * (run.ended - run.started) + 2\n"
        "print(len(run.results()), set(run.results().status), throttled, type(run.progress).__name__)",
        "%%nito --over df -m sim/echo,sim/chat -o over_run\nSay {text}",
        "r = _nito\nprint(type(r).__name__, over_run is r, nito_nb.last() is r, len(r.results()), "
        "sorted(set(r.results().model)))\nprint(r.results().set_index('key').loc[r.plan.cells[0][3], 'content'])",
        "%%nito --over df -m sim/echo\n{missing} {text}",
    ]
    nb = execute_cells(cells, tmp_path, timeout=180)
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    c = nbformat.read(path, as_version=4).cells

    panel = [o for o in _outputs(c[1]) if o["output_type"] == "display_data"]
    assert len(panel) == 1 and WIDGET in panel[0]["data"]
    # The static copy for a saved notebook, updated at the end of the run (during the next cell).
    assert "done: 40/40 requests" in panel[0]["data"]["text/html"]
    assert (
        "sim/echo" in panel[0]["data"]["text/html"]
        and "<script" not in panel[0]["data"]["text/html"]
    )
    assert _text(c[2]).strip() == "40 {'done'} True Panel"
    over = [o for o in _outputs(c[3]) if o["output_type"] == "display_data"]
    assert len(over) == 1 and "done: 40/40 requests" in over[0]["data"]["text/html"]
    lines = _text(c[4]).strip().splitlines()
    assert lines[0] == "Run True True 40 ['sim/chat', 'sim/echo']"
    assert lines[1] == "Say row 0"  # the first row of df (index "t"), through the template
    error = _text(c[5])
    assert "{missing}" in error and "no such column" in error
    assert [o["output_type"] for o in _outputs(c[5])] == ["stream"]  # a UsageError: one line
    assert error.strip().startswith("UsageError: --over df: the template asks for {missing}")
    assert "Traceback" not in str(_outputs(c[5]))


def test_a_kernel_restarted_half_way_then_the_same_cell_gets_every_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's "done when": 500 rows × 2 models, the kernel restarted half-way, the cell run
    again: all 1,000 answers, once each; then DuckDB gives the p99 TTFT per model."""
    from jupyter_client.manager import KernelManager

    import nito_nb

    monkeypatch.setenv("NITO_SIM_TTFT_MS", "0")
    store = tmp_path / "summaries"
    cell = (
        "import nito_nb, pandas as pd\n"
        "df = pd.DataFrame({'text': [f'row {i}' for i in range(500)]})\n"
        f"run = nito_nb.run(df, template='Summarise: {{text}}', model=['sim/echo', 'sim/chat'], store={str(store)!r}, "
        "sim={'tps': 1000, 'ttft_ms': 0})\n"
    )
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)

        def run_code(code: str) -> str:
            out: list[str] = []

            def hook(msg: dict[str, Any]) -> None:
                if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                    out.append(msg["content"]["text"])

            kc.execute_interactive(code, output_hook=hook, timeout=120)
            return "".join(out)

        run_code(cell)
        finished = 0
        for _ in range(600):
            shown = run_code("print(run.stats()['finished'])").strip()
            # under load the print's stream message may come after the reply: ask again
            if not shown:
                continue
            finished = int(shown)
            if finished >= 300:
                break
        assert 300 <= finished < 1000
        km.restart_kernel(now=True)
        kc.wait_for_ready(timeout=60)
        out = run_code(
            cell + "run.wait()\nr = run.results()\n"
            "print(len(run.skipped) > 0, len(run.skipped) + run.total, len(r), r['done_before'].sum())"
        )
        assert out.strip().splitlines()[-1].split()[:3] == [
            "True",
            "1000",
            "1000",
        ]  # every key, once
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    with nito_nb.open_store(store) as opened:
        results = opened.results()
        assert (
            len(results) == 1000 and results["key"].is_unique and set(results["status"]) == {"done"}
        )
        assert len(set(results["run_id"])) == 2
        p99 = opened.sql(
            "select model, quantile_cont(ttft, 0.99) as p99 from requests group by model order by model"
        )
        assert list(p99["model"]) == ["sim/chat", "sim/echo"] and p99["p99"].notna().all()


def test_a_sweep_in_a_kernel_runs_in_the_background_and_saves_its_summary(tmp_path: Path) -> None:
    """In a kernel, sweep() returns before its rates ran (a blocked cell could not receive the
    view's Stop); the view shows each rate, and its static copy ends with the summary."""
    cells = [
        "import nito_nb\n"
        "sweep = nito_nb.sweep(['a', 'b'], model='sim/chat', rates=[5, 10], duration=1.0, "
        "sim={'tps': 0, 'ttft_ms': 0})\n"
        "print(sweep.done, sweep.runs[0].done)",
        "sweep.wait()\nprint(sweep.done, sweep.rates, sweep.summary()['n'].tolist(), nito_nb.last() is sweep.runs[-1])",
        "nito_nb.sweep(['a'], model='sim/chat', rates=[5], duration=1.0, warmup=2)",
    ]
    nb = execute_cells(cells, tmp_path, timeout=180)
    c = nb.cells
    assert _text(c[0]).strip().splitlines()[-1] == "False False"  # the cell ended first
    view = [o for o in _outputs(c[0]) if o["output_type"] == "display_data"]
    assert len(view) == 1 and WIDGET in view[0]["data"]
    static = view[0]["data"]["text/html"]
    assert "sweep done: 2 of 2 rates" in static and "5/s" in static and "10/s" in static
    assert "nito-sweep-summary" in static and "achieved_rate" in static
    assert _text(c[1]).strip() == "True [5, 10] [5, 10] True"
    # A bad option raises in the cell (as nito_nb.run does), before anything runs in the background.
    outputs = _outputs(c[2])
    assert [o["output_type"] for o in outputs] == ["error"] and outputs[0][
        "ename"
    ] == "ConfigurationError"
    assert "warmup=2 s and cooldown=0 s leave no time" in outputs[0]["evalue"]


def test_a_dropped_run_or_sweep_is_freed_though_its_panel_stays(tmp_path: Path) -> None:
    """ipywidgets keeps every widget (and its Stop button's handler) while its output exists; a
    panel that held its Run kept the run and all its streams in memory for the kernel's life."""
    cells = [
        "import gc, weakref, nito_nb\nfrom nito_nb import _last\n"
        "fast = {'tps': 0, 'ttft_ms': 0}\n"
        "run = nito_nb.run(['a', 'b', 'c'], model='sim/chat', concurrency=2, sim=fast)\n"
        "display(run)\nrun.wait()\n"
        "sweep = nito_nb.sweep(['a', 'b'], model='sim/chat', rates=[20, 40], duration=0.3, sim=fast)\n"
        "sweep.wait()\nprint('both ended')",  # not sweep.wait() last: IPython's Out would keep it
        "print(type(run.progress).__name__, type(sweep.view).__name__, len(sweep.runs))\n"
        "refs = [weakref.ref(x) for x in (run, sweep, *sweep.runs)]\n"
        "del run, sweep\n_last.remember(None)\ngc.collect()\n"
        "print([r() is None for r in refs])",
    ]
    nb = execute_cells(cells, tmp_path, timeout=180)
    c = nb.cells
    # both widgets shown
    assert len([o for o in _outputs(c[0]) if o["output_type"] == "display_data"]) == 2
    lines = _text(c[1]).strip().splitlines()
    assert lines == ["Panel SweepView 2", "[True, True, True, True]"], lines


def test_an_interrupt_during_run_wait_in_a_kernel_is_one_line_and_stopped_is_not_an_error(
    tmp_path: Path,
) -> None:
    """The kernel's stop button (SIGINT) while a cell waits for a run: one line that says the run
    stopped and how to resume, not nine frames of threading and concurrent.futures; the requests
    it stopped are `stopped`, and the progress does not count them as "not ok"."""
    from jupyter_client.manager import KernelManager

    store = tmp_path / "runs"
    prompts = [f"prompt {i} " + "word " * 300 for i in range(12)]
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        setup = (
            "import nito_nb\n"
            f"run = nito_nb.run({prompts!r}, model='sim/echo', concurrency=3, store={str(store)!r}, "
            "sim={'tps': 100, 'ttft_ms': 0})\n"
        )
        kc.execute_interactive(setup, timeout=120)
        msg_id = kc.execute("run.wait()")
        errors: list[dict[str, Any]] = []
        interrupted = False
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                msg = kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                msg = None
            if not interrupted and msg is None:  # the cell is waiting: its streams are under way
                time.sleep(1.0)
                km.interrupt_kernel()
                interrupted = True
                continue
            if msg is None or msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "error":
                errors.append(msg["content"])
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        assert interrupted and len(errors) == 1
        error = errors[0]
        assert error["ename"] == "KeyboardInterrupt"
        assert len(error["traceback"]) == 1, error["traceback"]  # one line, no frames
        line = error["traceback"][0]
        assert line.startswith("KeyboardInterrupt: nito stopped the run: ")
        assert (
            "stopped as they streamed" in line
            and f"run the same call again with store={str(store)!r}" in line
        )

        out: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                out.append(msg["content"]["text"])

        kc.execute_interactive(
            "from nito_nb._runs.progress import StderrLine\nimport io\n"
            "r = run.results()\nprint(run.done, sorted(set(r.status)), (r.status == 'stopped').sum())\n"
            "print(StderrLine(run, io.StringIO())._line())",
            output_hook=hook,
            timeout=60,
        )
        first, progress = "".join(out).strip().splitlines()
        done, statuses, stopped = (
            first.split(" ", 1)[0],
            first.split("] ")[0] + "]",
            int(first.rsplit(" ", 1)[1]),
        )
        assert done == "True" and "'stopped'" in statuses and stopped >= 1
        assert ", 0 not ok" in progress and f", {stopped} stopped" in progress
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
