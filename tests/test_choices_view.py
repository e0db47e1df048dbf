"""The choices of ``n > 1`` side by side (issue 33): the renderer (``_render/choices.py``) and the
magic's live view (``_magic/grid.py`` ``ChoiceGrid``), over HTTP on the simulator (``sim/chat``
with ``n=3`` sends distinct choices); a kernel runs the cell and saves the notebook.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
import threading
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from test_magic import ACTIVE_TAG, HOSTILE, Recorder, notebook, run  # noqa: F401 (fixture)
from test_sim import QUICK

import nito_nb
from nito_nb._core.status import Status
from nito_nb._render.choices import choices_bundle

CELL_PARAMS = "--param n=3 --param max_tokens=60 --param sim='{\"tps\": 200}'"


def ask(**params: Any) -> nito_nb.Stream:
    # A client of its own, closed: no connection left in the default client's pool for a later
    # test that counts the connect of its first request (test_connect.py).
    with nito_nb.Client() as client:
        s = client.stream("Say something.", sim=QUICK, **params)
        s.wait()
    return s


def shown(page: str) -> str:
    """What a reader sees of an HTML page."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def hostile_choices() -> nito_nb.Stream:
    """A recorded stream of two choices, the second one a hostile answer and tool call."""

    def chunk(*choices: dict[str, Any]) -> str:
        return "data: " + json.dumps({"id": "c", "model": "m", "choices": list(choices)}) + "\n\n"

    call = {
        "index": 0,
        "id": "x",
        "type": "function",
        "function": {"name": "<b>f</b>", "arguments": json.dumps({"a": HOSTILE})},
    }
    body = (
        chunk({"index": 0, "delta": {"role": "assistant", "content": "plain answer"}})
        + chunk(
            {"index": 1, "delta": {"role": "assistant", "content": HOSTILE, "tool_calls": [call]}}
        )
        + chunk(
            {"index": 0, "delta": {}, "finish_reason": "stop"},
            {"index": 1, "delta": {}, "finish_reason": "stop"},
        )
        + "data: [DONE]\n\n"
    )
    return nito_nb.read_sse(body.encode())


@pytest.mark.parametrize("live", [True, False])
def test_each_choice_is_a_column_under_the_streams_status(live: bool) -> None:
    s = ask(model="sim/chat", n=3)
    bundle = choices_bundle(s.snapshot(), s.choices, live=live)
    page, text = bundle["text/html"], bundle["text/plain"]
    assert 'class="nito-grid"' in page and "repeat(3," in page
    for choice in s.choices:
        assert f"== choice {choice.index} ==" in text
        assert choice.content.splitlines()[-1] in text
    assert len({c.content for c in s.choices}) > 1
    # One status line, the stream's, above the columns (not one per choice).
    assert text.count("done") == 1 and text.index("done") < text.index("== choice 0 ==")


def test_a_choices_text_stays_data() -> None:
    s = hostile_choices()
    for live in (True, False):
        page = choices_bundle(s.snapshot(), s.choices, live=live)["text/html"]
        lowered = page.lower()
        assert (
            "<img" not in lowered and "<script" not in lowered and 'href="javascript' not in lowered
        )
        assert not ACTIVE_TAG.search(page) and "<b>f</b>" not in page
        assert "<script>window.__xss2=1</script>" in shown(page)  # shown as text


def test_the_magic_shows_the_choices_side_by_side_live(ip: Any, notebook: Recorder) -> None:  # noqa: F811
    run(ip, f"-m sim/chat {CELL_PARAMS}", "Say something.")
    stream = ip.user_ns["_nito"]
    assert stream.status == "done" and len(stream.choices) == 3
    grids = [m for m in notebook.messages if "== choice 2 ==" in m["data"].get("text/plain", "")]
    assert grids, "no view of the choices"
    live = [m for m in grids if "● streaming" in m["data"]["text/plain"]]
    assert len(live) > 1 and len(grids) > len(live)  # drawn as it streamed, then the final view
    assert {m["thread"] for m in grids} <= {threading.current_thread().name, "nito_nb-choices"}
    final = grids[-1]["data"]
    assert "● streaming" not in final["text/plain"] and "done" in final["text/plain"]
    for choice in stream.choices:
        assert choice.content.splitlines()[-1] in final["text/plain"]


def test_the_magic_shades_the_answer_by_token_probability(ip: Any, notebook: Recorder) -> None:  # noqa: F811
    run(
        ip,
        "-m sim/chat --logprobs 2 --shade --param max_tokens=30 --param sim='{\"tps\": 200}'",
        "Say something.",
    )
    stream = ip.user_ns["_nito"]
    assert stream.status == "done" and stream.logprobs
    final = [m for m in notebook.messages if "nito-shaded" in m["data"].get("text/html", "")][-1][
        "data"
    ]
    titles = re.findall(r'title="([^"]*)"', final["text/html"])
    assert len(titles) == len(stream.logprobs) and all(
        html.unescape(t).count("\n") == 2 for t in titles
    )
    assert "token probability" in final["text/html"] and "done" in final["text/plain"]
    assert stream.content in final["text/plain"]


@pytest.mark.spawns
@pytest.mark.slow
def test_a_saved_notebook_keeps_the_choices_side_by_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NITO_API_KEY", "sk-test-0000")  # no gateway call: sim/ models only
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(source)
        for source in (
            "%load_ext nito_nb",
            f"%%nito -m sim/chat {CELL_PARAMS}\nSay something.",
            "print([c.content for c in _nito.choices])",
            "%%nito -m sim/chat --logprobs 2 --shade --param max_tokens=20\nSay something.",
        )
    ]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    cells = nbformat.read(path, as_version=4).cells
    outputs = [o for o in cells[1].outputs if "data" in o]
    assert not [o for o in cells[1].outputs if o.get("output_type") == "error"]
    final = outputs[-1]["data"]
    assert 'class="nito-grid"' in final["text/html"] and "== choice 2 ==" in final["text/plain"]
    assert "● streaming" not in final["text/plain"]
    printed = "".join(o.get("text", "") for o in cells[2].outputs)
    contents = eval(printed)  # our own print of a list of strings
    assert len(set(contents)) > 1
    page = shown(final["text/html"])
    for content in contents:
        assert content.split()[-1] in page
    shaded = [o for o in cells[3].outputs if "data" in o][-1]["data"]["text/html"]
    assert "nito-shaded" in shaded and "token probability" in shaded and 'title="p = ' in shaded


def test_a_live_column_shows_the_end_of_a_long_answer() -> None:
    # Each refresh re-sends every column: while it streams, a column keeps about `window`
    # characters of its answer's end, as the grid of models does.
    s = ask(model="sim/long", n=2, max_tokens=400)
    growing = dataclasses.replace(s.snapshot(), status=Status.STREAMING)
    text = choices_bundle(growing, s.choices, live=True, window=200)["text/plain"]
    assert "earlier characters (all shown when the stream ends)" in text
    assert len(text) < len(s.choices[0].content) + len(s.choices[1].content)
    whole = choices_bundle(s.snapshot(), s.choices, live=True, window=200)["text/plain"]
    assert "earlier characters" not in whole and s.choices[1].content.split()[-1] in whole
