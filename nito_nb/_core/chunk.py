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
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .fields import DELTA_KEYS
from .logprobs import CHANNELS as TOKEN_CHANNELS

__all__ = [
    "PAYLOAD_KEY",
    "PLAIN_REASONING",
    "READABLE",
    "ContentParts",
    "Reading",
    "ReasoningPiece",
    "ToolFragment",
    "as_error_event",
    "plain_choice",
    "plain_content",
    "plain_content_slot",
    "plain_reasoning",
    "plain_reasoning_source",
    "plain_tool_fragments",
    "read_chunk",
    "read_content_parts",
    "text_slots",
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
#: Keys whose mere presence means something: a chunk with one of them is never "plain content".
MEANINGFUL = frozenset({"error", "usage", "web_search", "free_tier", "x_groq"})
#: Those of them whose null says nothing (``read_chunk`` reads it as absent).
_NULL_IS_ABSENT = frozenset({"error", "usage", "x_groq"})

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


def plain_choice(chunk: Any) -> dict[str, Any] | None:
    """Choice 0 of a chunk that has that one choice, unfinished and without a usage of its own,
    and no key that means something beside it (a null ``usage``, ``error`` or ``x_groq`` says
    nothing: :func:`read_chunk` reads it as absent, and OpenAI sends ``"usage":null`` in every
    chunk); else None. The first half of every plain-chunk test below."""
    if type(chunk) is not dict:
        return None
    if not MEANINGFUL.isdisjoint(chunk):
        for key in MEANINGFUL.intersection(chunk):
            if key not in _NULL_IS_ABSENT or chunk[key] is not None:
                return None
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict:
        return None
    choice = choices[0]
    if choice.get("finish_reason") is not None or choice.get("index", 0) != 0 or "usage" in choice:
        return None  # usage inside the choice (Moonshot): read_chunk reads it
    if choice.get("logprobs") is not None:
        # Its tokens spell the same text again: a text of their own, which the redactor reads
        # only on the full path (a shortcut let a key echoed in them through).
        return None
    return choice


def plain_content(chunk: Any) -> str | None:
    """The content of a chunk that is nothing but one content fragment of choice 0 (not finished,
    no meaningful key, every other value a scalar); else None. The one test behind both
    shortcuts (the accumulator's and the parser's layout cache): such a chunk reads as its text."""
    choice = plain_choice(chunk)
    if choice is None:
        return None
    delta = choice.get("delta")
    if type(delta) is not dict or len(delta) != 1:
        return None
    content = delta.get("content")
    return content if type(content) is str else None


def plain_reasoning(delta: dict[str, Any]) -> list[ReasoningPiece] | None:
    """The reasoning pieces of the delta of a :func:`plain_choice` that holds nothing but plain
    reasoning strings (``reasoning``, ``reasoning_content``) beside a null or empty content, as
    :func:`read_chunk` reads them (in the same order); else None. DeepSeek's and vLLM's reasoning
    chunks: the accumulator folds them without reading the whole chunk."""
    pieces = []
    for name, value in delta.items():
        if name == "reasoning" or name == "reasoning_content":
            if type(value) is not str:
                if value is not None:
                    return None  # a problem to note: the full reading
                continue
        elif name != "content" or value:  # "content": null or "" beside the reasoning
            return None
    for name in ("reasoning", "reasoning_content"):
        text = delta.get(name)
        if text:
            pieces.append(ReasoningPiece(name, None, text, None))
    return pieces


def plain_tool_fragments(delta: dict[str, Any]) -> list[ToolFragment] | None:
    """The fragments of the delta of a :func:`plain_choice` that holds nothing but tool-call
    fragments with a ``function`` object and string (or absent) arguments, beside a null
    content, as :func:`read_chunk` reads them; else None. Every tool-call argument chunk of
    OpenAI's: the accumulator folds them without reading the whole chunk."""
    calls = None
    for name, value in delta.items():
        if name == "tool_calls":
            calls = value
        elif name != "content" or value is not None:
            return None
    if type(calls) is not list or not calls:
        return None
    fragments = []
    for fragment in calls:
        if type(fragment) is not dict:
            return None
        function = fragment.get("function")
        if type(function) is not dict:
            return None
        arguments = function.get("arguments")
        if arguments is not None and type(arguments) is not str:
            return None
        fragments.append(ToolFragment(fragment, function.get("name"), arguments))
    return fragments


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


#: A place in a chunk where answer text arrives: (channel, sub, holder, key), the text being
#: ``holder[key]``. The channel names the text it adds to (``content``, ``thinking``, ``refusal``,
#: ``transcript``, ``reasoning``, ``reasoning_content``, ``detail`` with sub ``(index, type)``,
#: ``tool`` with sub the fragment, whose call :class:`~nito_nb._core.tool_index.ToolIndexer` tells,
#: ``error`` for an error's message). Every tool-call fragment has one, its holder and key None
#: when it carries no text: the calls are told apart by the fragments in order. The tokens of
#: ``logprobs`` too: ``token`` with sub ``(choice index, "content" or "refusal")`` for each token
#: sent (their sequence adds up to that choice's text), each preceded by an ``alternative`` slot
#: of the same sub per entry of its ``top_logprobs`` (read in the token's place, not in sequence).
TextSlot = tuple[str, Any, Any, Any]


def text_slots(chunk: Any) -> list[TextSlot]:
    """Every string of a chunk (as :func:`as_error_event` gives it) that :func:`read_chunk`
    reads as text that adds up over the chunks (content, reasoning, refusal, tool-call
    arguments, audio transcript) or as an error's message, where it is in the chunk, in a fixed
    order. The redaction of a key split across chunks follows each channel and rewrites these
    strings (``_core/redaction.py``); they are read here as :func:`read_chunk` reads them."""
    if type(chunk) is not dict:
        return []
    slots: list[TextSlot] = []
    error = chunk.get("error")
    if error is None:
        pass
    elif isinstance(error, dict):
        if isinstance(error.get("message"), str):
            slots.append(("error", None, error, "message"))
    elif isinstance(error, str):
        slots.append(("error", None, chunk, "error"))
    choices = chunk.get("choices")
    if not choices or not isinstance(choices, list):
        return slots
    for position, choice in enumerate(choices):
        if not isinstance(choice, dict):
            continue
        index = choice.get("index", position)
        delta = choice.get("delta")
        if delta and isinstance(delta, dict):
            if index == 0:
                _delta_slots(delta, slots)
            else:  # n > 1: s.choices reads it, so its key is followed too, on channels of its own
                _other_choice_slots(index if type(index) is int else position, delta, slots)
        logprobs = choice.get("logprobs")
        if logprobs and isinstance(logprobs, dict):  # every choice's: s.choices shows them all
            _token_slots(index if type(index) is int else position, logprobs, slots)
    return slots


def _other_choice_slots(index: int, delta: dict[str, Any], slots: list[TextSlot]) -> None:
    """The text slots of choice ``index`` (not 0) as ``("choice", (index, name, sub), ...)``:
    a channel per choice and text, apart from choice 0's, which the accumulator folds. A tool
    call's channel is its ``index`` as sent (choice 0's go through the accumulator's own
    reckoning of which call a fragment continues; no accumulator folds the others live)."""
    own: list[TextSlot] = []
    _delta_slots(delta, own)
    for name, sub, holder, key in own:
        if name == "tool":
            if holder is None:
                continue
            call = sub.get("index")
            sub = call if type(call) is int else 0
        slots.append(("choice", (index, name, sub), holder, key))


def plain_content_slot(chunk: dict[str, Any]) -> TextSlot:
    """The one text slot of a chunk :func:`plain_content` reads as content (``text_slots`` of it)."""
    return ("content", None, chunk["choices"][0]["delta"], "content")


def _delta_slots(delta: dict[str, Any], slots: list[TextSlot]) -> None:
    # One pass over the delta's own keys (one or two, on most chunks), in the order they came;
    # the deprecated function_call after the tool calls, as read_chunk reads it.
    legacy = None
    for name, value in delta.items():
        if name == "content":
            if isinstance(value, str):
                slots.append(("content", None, delta, "content"))
            elif isinstance(value, list):  # Mistral's parts, as read_content_parts reads them
                _part_slots(value, slots)
        elif name == "reasoning" or name == "reasoning_content":
            if isinstance(value, str):
                slots.append((name, None, delta, name))
        elif name == "reasoning_details":
            if value and isinstance(value, list):
                _detail_slots(value, slots)
        elif name == "tool_calls":
            if value and isinstance(value, list):
                _tool_slots(value, slots)
        elif name == "refusal":
            if isinstance(value, str):
                slots.append(("refusal", None, delta, "refusal"))
        elif name == "audio":
            if isinstance(value, dict) and isinstance(value.get("transcript"), str):
                slots.append(("transcript", None, value, "transcript"))
        elif name == "function_call":
            legacy = value
    if isinstance(legacy, dict):  # tool call 0, as read_chunk reads it
        if isinstance(legacy.get("arguments"), str):
            slots.append(("tool", {"index": 0}, legacy, "arguments"))
        else:
            slots.append(("tool", {"index": 0}, None, None))


def _token_slots(index: int, logprobs: dict[str, Any], slots: list[TextSlot]) -> None:
    # The entries logprobs.logprobs_of reads (those whose token is a string), in order.
    for name in TOKEN_CHANNELS:
        entries = logprobs.get(name)
        if not entries or not isinstance(entries, list):
            continue
        sub = (index, name)
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("token"), str):
                continue
            top = entry.get("top_logprobs")
            if top and isinstance(top, list):
                for alternative in top:
                    if isinstance(alternative, dict) and isinstance(alternative.get("token"), str):
                        slots.append(("alternative", sub, alternative, "token"))
            slots.append(("token", sub, entry, "token"))


