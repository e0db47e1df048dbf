"""Parsing chunks, with a shortcut for the chunk nearly every stream is made of. No I/O.

Nearly every chunk of a stream is the previous one with another content fragment: same id, model,
created, provider..., one choice whose delta holds only ``content``. ``json.loads`` is then most of
the engine's cost per chunk (bench/bench_stream.py). :class:`ChunkParser` remembers each such
layout the first time ``json.loads`` has parsed it, keyed by the exact text around the content
string; a later chunk with the same text around its content is rebuilt from that template with its
own content, without parsing. The result is equal to ``json.loads(data)``: only the content differs
between chunks of one layout, and only chunks whose other values are all scalars are templates, so
no nested object is shared between two results. OpenAI's and Azure's ``"obfuscation"`` padding, a
string of random length in every chunk, is cut out of the key and put back, so such chunks share
a layout too (tests/test_varying_layout.py checks every shortcut against the slow path with a
random-length field in every chunk). Anything else goes to ``json.loads``: among
others Mistral's chunks whose ``delta.content`` is a list of parts (its text is not a string there,
so no template ever matches them; ``test_protocol.py`` checks it).
"""

from __future__ import annotations

import json
from typing import Any

from .chunk import plain_content

__all__ = ["ChunkParser"]

_CONTENT = '"delta":{"content":"'  # as gateways write it: compact JSON
_CONTENT_SPACED = '"delta": {"content": "'
_PADDING = '"obfuscation":"'
_SCALARS = (str, int, float, bool, type(None))
_decode = json.JSONDecoder().decode  # json.loads without its per-call argument checks
#: Layouts remembered per parser. A field that changes on every chunk (the simulator's send stamp)
#: makes every chunk a layout of its own that never matches again: without a bound, a stream kept
#: one template per chunk. Past the bound, a chunk that matches none costs one dict lookup more.
MAX_TEMPLATES = 32


class ChunkParser:
    """``parse(data)`` returns ``(value, content)``: the parsed JSON value, and the delta's content
    when the value is a known content-only chunk (else None). Raises ValueError like json.loads."""

    def __init__(self) -> None:
        self._templates: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = {}

    def parse(self, data: str) -> tuple[Any, str | None]:
        start = data.find(_CONTENT)
        if start >= 0:
            start += len(_CONTENT)
        else:  # Python's json.dumps puts spaces after separators
            start = data.find(_CONTENT_SPACED)
            if start < 0:
                return _decode(data), None
            start += len(_CONTENT_SPACED)
        end = data.find('"', start)
        content = data[start:end]
        if end < 0 or "\\" in content:  # escapes: let json.loads read the string
            return _decode(data), None
        after = data[end:]
        # OpenAI's and Azure's padding, a string of random length in every chunk: cut out of the
        # key, and put back into the rebuilt chunk, so that such chunks share a layout too.
        cut = after.find(_PADDING)
        padding = None
        if cut >= 0:
            cut += len(_PADDING)
            cut_end = after.find('"', cut)
            padding = after[cut:cut_end]
            if cut_end < 0 or (padding and not (padding.isascii() and padding.isalnum())):
                return _decode(data), None  # as sent (letters and digits) or read by json.loads
            after = after[:cut] + after[cut_end:]
        key = (data[:start], after)
        template = self._templates.get(key)
        if template is not None:
            top, choice = template
            chunk, choice = dict(top), dict(choice)  # copies keep the keys in their sent order
            choice["delta"] = {"content": content}
            chunk["choices"] = [choice]
            if padding is not None:
                chunk["obfuscation"] = padding
            return chunk, content
        value = _decode(data)
        if plain_content(value) != content:
            return value, None
        # A layout that is kept: every other value a scalar, and the padding (when cut) the
        # chunk's own top-level one. Past MAX_TEMPLATES, no test: the chunk is simply returned.
        if len(self._templates) < MAX_TEMPLATES and _is_plain_content(value, content) and (
            padding is None or value.get("obfuscation") == padding
        ):
            self._templates[key] = (dict(value), dict(value["choices"][0]))
        return value, content


def _is_plain_content(value: Any, content: str) -> bool:
    """The chunk reads as this content alone (the reader's own test, :func:`chunk.plain_content`),
    and every other value is a scalar: no nested object is shared between two results."""
    if plain_content(value) != content:
        return False
    choice = value["choices"][0]
    others = [v for k, v in value.items() if k != "choices"] + [v for k, v in choice.items() if k != "delta"]
    return all(isinstance(v, _SCALARS) for v in others)
