"""Reading chunks as frame columns: what one parsed chunk says (``_ChunkInfo``), read by the
engine's one reader (``_core.chunk.read_chunk``), and the pieces the skeleton planner
(``plan.py``) cuts out of a chunk's bytes (its text string, OpenAI's padding).
"""

from __future__ import annotations

import json
from typing import Any

from .._core.choices import per_choice
from .._core.chunk import as_error_event, read_chunk, usage_counts
from .._core.fields import FROM_READING
from .._core.sse import SSEDecoder

#: One encoder for every value: ``json.dumps`` with options builds a new encoder on each call,
#: which cost more than the encoding of a chunk's small extras (one per row parsed whole).
_encode = json.JSONEncoder(ensure_ascii=False, default=str).encode


def _json(value: Any) -> str:
    return _encode(value)


def _parse_chunks(datas: list[bytes]) -> list[Any]:
    """Parse many JSON texts at once: one ``json.loads`` over ``[a,b,...]`` is the fastest way with
    the standard library (faster than one call per chunk: docs/BENCHMARKS.md)."""
    if not datas:
        return []
    try:
        values = json.loads(b"[" + b",".join(datas) + b"]")
        if len(values) == len(datas):
            return values
    except ValueError:
        pass
    # Invalid UTF-8 (the decoder replaced it) or a data line the joined text misreads: one by one.
    out = []
    for data in datas:
        try:
            out.append(json.loads(data.decode("utf-8", "replace")))
        except ValueError:
            out.append(None)
    return out


# Put in place of a chunk's content string, to find chunks that differ only in it (_Planner._plan, plan.py).
_PLACEHOLDER = b"\\u0000nito_nb"
_PLACEHOLDER_TEXT = "\x00nito_nb"
# OpenAI's and Azure's padding, a string of random length in every chunk: cut out of the skeleton
# too (in its place a marker of letters, as the padding is), and put back into each row's extras.
_PADDING = b'"obfuscation":"'
# The text strings of chunks without a content string (or with an empty one: OpenRouter sends
# "content":"" beside its reasoning), tried in turn: DeepSeek's and OpenRouter's reasoning,
# tool-call arguments. The skeleton's reading says where the string went (``slot``).
_SLOTS = (b'"reasoning_content":"', b'"reasoning":"', b'"arguments":"')
# OpenRouter sends each reasoning piece twice in one chunk: as ``delta.reasoning`` and as the text
# (or summary) of its one ``reasoning_details`` entry. The first of these strings after a reasoning
# string is its "echo": cut out too, so that the chunks of a stream still share one skeleton.
_ECHOED = _SLOTS[:2]
_ECHOES = (b'"text":"', b'"summary":"')
_PADDING_MARK = b"nitoNbPadding"
_PADDING_MARK_TEXT = "nitoNbPadding"


class _ChunkInfo:
    """What one chunk says, as column values: the same for every chunk with the same bytes."""

    __slots__ = (
        "carried",
        "choices",
        "content",
        "extras",
        "fragments",
        "has_zero",
        "items",
        "plain",
        "readable",
        "slot",
        "targets",
        "values",
    )

    def __init__(self) -> None:
        self.values: list[tuple[str, Any]] = []  # (column, value) of the chunk's own row
        self.content: str | None = None
        self.carried = False  # reasoning, refusal or tool-argument text (content is judged per row)
        self.fragments: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (fragment, its columns)
        self.items: list[tuple[str, int | None, str | None]] = []  # (reasoning type, index, text)
        self.readable = False  # a readable reasoning detail came
        self.plain: tuple[str, ...] = ()  # the plain reasoning strings that came
        self.targets: list[tuple[dict[int, Any], Any]] | None = None  # see _Builder._skeleton
        self.extras: tuple[str, str] | None = None  # a padded skeleton's extras, around its padding
        # A skeleton whose cut string is not the content: ("item", ks), the text of reasoning
        # items ks (two: a reasoning string and its echo), or ("fragment", (k,)), the arguments
        # of tool fragment k.
        self.slot: tuple[str, tuple[int, ...]] | None = None
        # n > 1: what each other choice of the chunk says (its index, its reading), and whether
        # the chunk holds choice 0 (the chunk's own row is choice 0's, else its first choice's).
        self.choices: list[tuple[int, _ChunkInfo]] | None = None
        self.has_zero = True


