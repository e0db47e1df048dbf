"""``%%nito --schema`` in a real JupyterLab (Debian Chromium): the object grows field by field,
the field being written marked; at the end ✓ and the object, the raw JSON one click away; field
names and values that are payloads stay text (issue 33)."""

from __future__ import annotations

import time

from .lab import XSS_PAYLOAD, Lab

SCHEMA = (
    "schema = {'title': 'Verdict', 'type': 'object', 'required': ['label', 'why', 'score'], 'properties': {\n"
    f"    'label': {{'type': 'string', 'enum': [{XSS_PAYLOAD!r}]}},\n"
    "    'why': {'type': 'array', 'minItems': 3, 'maxItems': 3, 'items': {'type': 'string', 'minLength': 20}},\n"
    "    '<img src=x onerror=window.__xss=1>': {'type': 'string', 'const': '[x](javascript:window.__xss=1)'},\n"
    "    'score': {'type': 'number', 'minimum': 0, 'maximum': 1}}}"
)


def test_the_object_grows_live_then_is_checked_and_stays_inert(lab: Lab) -> None:
    lab.write_notebook(
        "structured",
        [
            "%load_ext nito_nb",
            SCHEMA,
            "%%nito -m sim/chat --schema schema --param sim='{\"tps\": 25}'\nClassify: free money",
            "%%nito -m sim/json-invalid --schema schema\nClassify: free money",
        ],
    )
    nb = lab.open("structured", kernel_env={"NITO_SIM_TPS": "0", "NITO_SIM_TTFT_MS": "0"})
    nb.run_cell(0, wait=True)
    nb.run_cell(1, wait=True)
    nb.run_cell(2)
    seen: list[str] = []
    start = time.monotonic()
    while nb.prompt(2) in ("[*]:", "[ ]:", ""):
        seen.append(nb.output_text(2))
        assert time.monotonic() - start < 60, seen[-3:]
        time.sleep(0.1)
    nb.wait_cell_done(2)
    writing = [text for text in seen if "✎ Verdict" in text]
    assert len(set(writing)) >= 3, seen[-5:]  # seen growing, as an object
    assert any("✎ Verdict: writing why" in text for text in writing), writing[-3:]
    area = nb.cell(2).locator(".jp-Cell-outputArea")
    assert area.locator("tr.nito-writing").count() == 0  # nothing is being written once done
    final = nb.output_text(2)
    # the payloads, as text
    assert "✓ Verdict" in final and "<script>" in final and "onerror" in final
    raw = area.locator("details.nito-raw")
    assert raw.count() == 1 and not raw.evaluate("d => d.open")
    raw.locator("summary").click()
    assert raw.evaluate("d => d.open") and '"label"' in raw.inner_text()
    assert area.locator("img, script, iframe").count() == 0
    assert area.locator('a[href^="javascript"]').count() == 0

    nb.run_cell(3, wait=True)
    invalid = nb.cell(3).locator(".jp-Cell-outputArea")
    assert "✗ not a valid Verdict" in nb.output_text(3)
    assert invalid.locator("ul.nito-errors li").count() >= 1
    # invalid: the raw text shown
    assert invalid.locator("details.nito-raw").evaluate("d => d.open")
    time.sleep(0.5)  # an onerror would fire as soon as the (non-)image failed to load
    nb.assert_no_xss()
