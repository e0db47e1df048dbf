"""The images and files a prompt carried, as a strip shown above the answer: a thumbnail of each
local image, a link for each URL. Pure: no I/O.

A thumbnail is the image's own data URL in an ``<img>`` with a fixed maximum size (nothing is
fetched by the frontend); an image too big to copy into the notebook, a PDF, or one whose data
is no longer at hand is a line of its name, type and size. A URL is an escaped link, never an
``<img>``: the frontend must not load what the prompt merely points at. Every name is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from .._core.attachments import is_descriptor
from .._core.printable import printable

__all__ = ["THUMBNAIL_MAX_BYTES", "attachments_html", "attachments_text"]

#: The largest image copied into the notebook as a thumbnail (the saved notebook holds it).
THUMBNAIL_MAX_BYTES = 512 * 1024
_BOX = "max-width:96px;max-height:96px;object-fit:contain;border:1px solid #ddd;margin:2px"


def _label(descriptor: Mapping[str, Any]) -> str:
    name = descriptor.get("name")
    shown = name if isinstance(name, str) else "image"
    return (
        f"{shown} ({descriptor.get('media_type')}, {descriptor.get('size'):,} bytes)"
        if isinstance(descriptor.get("size"), int)
        else shown
    )


def attachments_html(content: Any, sent: Mapping[str, Mapping[str, Any]]) -> str:
    """The strip of a user message's ``content`` as kept (descriptors, URL parts); ``sent``: the
    parts sent, by sha256 (``Stream._resend``), whose data URLs make the thumbnails. "" if none."""
    items = []
    for part in content if isinstance(content, list) else []:
        if is_descriptor(part):
            descriptor = part["attachment"]
            label = html.escape(_label(descriptor))
            data = sent.get(str(descriptor.get("sha256")), {}).get("image_url", {}).get("url")
            size = descriptor.get("size")
            if (
                descriptor.get("kind") == "image"
                and isinstance(data, str)
                and data.startswith("data:image/")
                and isinstance(size, int)
                and size <= THUMBNAIL_MAX_BYTES
            ):
                items.append(
                    f'<img src="{html.escape(data, quote=True)}" alt="{label}" title="{label}" '
                    f'style="{_BOX}">'
                )
            else:
                items.append(f'<span style="margin:2px">{label}</span>')
        elif isinstance(part, dict) and part.get("type") == "image_url":
            url = (
                part.get("image_url", {}).get("url")
                if isinstance(part.get("image_url"), dict)
                else None
            )
            if not isinstance(url, str):
                continue
            shown = html.escape(url if len(url) <= 120 else url[:120] + "…")
            if url.lower().startswith(("http://", "https://")):
                items.append(
                    f'<a href="{html.escape(url, quote=True)}" target="_blank" '
                    f'rel="noopener noreferrer nofollow" style="margin:2px">{shown}</a>'
                )
            else:
                items.append(f'<span style="margin:2px">{shown}</span>')
    if not items:
        return ""
    return (
        '<div class="nito-attachments" style="display:flex;flex-wrap:wrap;align-items:center;gap:4px">'
        + "".join(items)
        + "</div>"
    )


def attachments_text(content: Any) -> str:
    """The strip as plain text: one line of what went with the prompt. "" if none."""
    shown = []
    for part in content if isinstance(content, list) else []:
        if is_descriptor(part):
            shown.append(_label(part["attachment"]))
        elif (
            isinstance(part, dict)
            and part.get("type") == "image_url"
            and isinstance(part.get("image_url"), dict)
        ):
            shown.append(str(part["image_url"].get("url")))
    # a name must not act on a terminal
    return printable("with: " + "; ".join(shown)) if shown else ""
