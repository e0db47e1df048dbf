"""The renderer: a stream's state -> safe HTML and plain text (pure: no I/O, no mutable globals).

Every caller imports from here (``from nito_nb.render import render_parts``); the submodules are
the renderer's own layout.
"""

from __future__ import annotations

from .parts import (
    FORMATS,
    Part,
    RenderCache,
    bundle,
    check_format,
    final_bundle,
    join_parts,
    markdown_to_html,
    render_parts,
    split_blocks,
    status_text,
)

__all__ = [
    "FORMATS",
    "Part",
    "RenderCache",
    "bundle",
    "check_format",
    "final_bundle",
    "join_parts",
    "markdown_to_html",
    "render_parts",
    "split_blocks",
    "status_text",
]
