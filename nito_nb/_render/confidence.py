"""An answer shaded by token probability (``%%nito --logprobs K --shade``): each token on a
background whose strength says how unsure the model was, its probability and its alternatives
in a ``title`` (shown on hover, kept in a saved notebook), and a legend.

Readable in light and dark themes: the shade is a translucent orange over whatever the page's
background is, and the text keeps the page's own colour. Any token text (the token, each
alternative) is data: escaped for the page, quotes too in the ``title`` attribute, and its control
characters shown as escapes (``printable``). Pure: no I/O.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from .._core.logprobs import probability
from .._core.printable import printable
from .parts import Part

__all__ = ["LEGEND", "shade", "shaded_part"]

#: The probabilities the legend shows, most sure first.
LEGEND = (0.99, 0.75, 0.5, 0.25, 0.05)


def shade(p: float | None) -> str:
    """The inline style of a token of probability ``p`` (None: unknown, no shade): a translucent
    orange, stronger the less likely the token was."""
    if p is None:
        return ""
    alpha = round(0.65 * (1.0 - max(0.0, min(1.0, p))), 3)
    return f"background-color: rgba(255, 140, 0, {alpha}); border-radius: 2px;"


def _title(entry: dict[str, Any], p: float | None) -> str:
    lines = [f"p = {p:.3f}" if p is not None else "p unknown"]
    top = entry.get("top_logprobs")
    for alternative in top if isinstance(top, list) else []:
        if not isinstance(alternative, dict):
            continue
        q = probability(alternative.get("logprob"))
        token = alternative.get("token")
        shown = printable(repr(token if isinstance(token, str) else str(token)))
        lines.append(f"{shown}: {'?' if q is None else f'{q:.3f}'}")
    return html.escape("\n".join(lines), quote=True)


def _legend() -> str:
    cells = "".join(
        f'<span style="{shade(p)} padding: 0 4px; margin-right: 2px;">{p:g}</span>' for p in LEGEND
    )
    return (
        f'<div class="nito-out nito-legend" style="font-size: 0.85em; opacity: 0.85; margin: 2px 0;">'
        f"token probability: {cells} (hover a token for its alternatives)</div>"
    )


def shaded_part(tokens: Sequence[dict[str, Any]], key: str = "answer-shaded") -> Part:
    """The tokens (``Stream.logprobs``' entries) of an answer as one part: each in a ``<span>``
    shaded by its probability, with a legend above; its text is the answer itself."""
    spans = []
    for entry in tokens:
        p = probability(entry.get("logprob"))
        token = entry.get("token")
        text = token if isinstance(token, str) else ""
        spans.append(
            f'<span style="{shade(p)}" title="{_title(entry, p)}">{html.escape(printable(text))}</span>'
        )
    page = (
        f'{_legend()}<div class="nito-out nito-shaded" style="white-space: pre-wrap; line-height: 1.6;">'
        f"{''.join(spans)}</div>"
    )
    return Part(
        key, page, "".join(t.get("token") or "" for t in tokens if isinstance(t.get("token"), str))
    )
