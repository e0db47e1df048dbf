"""``%%nito --logprobs 3 --shade`` in a real JupyterLab (Debian Chromium): the answer is shaded
token by token under a legend, each token's title holds its probability and alternatives, and
tokens that are payloads stay text (issue 33)."""

from __future__ import annotations

import time

from .lab import XSS_PAYLOAD, Lab


def test_the_shaded_answer_shows_each_tokens_probability_and_stays_inert(lab: Lab) -> None:
    lab.write_notebook(
        "shade",
        [
            "%load_ext nito_nb",
            f"%%nito -m sim/echo --logprobs 3 --shade\nRepeat: {XSS_PAYLOAD} [x](javascript:window.__xss=1)",
        ],
    )
    nb = lab.open("shade", kernel_env={"NITO_SIM_TPS": "0", "NITO_SIM_TTFT_MS": "0"})
    nb.run_cell(0, wait=True)
    nb.run_cell(1, wait=True)
    area = nb.cell(1).locator(".jp-Cell-outputArea")
    assert area.locator(".nito-legend").count() == 1
    tokens = area.locator(".nito-shaded span[title]")
    assert tokens.count() >= 5  # one span per token
    titles = [tokens.nth(i).get_attribute("title") or "" for i in range(tokens.count())]
    assert all(title.strip() for title in titles)
    styles = {tokens.nth(i).get_attribute("style") for i in range(tokens.count())}
    assert all(style and "background" in style for style in styles)
    text = area.locator(".nito-shaded").inner_text()
    assert "<script>" in text and "onerror" in text  # the payload, as text
    assert area.locator("img, script, iframe").count() == 0
    assert area.locator('a[href^="javascript"]').count() == 0
    time.sleep(0.5)  # an onerror would fire as soon as the (non-)image failed to load
    nb.assert_no_xss()
