"""The Markdown answer the display tests and bench/bench_display.py stream: one copy, so the
benchmark measures what the tests check.

Prose with inline markup that must stay text (``<b>``, ``<i>``), lists, fenced code holding
``<div>``, and tables with non-ASCII, repeated until the requested size.
"""

from __future__ import annotations


def sample_answer(size: int) -> str:
    """Deterministic Markdown of about ``size`` characters: prose, lists, code, tables."""
    pieces: list[str] = []
    total = i = 0
    while total < size:
        kind = i % 5
        if kind == 0:
            piece = f"## Section {i}\n\n"
        elif kind == 1:
            piece = " ".join(
                f"Sentence {i}.{j} talks about <b>tags</b> and `code`." for j in range(8)
            )
            piece += "\n\n"
        elif kind == 2:
            piece = "".join(f"- item {j} with **bold** text\n" for j in range(6)) + "\n"
        elif kind == 3:
            body = "".join(f"    value_{j} = compute({j}, '<div>')\n" for j in range(12))
            piece = f"```python\ndef step_{i}():\n{body}    return value_0\n```\n\n"
        else:
            rows = "".join(f"| {j} | {j * j} | cell <i>{j}</i> |\n" for j in range(5))
            piece = "| n | n² | note |\n|---|---:|---|\n" + rows + "\n"
        pieces.append(piece)
        total += len(piece)
        i += 1
    return "".join(pieces)[:size]