def _part_slots(parts: list[Any], slots: list[TextSlot]) -> None:
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            slots.append(("content", None, part, "text"))
        elif kind == "thinking" and isinstance(part.get("thinking"), list):
            for piece in part["thinking"]:
                if (
                    isinstance(piece, dict)
                    and isinstance(piece.get("text"), str)
                    and piece.get("type") == "text"
                ):
                    slots.append(("thinking", None, piece, "text"))


def _tool_slots(calls: list[Any], slots: list[TextSlot]) -> None:
    for fragment in calls:
        if not isinstance(fragment, dict):
            continue
        holder = key = None  # a fragment without text has a slot too: it may start a call
        function = fragment.get("function")
        if isinstance(function, dict):
            if isinstance(function.get("arguments"), str):
                holder, key = function, "arguments"
        elif "custom" in fragment:
            custom = fragment["custom"]
            if isinstance(custom, dict) and isinstance(custom.get("input"), str):
                holder, key = custom, "input"
        slots.append(("tool", fragment, holder, key))


def _detail_slots(details: list[Any], slots: list[TextSlot]) -> None:
    for detail in details:
        if not isinstance(detail, dict):
            continue
        type_ = str(detail.get("type") or "reasoning.text")
        if type_ == "reasoning.encrypted":  # opaque data, never shown as text
            continue
        key = PAYLOAD_KEY.get(type_, "text")
        if isinstance(detail.get(key), str):
            index = detail.get("index")
            slots.append(("detail", (index if isinstance(index, int) else 0, type_), detail, key))


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
