"""The renderer: a stream's state -> safe HTML and plain text (pure: no I/O, no mutable globals).

Model text is data, never markup that runs. Every string the gateway controls (content, reasoning,
tool names and arguments, error messages, the model name, usage values, anomalies) reaches the HTML
either escaped, or through markdown-it with raw HTML off and only http(s)/mailto/relative links. We
emit ``text/html`` + ``text/plain`` and never ``text/markdown``: JupyterLab renders Markdown
outputs with their raw HTML live (see docs/JUPYTER.md), so it is not a safe sink.

Every caller imports from here. The modules, each of one concern, import downwards in this order:

- ``styles``: inline CSS, status colours, the code stylesheet and the token kinds it colours;
- ``markdown``: ``markdown_to_html(text, *, highlight=True) -> str`` (markdown-it set up once,
  link and URL checks, Pygments highlighting);
- ``blocks``: ``split_blocks(text) -> (finished, tail)``, the block splitting of a growing answer
  (so a live display sends each finished block once and re-sends only a small tail: traffic stays
  linear in the answer length);
- ``status``: ``status_text(state) -> str``, the one-line summary, and the progress footer;
- ``parts``: ``Part(key, html, text, final)``; ``render_parts(state, *, format, live, cache)``;
  ``bundle(part)``, ``join_parts(parts)``, ``final_bundle(state, *, format)``; ``RenderCache``
  (an optional memo a live caller passes to ``render_parts``: results never depend on it);
  ``check_format(format)``, the one check of a ``format`` argument;
- ``attachments``: the strip of a prompt's images (thumbnails of data URLs) and URLs (links, never
  loaded) that ``%%nito --image`` shows above the answer (docs/IMAGES.md).

``state`` is duck-typed like a Stream (docs/ENGINE_API.md): ``content, reasoning, refusal,
audio_transcript, tool_calls, status, model, ttft, elapsed, n_chunks, finish_reason, usage, error, anomalies, done,
free_tier``; missing attributes count as empty.
"""

from __future__ import annotations

from .blocks import split_blocks
from .markdown import markdown_to_html
from .parts import (
    FORMATS,
    Part,
    RenderCache,
    bundle,
    check_format,
    final_bundle,
    join_answer_blocks,
    join_parts,
    render_parts,
)
from .status_line import status_text

__all__ = [
    "FORMATS",
    "Part",
    "RenderCache",
    "bundle",
    "check_format",
    "final_bundle",
    "join_answer_blocks",
    "join_parts",
    "markdown_to_html",
    "render_parts",
    "split_blocks",
    "status_text",
]
