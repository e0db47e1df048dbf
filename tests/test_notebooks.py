"""The notebooks of notebooks/ and `python -m nito_nb.demo`: a new user's first ten minutes.

Each notebook runs top to bottom in a real kernel (nbclient) on the embedded simulator, the way CI
and `make demo` run it, and what is checked is what a reader of the executed notebook gets: no
error, the final answers in the outputs, nothing of the machine (paths) and nothing secret.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import joined_text

from nito_nb import demo

#: Every test here starts a kernel or another process: `make check` leaves them to `make test`.
pytestmark = [pytest.mark.slow, pytest.mark.spawns]

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
NAMES = [path.stem for path in NOTEBOOKS]

# Strings the simulator produces deterministically, one or more per capability each notebook
# shows; the last words of an answer prove the final state was saved, not a mid-stream one.
EXPECTED = {
    "quickstart": [
        "on the embedded simulator (NITO_API_KEY is unset)",
        "Streaming, in short",
        "Tip: when a stream fails halfway, keep what arrived",  # the end of sim/chat's answer
        "✓ done · sim/chat",
        "Reasoning (",
        "That is all there is to it.",  # the end of sim/reasoning's answer
        "Tool call get_weather",
        "✗ Error 502: Upstream provider disconnected (simulated fault).",
        "nito: MidStreamError",
        "stopped | kept ",
        "■ stopped · sim/chat",
        "finish: length",
        "user: 'My name is Ada.'",
        "== sim/chat ==",
        "== sim/reasoning ==",
        "&lt;script&gt;console.log(",  # the hostile echo, escaped
        "You: How does a streaming chat completion work?",  # the widget's snapshot
    ],
    "analysis": [
        "on the embedded simulator (NITO_API_KEY is unset)",
        "output_tps",
        "the saved logs and the CSV give the same metrics",
        "charmbracelet/fantasy",
        "tool call: weather {'location': 'Florence, Italy'}",
        "I'll check the weather in Florence, Italy for you.",
        "Tool call weather",
        "achieved_rate",  # the sweep's summary
        "rows over rates [1.0, 2.0, 4.0, 8.0, 16.0]",  # sweep.frame(): every rate in one frame
        "client ttft",  # the server's queue, prefill and decode beside the client's TTFT
        "spans exported: 3",  # a run exported to OpenTelemetry and read back (nito_nb.otel)
        "gen_ai.client.operation.time_per_output_chunk",
        "Verdict(label=",  # structured output (docs/STRUCTURED.md)
        "valid_share",
        "mentions_sse (95% interval)",  # a run graded three ways, compared (docs/SCORES.md)
        "below p=0.5",  # token confidence
    ],
    "tools": [
        "on the embedded simulator (NITO_API_KEY is unset)",
        "finish reason: tool_calls",
        "Tool call get_time",
        "Here is what the tools returned:",
        "All done.",
        "done | Here is what the tools returned:",
        '"name": "get_weather"',
        "→ ran get_weather(city=",  # %%nito --run-tools
    ],
}
# Figures each notebook must show as images (not as "<Figure size ...>" text).
IMAGES = {"analysis": 6}

# What must never be in a saved output: the machine's paths, and anything like a credential.
MACHINE_PATHS = sorted(
    {str(REPO), str(Path.home()), sys.prefix, "/work/", "/root/", "/tmp/", "/home/"} - {"/"},
    key=len,
    reverse=True,
)
SECRET = re.compile(r"sk-[A-Za-z0-9_-]{8,}|Bearer\s+[A-Za-z0-9._-]{8,}|NITO_API_KEY=\S", re.I)
HOSTILE_RAW = ("<script>console.log(", "<img src=x onerror", 'href="javascript:')


@pytest.fixture(scope="module")
def simulator_env() -> Iterator[None]:
    """The kernels inherit this environment: no key (so the simulator), the fastest pace."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ("NITO_API_KEY", "NITO_BASE_URL", "NITO_MODEL", "NITO_COMPARE"):
            mp.delenv(name, raising=False)
        mp.setenv("NITO_SIM_TPS", "0")
        mp.setenv("NITO_SIM_TTFT_MS", "0")
        yield


@pytest.fixture(scope="module")
def executed(simulator_env: None) -> dict[str, Any]:
    """Each notebook, executed once for all the tests of this module."""
    return {}


def run(name: str, cache: dict[str, Any]) -> tuple[Any, list[tuple[int, str]]]:
    if name not in cache:
        cache[name] = demo.run_notebook(REPO / "notebooks" / f"{name}.ipynb", progress=False)
    return cache[name]


def outputs(nb: Any) -> Iterator[dict[str, Any]]:
    for cell in nb.cells:
        yield from cell.get("outputs", [])


def output_text(nb: Any) -> str:
    """Everything a reader sees, as text: streams, plain text and HTML of every output."""
    texts = []
    for output in outputs(nb):
        if output["output_type"] == "stream":
            texts.append((True, output["text"]))
        elif output["output_type"] in ("display_data", "execute_result"):
            texts.extend(
                (False, str(output["data"].get(mime, ""))) for mime in ("text/plain", "text/html")
            )
        elif output["output_type"] == "error":
            texts.append((False, "\n".join(output.get("traceback", []))))
    return joined_text(texts)


def saved_without_images(nb: Any) -> str:
    """The executed notebook as saved, minus image data (base64 can spell anything)."""
    copy = nbformat.from_dict(json.loads(json.dumps(nb)))
    for output in outputs(copy):
        for mime in list(output.get("data", {})):
            if mime.startswith("image/"):
                output["data"][mime] = "<image>"
    return nbformat.writes(copy)


