"""Images and files in a request, as the simulator sees them: checked like a gateway would (a 400
for a part it could not read), and described, so that `sim/echo` answers with what it received
and a test checks what was sent (count, types, sizes, sha256 prefixes)."""

from __future__ import annotations

import hashlib
from typing import Any

from .._core.attachments import data_of, sniff

__all__ = ["check_parts", "received"]

#: Content part types a user message may hold (OpenAI's chat completions).
_PART_TYPES = ("text", "image_url", "file", "input_audio", "refusal")


def check_parts(messages: list[dict[str, Any]]) -> str | None:
    """What is wrong with the messages' content parts (a sentence), or None."""
    for i, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            where = f"messages[{i}].content[{j}]"
            if not isinstance(part, dict) or part.get("type") not in _PART_TYPES:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                return f"`{where}` must be a part of type {', '.join(_PART_TYPES)}, got {kind!r}."
            wrong = _wrong(part, where)
            if wrong:
                return wrong
    return None


def _wrong(part: dict[str, Any], where: str) -> str | None:
    if part["type"] == "image_url":
        url = (
            part.get("image_url", {}).get("url")
            if isinstance(part.get("image_url"), dict)
            else None
        )
        if not isinstance(url, str):
            return f"`{where}.image_url.url` is required: an http(s) URL or a data URL."
        if url.startswith(("http://", "https://")):
            return None
        found = data_of(part)
        if found is None:
            return f"`{where}.image_url.url` must be an http(s) URL or a base64 data URL."
        declared, data, _ = found
        if not declared.startswith("image/") or sniff(data) != declared:
            return f"`{where}.image_url.url` says {declared!r} but holds {sniff(data) or 'no known image'}."
    elif part["type"] == "file":
        found = data_of(part)
        if found is None:
            return f"`{where}.file.file_data` must be a base64 data URL."
        declared, data, _ = found
        if sniff(data) != declared:
            return f"`{where}.file.file_data` says {declared!r} but holds {sniff(data) or 'no known type'}."
    return None


def received(message: dict[str, Any]) -> list[str]:
    """One line per image or file part of ``message``: its type, size and sha256 prefix (a URL:
    the URL, which the simulator never fetches)."""
    content = message.get("content")
    lines = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict) or part.get("type") not in ("image_url", "file"):
            continue
        found = data_of(part)
        if found is None:
            url = (
                part.get("image_url", {}).get("url")
                if isinstance(part.get("image_url"), dict)
                else None
            )
            lines.append(f"{part['type']} url {url}")
            continue
        media_type, data, _ = found
        lines.append(
            f"{part['type']} {media_type} {len(data)} bytes sha256 {hashlib.sha256(data).hexdigest()[:12]}"
        )
    return lines
