"""THE reader of one chunk: what a parsed ``chat.completion.chunk`` says, per docs/PROTOCOL.md.

:func:`read_chunk` is the only code that looks inside a chunk. The accumulator folds its
:class:`Reading` into the answer (``accumulate.py``), and the frame builder puts it in columns
(``nito_nb/_frame/build.py``), so a new delta field is read here once and both see it
(``tests/test_architecture.py`` checks that they do). The reader is stateless: what depends on
the chunks before (the call a fragment belongs to, a repeated role or finish reason) is the
folder's, with the rules of ``tools.py`` and :func:`plain_reasoning_source`.

Every field a chunk may carry is either read into the Reading or kept in ``extras`` (vendor
fields, as sent); a field of an unexpected shape is reported in ``problems``, never dropped
silently.

Two modules beside it follow its reading without being a reader: ``plain_chunks.py`` says when a
chunk may skip it (the shortcuts), ``text_slots.py`` says where each text it reads sits in the chunk
(for the redaction, which rewrites them in place).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .fields import DELTA_KEYS

__all__ = [
    "PAYLOAD_KEY",
    "PLAIN_REASONING",
    "READABLE",
    "ContentParts",
    "Reading",
    "ReasoningPiece",
    "ToolFragment",
    "as_error_event",
    "plain_reasoning_source",
    "read_chunk",
    "read_content_parts",
    "usage_counts",
]

#: Keys of a chunk, of its choice and of its delta that the reader reads; any other is a vendor
#: field, kept in ``Reading.extras``.
CHUNK_KEYS = frozenset(
    {"id", "object", "created", "model", "choices", "usage", "error", "web_search", "free_tier"}
)
CHOICE_KEYS = frozenset({"index", "delta", "finish_reason", "usage"})
#: The delta keys are declared with their fields (``fields.py``; tests/test_delta_fields.py checks
#: that each reaches the Stream, a frame column and the view).

#: Reasoning detail types whose payload is readable text (rule 4); the key of each type's payload.
READABLE = ("reasoning.text", "reasoning.summary")
PAYLOAD_KEY = {"reasoning.summary": "summary", "reasoning.encrypted": "data"}
#: The plain reasoning strings, in the order one is chosen when no readable detail came (they
#: duplicate each other: gateways send the same text under two names). "thinking" is the text of
#: Mistral's thinking parts of a list-valued ``delta.content``.
PLAIN_REASONING = ("reasoning", "reasoning_content", "thinking")

_MISSING: Any = object()


@dataclass
class ContentParts:
    """What a ``delta.content`` sent as a list of parts says (Mistral's format).

    ``text``: the answer text of its ``text`` parts; ``thinking``: the text of the ``text`` pieces
    inside its ``thinking`` parts (reasoning); ``unread``: every part or piece of another type or
    shape (``image_url``, ``reference``...), kept as sent.
    """

    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    unread: list[Any] = field(default_factory=list)


def read_content_parts(parts: list[Any]) -> ContentParts:
    """Read a list-valued ``delta.content`` (docs/PROTOCOL.md, "Content as a list of parts").

    The one reading of that format (:func:`read_chunk` calls it).
    """
    out = ContentParts()
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            out.text.append(part["text"])
        elif kind == "thinking" and isinstance(part.get("thinking"), list):
            for piece in part["thinking"]:
                text = piece.get("text") if isinstance(piece, dict) else None
                if isinstance(text, str) and piece.get("type") == "text":
                    out.thinking.append(text)
                else:
                    out.unread.append(piece)
        else:
            out.unread.append(part)
    return out


#: Keys of a tool-call fragment that the reader reads; any other (Gemini's ``extra_content``
#: with its thought signature, ...) is kept in ``ToolFragment.extra``.
TOOL_KEYS = frozenset({"index", "id", "type", "function", "custom"})


class ToolFragment:
    """One tool-call fragment of a delta. ``arguments``: its piece of the arguments as text (an
    object sent instead of a string is kept as its JSON), None when it sent none. ``extra``: the
    fragment's other keys, as sent (Gemini's ``extra_content``), to be sent back with the call."""

    __slots__ = ("arguments", "extra", "function_call", "id", "name", "raw", "type")

    def __init__(
        self, raw: dict[str, Any], name: Any, arguments: str | None, *, function_call: bool = False
    ) -> None:
        self.raw = raw
        self.id = raw.get("id")
        self.type = raw.get("type")
        self.name = name
        self.arguments = arguments
        self.extra = {k: v for k, v in raw.items() if k not in TOOL_KEYS}
        #: Read from the deprecated ``delta.function_call`` (tool call 0 of its own, no id).
        self.function_call = function_call


class ReasoningPiece:
    """One reasoning fragment: a ``reasoning_details`` entry (``index`` an int), or a plain string
    (``type`` one of :data:`PLAIN_REASONING`, ``index`` None). ``text`` is its readable text;
    None for encrypted data (opaque, never shown) or a payload that is not a string."""

    __slots__ = ("index", "payload", "raw", "text", "type")

    def __init__(
        self, type_: str, index: int | None, payload: Any, raw: dict[str, Any] | None
    ) -> None:
        self.type = type_
        self.index = index
        self.payload = payload  # as sent (a string, normally)
        self.raw = raw  # the whole detail, for its signature, id, format and other fields
        self.text = payload if isinstance(payload, str) and type_ != "reasoning.encrypted" else None

    @property
    def readable(self) -> bool:
        """Readable text the answer shows as reasoning (a detail of a readable type, or a string)."""
        return bool(self.text) and (self.index is None or self.type in READABLE)


class Reading:
    """What one chunk says (choice 0 only: rule 11), as :func:`read_chunk` reads it."""

    __slots__ = (
        "audio",
        "audio_transcript",
        "content",
        "created",
        "error",
        "extras",
        "finishes",
        "free_tier",
        "id",
        "model",
        "other_choices",
        "problems",
        "reasoning",
        "refusal",
        "role",
        "tools",
        "unread",
        "usage",
        "web_search",
    )

    def __init__(self, chunk: dict[str, Any]) -> None:
        self.id = chunk.get("id")
        self.model = chunk.get("model")
        self.created = chunk.get("created")
        self.error: dict[str, Any] | None = None
        self.usage: dict[str, Any] | None = None
        self.web_search: Any = chunk.get("web_search", _MISSING)
        self.free_tier: Any = chunk.get("free_tier", _MISSING)
        self.extras: dict[str, Any] = {}
        self.role: Any = None
        self.content: str | None = None  # the answer text (of a list of parts: its text parts)
        self.unread: list[Any] = []  # content parts of a type nobody reads, as sent
        self.refusal: str | None = None
        self.audio: dict[str, Any] | None = None  # delta.audio without its base64 data
        self.audio_transcript: str | None = None  # the text the audio speaks
        self.tools: list[ToolFragment] = []
        self.reasoning: list[ReasoningPiece] = []
        self.finishes: list[str] = []
        self.other_choices: list[Any] = []  # the index of each choice other than 0 (n > 1)
        self.problems: list[tuple[str, str]] = []  # (anomaly kind, message), in reading order

    @property
    def has_web_search(self) -> bool:
        return self.web_search is not _MISSING

    @property
    def has_free_tier(self) -> bool:
        return self.free_tier is not _MISSING

    @property
    def carried_besides_content(self) -> bool:
        """The chunk carried answer text other than content: readable reasoning, refusal, tool-call
        arguments or an audio transcript. With content, that is a token-bearing event
        (docs/METRICS.md); the frame judges content per row (a chunk whose content string it cuts
        out and puts back is read once for many rows)."""
        return bool(
            self.refusal
            or self.audio_transcript
            or any(piece.readable for piece in self.reasoning)
            or any(fragment.arguments for fragment in self.tools)
        )


def as_error_event(chunk: Any, event_name: str | None) -> Any:
    """An ``event: error`` whose data is the error object itself is read as ``{"error": data}``."""
    if event_name == "error" and type(chunk) is dict and "error" not in chunk:
        return {"error": chunk}
    return chunk


def read_chunk(chunk: dict[str, Any]) -> Reading:
    """Read one parsed chunk (a dict; see :func:`as_error_event` for ``event: error``)."""
    reading = Reading(chunk)
    problems = reading.problems
    extras = reading.extras
    extras.update((k, v) for k, v in chunk.items() if k not in CHUNK_KEYS)
    error = chunk.get("error")
    if error is not None:
        reading.error = error if isinstance(error, dict) else {"message": str(error)}
    usage = chunk.get("usage")
    if usage is None:
        vendor = chunk.get("x_groq")  # Groq puts the usage under its own key
        if isinstance(vendor, dict):
            usage = vendor.get("usage")
    if isinstance(usage, dict):
        reading.usage = usage
    else:
        usage = None
    choices = chunk.get("choices")
    if not choices:
        return reading
    if not isinstance(choices, list):
        problems.append(("bad-field", "choices is not a list"))
        return reading
    for position, choice in enumerate(choices):
        if not isinstance(choice, dict):
            problems.append(("bad-field", "a choice is not an object"))
            continue
        if choice.get("index", position) != 0:  # rule 11: the answer is choice 0
            reading.other_choices.append(choice.get("index", position))
            continue
        extras.update((f"choice.{k}", v) for k, v in choice.items() if k not in CHOICE_KEYS)
        # Moonshot/Kimi put the usage in the choice: taken when the chunk has none
        if "usage" in choice:
            inner = choice["usage"]
            if usage is None and isinstance(inner, dict):
                reading.usage = usage = inner
            elif inner is not None:
                extras["choice.usage"] = inner  # a top-level usage won, or not an object: kept
        delta = choice.get("delta")
        if delta:
            if isinstance(delta, dict):
                extras.update((f"delta.{k}", v) for k, v in delta.items() if k not in DELTA_KEYS)
                _read_delta(delta, reading)
            else:
                problems.append(("bad-field", "delta is not an object"))
        finish = choice.get("finish_reason")
        if finish is not None:
            reading.finishes.append(str(finish))
    if reading.unread:
        extras["delta.content"] = reading.unread  # parts of types nobody reads, kept as sent
    return reading


def _read_delta(delta: dict[str, Any], reading: Reading) -> None:
    problems = reading.problems
    role = delta.get("role")
    if role is not None:
        reading.role = role
    content = delta.get("content")
    if isinstance(content, list):  # Mistral's parts: text is the answer, thinking is reasoning
        parts = read_content_parts(content)
        content = "".join(parts.text) if parts.text else None
        thinking = "".join(parts.thinking)
        if thinking:
            reading.reasoning.append(ReasoningPiece("thinking", None, thinking, None))
        if parts.unread:
            reading.unread.extend(parts.unread)
            kinds = [
                str(p.get("type")) if isinstance(p, dict) else type(p).__name__
                for p in parts.unread
            ]
            problems.append(
                (
                    "content-part",
                    f"delta.content has parts nito_nb does not read ({', '.join(dict.fromkeys(kinds))}):"
                    " they are kept in the log",
                )
            )
    if isinstance(content, str):
        reading.content = content if reading.content is None else reading.content + content
    elif content:
        problems.append(("bad-field", "delta.content is neither a string nor a list of parts"))
    refusal = delta.get("refusal")
    if isinstance(refusal, str):
        reading.refusal = refusal if reading.refusal is None else reading.refusal + refusal
    elif refusal:
        problems.append(("bad-field", "delta.refusal is not a string"))
    calls = delta.get("tool_calls")
    if calls:
        if isinstance(calls, list):
            for fragment in calls:
                if not isinstance(fragment, dict):
                    problems.append(("bad-field", "a tool-call fragment is not an object"))
                    continue
                function = fragment.get("function")
                name = arguments = None
                if isinstance(function, dict):
                    name = function.get("name")
                    arguments = function.get("arguments")
                    if arguments is not None and not isinstance(arguments, str):
                        if arguments:
                            problems.append(
                                ("bad-field", "tool-call arguments sent as an object, not a string")
                            )
                        arguments = json.dumps(arguments) if arguments else ""
                elif "custom" in fragment:  # OpenAI's custom tools: {name, input}, input free text
                    function = fragment["custom"]
                    if isinstance(function, dict):
                        name = function.get("name")
                        arguments = function.get("input")
                        if arguments is not None and not isinstance(arguments, str):
                            problems.append(
                                ("bad-field", "a custom tool call's input is not a string")
                            )
                            arguments = json.dumps(arguments)
                    else:
                        problems.append(("bad-field", "a tool call's custom is not an object"))
                tool = ToolFragment(fragment, name, arguments)
                reading.tools.append(tool)
                if tool.extra:  # also in the frame's extras, with the fragment's index
                    kept = {k: fragment[k] for k in ("index", "id") if k in fragment}
                    reading.extras.setdefault("delta.tool_calls", []).append({**kept, **tool.extra})
        else:
            problems.append(("bad-field", "delta.tool_calls is not a list"))
    audio = delta.get("audio")
    if audio is not None:  # OpenAI's audio output: {id, data, transcript, expires_at} pieces
        _read_audio(audio, reading)
    legacy = delta.get("function_call")
    if legacy is not None:  # deprecated (openai-python's ChoiceDelta.function_call): one call
        _read_function_call(legacy, reading)
    details = delta.get("reasoning_details")
    if details:
        if isinstance(details, list):
            for detail in details:
                if not isinstance(detail, dict):
                    problems.append(("bad-field", "a reasoning detail is not an object"))
                    continue
                type_ = str(detail.get("type") or "reasoning.text")
                index = detail.get("index")
                key = PAYLOAD_KEY.get(type_, "text")
                payload = detail.get(key)
                if payload and not isinstance(payload, str):
                    problems.append(("bad-field", f"reasoning {key} is not a string"))
                reading.reasoning.append(
                    ReasoningPiece(type_, index if isinstance(index, int) else 0, payload, detail)
                )
        else:
            problems.append(("bad-field", "delta.reasoning_details is not a list"))
    for name in ("reasoning", "reasoning_content"):
        text = delta.get(name)
        if text and isinstance(text, str):
            reading.reasoning.append(ReasoningPiece(name, None, text, None))


def _read_audio(audio: Any, reading: Reading) -> None:
    """``delta.audio``: its ``transcript`` pieces are the text the audio speaks (token-bearing,
    kept apart from ``content``); its ``id`` (and ``expires_at``) are kept; its base64 ``data``
    stays in the log only (the frame's ``audio`` column says how many characters came). Noted once as the
    anomaly ``audio``, so that an answer that is only audio does not look empty."""
    if not isinstance(audio, dict):
        reading.problems.append(("bad-field", "delta.audio is not an object"))
        reading.extras["delta.audio"] = audio
        return
    transcript = audio.get("transcript")
    if isinstance(transcript, str):
        reading.audio_transcript = transcript
    elif transcript is not None:
        reading.problems.append(("bad-field", "delta.audio.transcript is not a string"))
    data = audio.get("data")
    if isinstance(data, str):
        kept = {k: v for k, v in audio.items() if k != "data"}
        kept["data_chars"] = len(data)
    else:
        kept = dict(audio)  # no base64 text to leave out: kept as sent
        if data is not None:
            reading.problems.append(("bad-field", "delta.audio.data is not a string"))
    reading.audio = kept  # the frame's ``audio`` column
    reading.problems.append(
        (
            "audio",
            "the answer came with audio (delta.audio): its transcript is Stream.audio_transcript, the"
            " audio data is kept in the log only",
        )
    )


def _read_function_call(legacy: Any, reading: Reading) -> None:
    """``delta.function_call`` (``{name?, arguments?}``, finish reason ``function_call``), read as
    tool call 0 with no id, noted as the anomaly ``function-call``; ``Stream.message`` sends it
    back as ``function_call``, the shape the deprecated API expects."""
    if not isinstance(legacy, dict):
        reading.problems.append(("bad-field", "delta.function_call is not an object"))
        return
    name, arguments = legacy.get("name"), legacy.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        reading.problems.append(
            ("bad-field", "function_call arguments sent as an object, not a string")
        )
        arguments = json.dumps(arguments)
    raw = {"index": 0, "type": "function", "function": legacy}
    reading.tools.append(ToolFragment(raw, name, arguments, function_call=True))
    reading.problems.append(
        (
            "function-call",
            "the deprecated delta.function_call was read as tool call 0; the message sends it back as function_call",
        )
    )


def plain_reasoning_source(has_readable_details: bool, present: Iterable[str]) -> str | None:
    """Which plain reasoning strings the answer shows (rule 4): none when readable details came,
    else the first of :data:`PLAIN_REASONING` that came (the others duplicate it)."""
    if has_readable_details:
        return None
    present = set(present)
    return next((name for name in PLAIN_REASONING if name in present), None)


def usage_counts(usage: dict[str, Any]) -> dict[str, Any]:
    """The token counts and cost of a usage object, wherever the gateway puts them:
    ``reasoning_tokens`` from ``completion_tokens_details``; ``cached_tokens`` from
    ``prompt_tokens_details``, else ``cached_tokens`` / ``prompt_cache_hit_tokens`` (DeepSeek);
    ``cost`` when it is a number, or the ``total_cost`` of a cost object (Perplexity's ``{input_tokens_cost,
    output_tokens_cost, request_cost, total_cost}``; the object stays in the usage as sent). A
    count that is not an integer is None."""
    out: dict[str, Any] = {
        name: _int(usage.get(name))
        for name in ("prompt_tokens", "completion_tokens", "total_tokens")
    }
    details = usage.get("completion_tokens_details")
    if isinstance(details, dict):
        out["reasoning_tokens"] = _int(details.get("reasoning_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if cached is None:
        cached = usage.get("cached_tokens", usage.get("prompt_cache_hit_tokens"))
    out["cached_tokens"] = _int(cached)
    cost = usage.get("cost")
    if isinstance(cost, dict):
        cost = cost.get("total_cost")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        out["cost"] = float(cost)
    return out


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
