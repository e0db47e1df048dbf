"""Parsing chunks, with a shortcut for the chunk nearly every stream is made of. No I/O.

Nearly every chunk of a stream is the previous one with another content fragment: same id, model,
created, provider..., one choice whose delta holds only ``content``. ``json.loads`` is then most of
the engine's cost per chunk (bench/bench_stream.py). :class:`ChunkParser` remembers each such
layout the first time ``json.loads`` has parsed it, keyed by the exact text around the content
string; a later chunk with the same text around its content is rebuilt from that template with its
own content, without parsing (:meth:`ChunkParser.parse_lazy` hands back the template and text
instead, and the state builds the chunk only when someone reads it: ``folding.Chunks``). The
result is equal to ``json.loads(data)``: only the content differs between chunks of one layout,
and only chunks whose other values are all scalars are templates, so no nested object is shared
between two results. OpenAI's and Azure's ``"obfuscation"`` padding, a string of random length
in every chunk, is cut out of the key and put back, so such chunks share a layout too
(tests/test_varying_layout.py checks every shortcut against the slow path with a random-length
field in every chunk). Anything else goes to ``json.loads``: among others Mistral's chunks whose
``delta.content`` is a list of parts (its text is not a string there, so no template ever matches
them; ``test_protocol.py`` checks it).
"""

from __future__ import annotations

import json
from typing import Any

from .plain_chunks import plain_choice, plain_content, plain_reasoning, plain_tool_fragments

__all__ = ["ChunkParser", "rebuild"]

_CONTENT = '"delta":{"content":"'  # as gateways write it: compact JSON
_CONTENT_SPACED = '"delta": {"content": "'
_PADDING = '"obfuscation":"'
_SCALARS = (str, int, float, bool, type(None))
_decode = json.JSONDecoder().decode  # json.loads without its per-call argument checks
_scanstring: Any = json.decoder.scanstring  # type: ignore[attr-defined]  # (text, end + 1) of a JSON string
#: Layouts remembered per parser. A field that changes on every chunk (the simulator's send stamp)
#: makes every chunk a layout of its own that never matches again: without a bound, a stream kept
#: one template per chunk. Past the bound, a chunk that matches none costs one dict lookup more.
MAX_TEMPLATES = 32


class ChunkParser:
    """``parse(data)`` returns ``(value, content)``: the parsed JSON value, and the delta's content
    when the value is a known content-only chunk (else None). Raises ValueError like json.loads.

    :meth:`parse_slot` also knows two more kinds of chunk by their layout: one plain reasoning
    string (DeepSeek's ``reasoning_content``, ``reasoning``) and one tool-call fragment's
    arguments (OpenAI's), each a chunk :func:`plain_chunks.plain_reasoning` or
    :func:`plain_chunks.plain_tool_fragments` reads as that text alone."""

    def __init__(self) -> None:
        self._templates: dict[tuple[str, str], tuple[Any, ...]] = {}
        # The layout that matched last (slot, text before the string, text after it up to the
        # padding, the rest after the padding or None, template): most chunks repeat it.
        self._last: tuple[Any, ...] | None = None

    def forget(self) -> None:
        """Let go of the layouts learnt (about 2 KB for a stream of the simulator's chunks): a
        stream that ended parses no more chunks, and a parser fed again learns them anew. The
        chunks already handed out hold their templates themselves."""
        self._templates = {}
        self._last = None

    def parse(self, data: str) -> tuple[Any, str | None]:
        value, text, slot = self.parse_slot(data)
        return value, text if slot == CONTENT else None

    def parse_slot(self, data: str) -> tuple[Any, str | None, str | None]:
        """``(value, text, slot)``: ``slot`` is :data:`CONTENT`, ``"reasoning_content"``,
        ``"reasoning"`` or ``"arguments"`` when the value is a known chunk of that one text
        (``text``), else None (and ``text`` None)."""
        value, text, slot, template, padding = self.parse_lazy(data)
        if template is not None:
            value = rebuild(template, text, padding)  # type: ignore[arg-type]
        return value, text, slot

    def parse_lazy(
        self, data: str
    ) -> tuple[Any, str | None, str | None, tuple[Any, ...] | None, str | None]:
        """:meth:`parse_slot` without building the chunk when a kept layout matches:
        ``(value, text, slot, template, padding)``, where a match gives ``value`` None and the
        template, which :func:`rebuild` with ``text`` and ``padding`` (None: no padding) turns
        into the chunk when someone needs it (a run that waits never does); else ``template``
        and ``padding`` are None and ``value`` is the chunk."""
        slot = CONTENT
        start = data.find(_CONTENT)
        if start >= 0:
            start += len(_CONTENT)
        else:  # Python's json.dumps puts spaces after separators
            start = data.find(_CONTENT_SPACED)
            if start >= 0:
                start += len(_CONTENT_SPACED)
            else:
                for name, marker in _SLOTS:
                    start = data.find(marker)
                    if start >= 0:
                        start += len(marker)
                        slot = name
                        break
                else:
                    return _decode(data), None, None, None, None
        end = data.find('"', start)
        text = data[start:end]
        # escapes (JSON arguments are full of \"): the C scanner reads it
        if end < 0 or "\\" in text:
            try:
                text, end = _scanstring(data, start)
            except ValueError:
                return _decode(data), None, None, None, None  # json.loads says what is wrong
            end -= 1  # the closing quote
        # The layout of the chunk before, compared in place: the same test as the key's lookup
        # below (the same text before the string, after it, and around the padding), without
        # copying the text around the string into a key and hashing it (docs/BENCHMARKS.md).
        padding: str | None
        last = self._last
        if (
            last is not None
            and last[0] == slot
            and start == len(last[1])
            and data.startswith(last[1])
        ):
            head, tail, template = last[2], last[3], last[4]
            if data.startswith(head, end):
                if tail is None:
                    if len(data) == end + len(head):
                        return None, text, slot, template, None
                else:
                    cut = end + len(head)
                    cut_end = data.find('"', cut)
                    padding = data[cut:cut_end]
                    if (
                        cut_end >= 0
                        and (not padding or (padding.isascii() and padding.isalnum()))
                        and len(data) == cut_end + len(tail)
                        and data.startswith(tail, cut_end)
                    ):
                        return None, text, slot, template, padding
        after = data[end:]
        # OpenAI's and Azure's padding, a string of random length in every chunk: cut out of the
        # key, and put back into the rebuilt chunk, so that such chunks share a layout too.
        cut = after.find(_PADDING)
        padding = None
        head, tail = after, None
        if cut >= 0:
            cut += len(_PADDING)
            cut_end = after.find('"', cut)
            padding = after[cut:cut_end]
            if cut_end < 0 or (padding and not (padding.isascii() and padding.isalnum())):
                # as sent (letters and digits) or read by json.loads
                return _decode(data), None, None, None, None
            head, tail = after[:cut], after[cut_end:]
            after = head + tail
        prefix = data[:start]
        key = (prefix, after)
        template = self._templates.get(key)
        if template is not None:
            self._last = (slot, prefix, head, tail, template)
            return None, text, slot, template, padding
        value = _decode(data)
        if not _reads_as(value, slot, text):
            return value, None, None, None, None
        # A layout that is kept: every other value a scalar, and the padding (when cut) the
        # chunk's own top-level one. Past MAX_TEMPLATES, no test: the chunk is simply returned.
        if len(self._templates) < MAX_TEMPLATES and (
            padding is None or value.get("obfuscation") == padding
        ):
            template = _template(value, slot)
            if template is not None and rebuild(template, text, padding) == value:
                self._templates[key] = template
                self._last = (slot, prefix, head, tail, template)
        return value, text, slot, None, None


