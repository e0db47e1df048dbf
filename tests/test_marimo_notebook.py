"""notebooks/marimo_quickstart.py runs headless in marimo (``marimo export html``, marimo's own
runner, in a process of its own) on the simulator: no cell fails, each output is the final state
(the answers' last words, the status lines, the run's table) and model text stays escaped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("marimo")

pytestmark = [pytest.mark.slow, pytest.mark.spawns]

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "notebooks" / "marimo_quickstart.py"
MARIMO = Path(sys.executable).with_name("marimo")

EXPECTED = [
    "on the embedded simulator (NITO_API_KEY is unset)",
    "Tip: when a stream fails halfway, keep what arrived",  # the end of sim/chat's answer
    "done · sim/chat · TTFT",  # the status line of the final state
    "Reasoning (",
    "That is all there is to it.",  # the end of sim/reasoning's answer
    "Tool call get_weather",
    "valid JSON: True",
    "✗ Error 502: Upstream provider disconnected (simulated fault).",
    "&lt;script&gt;console.log(",  # the hostile echo, escaped
    "<marimo-chatbot",  # the chat element
    "no turn yet",  # the chat model's status lines (nobody typed: headless)
    "done: 4/4 requests",  # the run's final table
]


def session_of(exported: str) -> dict[str, Any]:
    """The executed cells (outputs and console) that marimo's HTML export embeds."""
    at = exported.index('"session": ') + len('"session": ')
    session, _ = json.JSONDecoder().raw_decode(exported[at:])
    return session


def outputs_text(session: dict[str, Any]) -> str:
    texts = []
    for cell in session["cells"]:
        for output in cell["outputs"]:
            texts.extend(str(value) for value in output.get("data", {}).values())
        texts.extend(str(item.get("text", "")) for item in cell["console"])
    return "\n".join(texts)


@pytest.fixture(scope="module")
def exported(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], str]:
    where = tmp_path_factory.mktemp("marimo")
    # A copy: marimo keeps a session cache (__marimo__/) beside the notebook it runs.
    notebook = where / NOTEBOOK.name
    notebook.write_text(NOTEBOOK.read_text(encoding="utf-8"), encoding="utf-8")
    out = where / "marimo_quickstart.html"
    env = {k: v for k, v in os.environ.items() if k != "NITO_API_KEY"}
    env.update(
        NITO_SIM_TPS="0",
        NITO_SIM_TTFT_MS="0",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
    )
    done = subprocess.run(
        [str(MARIMO), "export", "html", str(notebook), "-o", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        cwd=out.parent,
    )
    return done, out.read_text(encoding="utf-8") if out.exists() else ""


def test_the_marimo_quickstart_runs_headless_with_final_answers(
    exported: tuple[subprocess.CompletedProcess[str], str],
) -> None:
    done, html = exported
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cells failed" not in done.stdout + done.stderr
    text = outputs_text(session_of(html))
    missing = [expected for expected in EXPECTED if expected not in text]
    assert not missing, missing
    # The run's progress is the cell's output: no line from its writer thread in any console.
    assert "nito: " not in text


def test_model_text_never_became_markup_in_the_marimo_outputs(
    exported: tuple[subprocess.CompletedProcess[str], str],
) -> None:
    _, html = exported
    text = outputs_text(session_of(html))
    assert "<script>console.log" not in text and "<img src=x" not in text
    assert 'href="javascript' not in text
    assert str(Path.home()) not in text and str(REPO) not in text  # nothing of the machine