def _json_string(content: bytes | bytearray) -> str:
    """The text of a JSON string's bytes (without its quotes)."""
    if b"\\" in content:
        return json.loads('"' + content.decode("utf-8", "replace") + '"')
    return content.decode("utf-8", "replace")


def _chunk_data(raw: bytes | bytearray) -> tuple[bytes, str | None]:
    """The data of a chunk event (its JSON text) and its event name."""
    line = raw.strip(b"\r\n")
    if line.startswith(b"data: ") and b"\n" not in line and b"\r" not in line:
        return bytes(line[6:]), None  # the one-line form every gateway sends
    # Otherwise the SSE decoder reads it (multi-line data, event: fields, a byte-order mark).
    decoder = SSEDecoder()
    event = (decoder.decode(bytes(raw)) + decoder.flush())[-1]
    return event.data.encode("utf-8"), event.event


def _read_chunk(chunk: Any, event_name: str | None) -> _ChunkInfo | None:
    """One parsed chunk as column values: the engine's one reader (``_core.chunk.read_chunk``,
    which the accumulator folds too) says what it holds; this only names the columns."""
    chunk = as_error_event(chunk, event_name)
    if not isinstance(chunk, dict):
        return None
    reading = read_chunk(chunk)
    info = _ChunkInfo()
    values = info.values
    if reading.id is not None:
        values.append(("id", reading.id if isinstance(reading.id, str) else str(reading.id)))
    if isinstance(reading.model, str):
        values.append(("model", reading.model))
    error = reading.error
    if error is not None:
        message, code = error.get("message"), error.get("code")
        values.append(("error_message", None if message is None else str(message)))
        values.append(("error_code", None if code is None else str(code)))
    if reading.usage is not None:
        values.append(("usage", _json(reading.usage)))
        values.extend(usage_counts(reading.usage).items())
    for attribute, column, as_json in FROM_READING:  # refusal, audio (without its base64 data)...
        value = getattr(reading, attribute)
        if value is not None:
            values.append((column, _json(value) if as_json else value))
    if reading.has_web_search:
        values.append(("web_search", _json(reading.web_search)))
    if reading.has_free_tier:
        values.append(("free_tier", _json(reading.free_tier)))
    for finish in reading.finishes:
        values.append(("finish_reason", finish))
    if reading.role is not None:
        values.append(("role", str(reading.role)))
    info.content = reading.content
    for fragment in reading.tools:
        part: dict[str, Any] = {}
        if fragment.id:
            part["tool_id"] = str(fragment.id)
        if fragment.name:
            part["tool_name"] = str(fragment.name)
        if fragment.type:  # "custom": its arguments are free text, not JSON (df.nito.tool_calls)
            part["tool_type"] = str(fragment.type)
        if fragment.arguments is not None:
            part["tool_args"] = fragment.arguments
        info.fragments.append((fragment.raw, part))
    plain = []
    for piece in reading.reasoning:
        info.items.append((piece.type, piece.index, piece.text))
        if piece.index is None:
            plain.append(piece.type)
        elif piece.readable:
            info.readable = True
    info.plain = tuple(plain)
    info.carried = reading.carried_besides_content
    if reading.extras:
        values.append(("extras", _json(reading.extras)))
    if reading.other_choices:
        # The other choices, each read as if it were choice 0 of a chunk of its own (the rule of
        # Stream.choices, _core/choices.py): the choices only, the chunk's own fields stay on its row.
        info.choices = []
        info.has_zero = False
        for index, one in per_choice({"choices": chunk["choices"]}):
            if index == 0:
                info.has_zero = True
            else:
                read = _read_chunk(one, None)
                if read is not None:
                    info.choices.append((index, read))
    return info