def test_every_notebook_has_checks() -> None:
    assert set(NAMES) == set(EXPECTED), "a notebook without checks (or checks without notebook)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_committed_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert "widgets" not in nb.metadata  # no saved widget state either
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
    # The first code cell says where it runs: the simulator unless NITO_API_KEY is set.
    first = next(cell for cell in nb.cells if cell.cell_type == "code")
    assert "NITO_API_KEY" in first.source and "print(" in first.source


@pytest.mark.parametrize("name", NAMES)
def test_runs_on_the_simulator_with_final_answers(name: str, executed: dict[str, Any]) -> None:
    nb, errors = run(name, executed)
    assert errors == []
    # Nothing unexpected on stderr either (a UsageError of a magic is printed, not raised): only
    # the magic's one-line error reports, which the notebooks show on purpose.
    for output in outputs(nb):
        if output["output_type"] == "stream" and output["name"] == "stderr":
            for line in output["text"].splitlines():
                assert line.startswith("nito: "), line
    text = output_text(nb)
    missing = [s for s in EXPECTED[name] if s not in text]
    assert not missing
    images = sum("image/png" in output.get("data", {}) for output in outputs(nb))
    assert images >= IMAGES.get(name, 0)
    assert "<Figure size" not in text or images


@pytest.mark.parametrize("name", NAMES)
def test_outputs_hold_no_machine_path_and_no_secret(name: str, executed: dict[str, Any]) -> None:
    nb, _ = run(name, executed)
    saved = saved_without_images(nb)
    for path in MACHINE_PATHS:
        assert path not in saved, path
    assert not SECRET.search(saved)
    # Model text never became markup in an output (the hostile echo of the quickstart).
    for output in outputs(nb):
        for mime, value in output.get("data", {}).items():
            if mime == "text/html":
                assert not any(raw in value for raw in HOSTILE_RAW), value[:200]


def _png_size(png: bytes) -> tuple[int, int]:
    assert png[12:16] == b"IHDR"
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def test_the_readme_figure_is_what_make_figures_writes(
    executed: dict[str, Any], tmp_path: Path
) -> None:
    """docs/load-knee.png (the README's load section) is the knee figure of analysis.ipynb as
    `make figures` writes it (`python -m nito_nb.demo --figure`): stamped with a digest of the
    cell's source as it is now, the size this run's figure has. Its numbers are a run's."""
    nb, _ = run("analysis", executed)
    written = demo.write_figure(
        nb, REPO / "notebooks" / "analysis.ipynb", f"knee-figure={tmp_path / 'knee.png'}"
    )
    fresh, committed = written.read_bytes(), (REPO / "docs" / "load-knee.png").read_bytes()
    source = demo.png_text(fresh)[demo.FIGURE_KEYWORD]
    assert source.startswith(
        "python -m nito_nb.demo --figure: notebooks/analysis.ipynb, cell knee-figure"
    )
    assert demo.png_text(committed).get(demo.FIGURE_KEYWORD) == source, (
        "run `make figures`, commit docs/load-knee.png"
    )
    assert _png_size(committed) == _png_size(fresh)
    assert "](docs/load-knee.png)" in (REPO / "README.md").read_text(encoding="utf-8")
    assert "make figures" in (REPO / "README.md").read_text(encoding="utf-8")


def test_demo_command_exports_the_quickstart(tmp_path: Path, simulator_env: None) -> None:
    """The README's main job, as `make demo` runs it (there with the default pace)."""
    out = tmp_path / "out" / "quickstart.html"
    done = subprocess.run(
        [sys.executable, "-m", "nito_nb.demo", "--out", str(out)],
        cwd=tmp_path,  # the notebooks are found next to the package, not in the cwd
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "embedded simulator" in done.stderr
    assert re.search(
        r"Wrote .*quickstart\.html: \d+ code cells in [\d.]+ s, 0 with errors", done.stdout
    )
    page = out.read_text(encoding="utf-8")
    for final in ("Streaming, in short", "Tip: when a stream fails halfway", "stopped · sim/chat"):
        assert final in page
    # The nbconvert template has its own scripts; the model's payload is text.
    assert not any(raw in page for raw in HOSTILE_RAW)
    assert "&lt;script&gt;console.log(" in page
    assert str(REPO) not in page and str(tmp_path) not in page


def test_demo_fails_on_an_error_cell_and_still_exports(
    tmp_path: Path, simulator_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("print('before')"),
        nbformat.v4.new_code_cell("1 / 0"),
        nbformat.v4.new_code_cell("print('after')"),
    ]
    path = tmp_path / "broken.ipynb"
    nbformat.write(notebook, path)
    out = tmp_path / "broken.html"
    assert demo.main(["--notebook", str(path), "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "3 code cells" in captured.out and "1 with errors" in captured.out
    assert "code cell 2: ZeroDivisionError" in captured.err
    page = out.read_text(encoding="utf-8")
    assert "ZeroDivisionError" in page and "after" in page  # every cell ran


def test_demo_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo.main(["--notebook", "no-such-notebook"]) == 2
    assert "give one of quickstart, analysis, tools" in capsys.readouterr().err
    monkeypatch.setattr(demo, "notebooks_dir", lambda: None)
    assert demo.main([]) == 2
    assert "the notebooks/ folder was not found" in capsys.readouterr().err
