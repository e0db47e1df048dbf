"""nito_nb.live() in a real kernel: the openai SDK's streams shown as %%nito shows them (issue 15).

The notebook is executed headless (nbclient) and saved; what is checked is the saved file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
from conftest import execute_cells
from test_magic_notebook import ACTIVE_TAG, KEY, PAYLOAD, output_text, outputs_of

from nito_nb.sim import SimServer

#: Every test here starts a kernel or another process: `make check` leaves them to `make test`.
pytestmark = [pytest.mark.slow, pytest.mark.spawns]


def test_live_shows_captured_streams_in_the_saved_notebook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # read by the SDK in the kernel: never in a cell's source
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("NITO_SIM_TPS", "0")
    monkeypatch.setenv("NITO_SIM_TTFT_MS", "0")
    with SimServer(api_key=KEY) as base_url:
        cells = [
            "import nito_nb, openai\n"
            f"client = openai.OpenAI(base_url={base_url!r}, max_retries=0, http_client=nito_nb.httpx_client())\n"
            f"aclient = openai.AsyncOpenAI(base_url={base_url!r}, max_retries=0,"
            " http_client=nito_nb.async_httpx_client())",
            # The user's code only iterates: the view is driven by the capture.
            "with nito_nb.live():\n"
            "    for chunk in client.chat.completions.create(\n"
            "        model='sim/chat', messages=[{'role': 'user', 'content': 'Explain SSE'}], stream=True\n"
            "    ):\n"
            "        pass",
            "async with nito_nb.live():\n"
            "    response = await aclient.chat.completions.create(\n"
            "        model='sim/reasoning', messages=[{'role': 'user', 'content': 'Think'}], stream=True\n"
            "    )\n"
            "    async for chunk in response:\n"
            "        pass",
            "with nito_nb.live():\n"
            "    for chunk in client.chat.completions.create(\n"
            f"        model='sim/echo', messages=[{{'role': 'user', 'content': {PAYLOAD!r}}}], stream=True\n"
            "    ):\n"
            "        pass",
            "for chunk in client.chat.completions.create(\n"
            "    model='sim/echo', messages=[{'role': 'user', 'content': 'not shown'}], stream=True\n"
            "):\n"
            "    pass",
            "print(nito_nb.last().status, nito_nb.last().content, len(nito_nb.streams()))",
        ]
        nb = execute_cells(cells, tmp_path)
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    saved = nbformat.read(path, as_version=4)
    c = saved.cells
    for cell in c:
        assert not [o for o in outputs_of(cell) if o["output_type"] == "error"], outputs_of(cell)

    chat = output_text(c[1])
    assert "Streaming, in short" in chat and "Tip: when a stream fails halfway" in chat
    assert "✓ done" in chat and "sim/chat" in chat
    for index in (1, 2, 3):
        outputs = outputs_of(c[index])
        assert outputs and all(o["output_type"] == "display_data" for o in outputs)
        assert all(set(o["data"]) == {"text/html", "text/plain"} for o in outputs)
    assert "Reasoning" in output_text(c[2]) and "✓ done" in output_text(c[2])
    hostile = output_text(c[3], "text/html")
    assert "&lt;script&gt;" in hostile
    assert outputs_of(c[4]) == []  # outside live(): captured, not shown
    assert output_text(c[5]).strip() == "done not shown 4"

    for cell in c:
        for output in outputs_of(cell):
            for mime, value in output.get("data", {}).items():
                if mime == "text/html":
                    page = str(value).lower()
                    assert (
                        "<img" not in page and "<script" not in page and not ACTIVE_TAG.search(page)
                    )
            assert KEY not in json.dumps(output, ensure_ascii=False)
    assert KEY not in path.read_text()
    assert not re.search(r"sk-test", path.read_text())