CONTENT = "content"
_SLOTS = (
    ("reasoning_content", '"reasoning_content":"'),
    ("reasoning", '"reasoning":"'),
    ("arguments", '"arguments":"'),
)


def _reads_as(value: Any, slot: str, text: str) -> bool:
    """The chunk is read as this one text in this slot, and nothing else (the reader's tests)."""
    if slot == CONTENT:
        return plain_content(value) == text
    choice = plain_choice(value)
    if choice is None or type(choice.get("delta")) is not dict:
        return False
    delta = choice["delta"]
    if slot == "arguments":
        fragments = plain_tool_fragments(delta)
        return fragments is not None and len(fragments) == 1 and fragments[0].arguments == text
    pieces = plain_reasoning(delta)
    return pieces is not None and [(p.type, p.payload) for p in pieces] == (
        [(slot, text)] if text else []
    )


def _scalars(container: dict[str, Any], but: str) -> bool:
    return all(isinstance(v, _SCALARS) for k, v in container.items() if k != but)


def _template(value: dict[str, Any], slot: str) -> tuple[Any, ...] | None:
    """The containers from the chunk down to its text, copied, when every other value in them is
    a scalar (so that no nested object is shared between two rebuilt chunks); else None."""
    choice = value["choices"][0]
    if not (_scalars(value, "choices") and _scalars(choice, "delta")):
        return None
    delta = choice["delta"]
    if slot == CONTENT:
        return (slot, dict(value), dict(choice))
    if slot != "arguments":
        return (slot, dict(value), dict(choice), dict(delta)) if _scalars(delta, slot) else None
    call = delta["tool_calls"][0]
    function = call["function"]
    if not (
        _scalars(delta, "tool_calls")
        and _scalars(call, "function")
        and _scalars(function, "arguments")
    ):
        return None
    return (slot, dict(value), dict(choice), dict(delta), dict(call), dict(function))


def rebuild(template: tuple[Any, ...], text: str, padding: str | None = None) -> dict[str, Any]:
    """A new chunk of the template's layout with ``text`` (and its ``padding``, OpenAI's
    ``obfuscation``, when it has one); copies keep the keys in their sent order."""
    slot, top, choice = template[0], template[1].copy(), template[2].copy()
    if slot == CONTENT:
        choice["delta"] = {"content": text}
    elif slot != "arguments":
        delta = template[3].copy()
        delta[slot] = text
        choice["delta"] = delta
    else:
        delta, call, function = template[3].copy(), template[4].copy(), template[5].copy()
        function["arguments"] = text
        call["function"] = function
        delta["tool_calls"] = [call]
        choice["delta"] = delta
    top["choices"] = [choice]
    if padding is not None:
        top["obfuscation"] = padding
    return top
