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
field in every chunk). OpenRouter sends each reasoning fragment twice in one chunk, as
``reasoning`` and as the text of its one ``reasoning_details`` entry (``"content":""`` before
them): such a layout is kept with both places, the text found in the first and checked byte for
byte in the second (slot :data:`~.plain_chunks.WITH_DETAIL`). Anything else goes to
``json.loads``: among others Mistral's chunks whose ``delta.content`` is a list of parts (its text
is not a string there, so no template ever matches them; ``test_protocol.py`` checks it).
"""

from __future__ import annotations

import json
from typing import Any

from .chunk import PAYLOAD_KEY
from .plain_chunks import (
    WITH_DETAIL,
    plain_choice,
    plain_content,
    plain_detailed,
    plain_reasoning,
    plain_tool_fragments,
)

__all__ = ["ChunkParser", "rebuild"]

_CONTENT = '"delta":{"content":"'  # as gateways write it: compact JSON
_CONTENT_SPACED = '"delta": {"content": "'
_PADDING = '"obfuscation":"'
_REASONING = ('"reasoning":"', '"reasoning": "')  # compact, and as Python's json.dumps writes
_DETAILS = ('"reasoning_details":[{', '"reasoning_details": [{')
_DETAIL_TEXTS = ('"text":"', '"summary":"', '"text": "', '"summary": "')
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

    :meth:`parse_slot` also knows three more kinds of chunk by their layout: one plain reasoning
    string (DeepSeek's ``reasoning_content``, ``reasoning``), one tool-call fragment's
    arguments (OpenAI's), each a chunk :func:`plain_chunks.plain_reasoning` or
    :func:`plain_chunks.plain_tool_fragments` reads as that text alone, and OpenRouter's
    reasoning, one text in two places (:func:`plain_chunks.plain_detailed`)."""

    def __init__(self) -> None:
        self._templates: dict[tuple[str, ...], tuple[Any, ...]] = {}
        # The layout that matched last (slot, text before the string, text after it up to the
        # padding, the rest after the padding or None, template): most chunks repeat it.
        self._last: tuple[Any, ...] | None = None
        self._marker: tuple[str, str] | None = None  # its slot and the text before its string

    def forget(self) -> None:
        """Let go of the layouts learnt (about 2 KB for a stream of the simulator's chunks): a
        stream that ended parses no more chunks, and a parser fed again learns them anew. The
        chunks already handed out hold their templates themselves."""
        self._templates = {}
        self._last = None
        self._marker = None

    def parse(self, data: str) -> tuple[Any, str | None]:
        value, text, slot = self.parse_slot(data)
        return value, text if slot == CONTENT else None

    def parse_slot(self, data: str) -> tuple[Any, str | None, str | None]:
        """``(value, text, slot)``: ``slot`` is :data:`CONTENT`, ``"reasoning_content"``,
        ``"reasoning"``, ``"arguments"`` or :data:`~.plain_chunks.WITH_DETAIL` when the value is
        a known chunk of that one text (``text``), else None (and ``text`` None)."""
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
        # The marker of the layout that matched last first: most chunks repeat it, and a tool
        # fragment's or reasoning's marker comes after two or three that miss (each find a scan
        # of the chunk). In any order: a match is the same bytes around the text as a template
        # checked against json.loads, and a new template is checked again (_reads_as).
        known = self._marker
        if known is not None and (start := data.find(known[1])) >= 0:
            slot, marker = known
        else:
            slot, marker = CONTENT, _CONTENT
            start = data.find(marker)
            if start < 0:  # Python's json.dumps puts spaces after separators
                marker = _CONTENT_SPACED
                start = data.find(marker)
                if start < 0:
                    for slot, marker in _SLOTS:  # noqa: B007 (both kept: the one that matched)
                        start = data.find(marker)
                        if start >= 0:
                            break
                    else:
                        return _decode(data), None, None, None, None
        start += len(marker)
        if slot is CONTENT and data.startswith('"', start):
            # An empty content: OpenRouter's reasoning chunks open their delta with one, and
            # their text is the reasoning after it.
            for reasoning in _REASONING:
                found = data.find(reasoning, start)
                if found >= 0:
                    start, slot, marker = found + len(reasoning), "reasoning", reasoning
                    break
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
        if last is not None and start == len(last[1]) and data.startswith(last[1]):
            head, tail, template = last[2], last[3], last[4]
            if last[0] == slot:
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
            elif last[0] is WITH_DETAIL and slot == "reasoning":
                # OpenRouter's layout: the same text again, as sent, after the same ``head``
                again = end + len(head)
                size = end - start
                if (
                    len(data) == again + size + len(tail)
                    and data.startswith(head, end)
                    and data.startswith(tail, again + size)
                    and data[again : again + size] == data[start:end]
                ):
                    return None, text, WITH_DETAIL, template, None
        if slot == "reasoning":
            again = _again(data, start, end)
            if again >= 0:
                return self._detailed(data, start, end, again, text, marker)
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
            self._marker = (slot, marker)
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
                self._marker = (slot, marker)
        return value, text, slot, None, None

    def _detailed(
        self, data: str, start: int, end: int, again: int, text: str, marker: str
    ) -> tuple[Any, str | None, str | None, tuple[Any, ...] | None, str | None]:
        """:meth:`parse_lazy` of a chunk whose text is at ``start:end`` and again at ``again``
        (OpenRouter's reasoning and its detail, ``marker`` the reasoning's): its layout is the
        text around both places."""
        prefix, head, tail = data[:start], data[end:again], data[again + end - start :]
        key = (prefix, head, tail)
        template = self._templates.get(key)
        if template is not None:
            self._last = (WITH_DETAIL, prefix, head, tail, template)
            self._marker = ("reasoning", marker)
            return None, text, WITH_DETAIL, template, None
        value = _decode(data)
        if not _reads_as(value, WITH_DETAIL, text):
            return value, None, None, None, None
        if len(self._templates) < MAX_TEMPLATES:
            template = _template(value, WITH_DETAIL)
            if template is not None and rebuild(template, text) == value:
                self._templates[key] = template
                self._last = (WITH_DETAIL, prefix, head, tail, template)
                self._marker = ("reasoning", marker)
        return value, text, WITH_DETAIL, None, None


def _again(data: str, start: int, end: int) -> int:
    """Where the text at ``start:end`` (a ``reasoning`` string) starts again as the text of the
    ``reasoning_details`` entry after it, byte for byte; else -1."""
    details = data.find(_DETAILS[0], end)
    if details < 0:
        details = data.find(_DETAILS[1], end)
        if details < 0:
            return -1
    again = -1  # the first of the detail's text or summary
    for marker in _DETAIL_TEXTS:
        place = data.find(marker, details)
        if place >= 0 and (again < 0 or place + len(marker) < again):
            again = place + len(marker)
    if again < 0:
        return -1
    size = end - start
    if data[again : again + size] == data[start:end] and data.startswith('"', again + size):
        return again
    return -1


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
    if slot is WITH_DETAIL:
        return plain_detailed(delta) == text
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
    if slot is WITH_DETAIL:
        detail = delta["reasoning_details"][0]
        if not (_scalars(delta, "reasoning_details") and _scalars(detail, "")):
            return None
        return (slot, dict(value), dict(choice), dict(delta), dict(detail))
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
    elif slot is WITH_DETAIL:  # the text in both places
        delta, detail = template[3].copy(), template[4].copy()
        delta["reasoning"] = detail[PAYLOAD_KEY.get(detail["type"], "text")] = text
        delta["reasoning_details"] = [detail]
        choice["delta"] = delta
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
