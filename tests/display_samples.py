"""What the renderer and display tests (and bench/bench_display.py) feed the live view.

``make_state``: a duck-typed stand-in for a Stream. ``sample_answer``: the Markdown answer they
stream, one copy so that the benchmark measures what the tests check.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


def make_state(**overrides: Any) -> SimpleNamespace:
    """A duck-typed stand-in for a Stream (the attributes docs/ENGINE_API.md promises)."""
    fields: dict[str, Any] = {
        "content": "",
        "reasoning": "",
        "refusal": None,
        "tool_calls": [],
        "finish_reason": None,
        "usage": None,
        "error": None,
        "status": "streaming",
        "model": "sim/test",
        "ttft": 0.25,
        "elapsed": 1.25,
        "n_chunks": 10,
        "anomalies": [],
        "done": False,
        "free_tier": None,
    }
    fields.update(overrides)
    return SimpleNamespace(**fields)


def sample_answer(size: int) -> str:
    """Deterministic Markdown of about ``size`` characters: prose with inline markup that must
    stay text (``<b>``, ``<i>``), lists, fenced code holding ``<div>``, tables with non-ASCII."""
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
