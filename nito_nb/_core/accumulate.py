"""Accumulation: fold parsed chunks into the answer, following docs/PROTOCOL.md's rules. No I/O.

One accumulator serves everything (live iteration, ``read_sse``, ``load``, the magic, the widget,
the DataFrames' text), so they agree by construction. It never raises on odd input: whatever
breaks the rules is noted in :attr:`Accumulator.anomalies` and accumulation carries on.
"""

from __future__ import annotations

from typing import Any

from .answer_parts import Anomaly, ReasoningDetail, ToolCall
from .chunk import (
    PAYLOAD_KEY,
    PLAIN_REASONING,
    READABLE,
    ContentParts,
    Reading,
    ReasoningPiece,
    ToolFragment,
    plain_reasoning_source,
    read_chunk,
    read_content_parts,
    usage_counts,
)
from .plain_chunks import WITH_DETAIL, plain_choice, plain_reasoning, plain_tool_fragments
from .tool_index import ToolIndexer

#: A readable detail's fields that :meth:`Accumulator._detailed` reads as its text or its kind.
_DETAIL_TEXTS = frozenset({"type", "index", "text", "summary", "data"})

__all__ = [
    "PAYLOAD_KEY",
    "USAGE_WITHOUT_TEXT",
    "Accumulator",
    "ContentParts",
    "read_content_parts",
]

#: The anomaly of an answer the usage counts but that never arrived: the views show it on the status
#: line, since the answer then looks like a plain empty one (``done``, no error).
USAGE_WITHOUT_TEXT = "usage-without-text"

#: Pieces of one text kept apart before they are joined into one string. A long stream's text
#: as one list of a million pieces made every full pass of the garbage collector visit each of
#: them (1M content chunks: 40 passes of 30 ms, a fifth of the stream's time); joined every
#: JOIN_AT pieces, a pass visits at most that many, and the joins copy the text about
#: length / (JOIN_AT x mean piece) times over (docs/BENCHMARKS.md).
JOIN_AT = 16_384


#: How much of the error messages' end is kept to hold back a key split across them: more than
#: any key's length (the longest are a few hundred characters).
_TRAIL = 4096


class Accumulator:
    """Fold chunks (parsed JSON objects) into one answer.

    :meth:`add` returns True when the chunk carried answer text (content, reasoning or tool-call
    arguments): the "token-bearing events" of the timing metrics.

    :attr:`hold` is the key while the stream runs (the state sets it, then :meth:`release`): every
    text it shows (content, reasoning, refusal, transcript, tool-call arguments, the error's
    message) is then shown without its end that could still start the key (``Secret.hold_back``).
    """

    def __init__(self) -> None:
        self.role: str | None = None
        self.id: str | None = None
        self.model: str | None = None
        self.created: int | None = None
        self._content: list[str] = []
        self.tool_calls: list[ToolCall] = []
        self._tools_by_index: dict[int, ToolCall] = {}
        self._details: list[ReasoningDetail] = []
        self._details_by_key: dict[tuple[int, str], ReasoningDetail] = {}
        self._tool_indexer = ToolIndexer()
        # The layout _detailed() last took, with what it found: (delta, detail, role anomaly).
        self._last_detailed: tuple[Any, ReasoningDetail, Anomaly | None] | None = None
        # Plain reasoning by where it came from; "thinking" is Mistral's thinking parts.
        self._reasoning_strings: dict[str, list[str]] = {name: [] for name in PLAIN_REASONING}
        self._refusal: list[str] = []
        self._transcript: list[str] = []
        #: OpenAI's ``delta.audio`` merged (``id``, ``expires_at``, ... the last value of a key
        #: wins; ``transcript`` joined; the base64 ``data`` left in the log, its size counted in
        #: ``data_chars``); None when no audio came.
        self.audio: dict[str, Any] | None = None
        #: Parts of a list-valued ``delta.content`` of a type nito_nb does not read, as sent.
        self.unread_parts: list[Any] = []
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self._error: dict[str, Any] | None = None
        # The end of every error message so far, one after the other, while a key is held back:
        # a key split across two error chunks starts in one message and shows in the next.
        self._error_trail = ""
        #: The key to hold back the start of, while the stream runs (a ``Secret``), else None.
        self.hold: Any = None
        self.web_search: Any = None
        self.free_tier: Any = None
        self.done = False
        self.n_chunks = 0
        self.anomalies: list[Anomaly] = []
        self._anomaly_by_kind: dict[str, Anomaly] = {}

    # -- results -----------------------------------------------------------------------------

    @property
    def content(self) -> str:
        if len(self._content) > 1:  # join lazily and keep the result: reading stays O(new text)
            self._content[:] = ["".join(self._content)]
        text = self._content[0] if self._content else ""
        return text if self.hold is None else self.hold.hold_back(text)

    @property
    def refusal(self) -> str | None:
        """The model's refusal (OpenAI's ``delta.refusal``, structured outputs), None if it sent none."""
        if not self._refusal:
            return None
        if len(self._refusal) > 1:
            self._refusal[:] = ["".join(self._refusal)]
        text = self._refusal[0]
        return text if self.hold is None else self.hold.hold_back(text)

    @property
    def audio_transcript(self) -> str | None:
        """The transcript of the answer's audio (OpenAI's ``delta.audio.transcript``), apart from
        ``content``; None when no audio came."""
        if self.audio is None:
            return None
        if len(self._transcript) > 1:
            self._transcript[:] = ["".join(self._transcript)]
        text = self._transcript[0] if self._transcript else ""
        return text if self.hold is None else self.hold.hold_back(text)

    @property
    def reasoning(self) -> str:
        """Readable reasoning (docs/PROTOCOL.md rule 4): text and summary details in index order,
        else the plain ``reasoning`` / ``reasoning_content`` strings (never both: they duplicate),
        else Mistral's thinking parts."""
        readable = sorted(
            (d for d in self._details if d.type in READABLE and d.parts), key=lambda d: d.index
        )
        source = plain_reasoning_source(
            bool(readable), (k for k, v in self._reasoning_strings.items() if v)
        )
        hold = self.hold
        if source is not None:
            text = "".join(self._reasoning_strings[source])
            return text if hold is None else hold.hold_back(text)
        # Each detail held back on its own: one may still be arriving while the next one starts.
        return "\n\n".join(text for text in (d.text(hold) for d in readable) if text)

    @property
    def reasoning_details(self) -> list[dict[str, Any]]:
        return [d.as_dict(self.hold) for d in self._details]

    @property
    def error(self) -> dict[str, Any] | None:
        """The last error object the stream sent (while the stream runs, the end of its message
        that could still start the key, with the messages before it, is held back)."""
        error, hold = self._error, self.hold
        if hold is None or not isinstance(error, dict) or not isinstance(error.get("message"), str):
            return error
        message = error["message"]
        held = min(len(message), hold.partial_at_end(self._error_trail))
        return {**error, "message": message[: len(message) - held]} if held else error

    @error.setter
    def error(self, value: dict[str, Any] | None) -> None:
        self._error = value
        if (
            self.hold is not None
            and isinstance(value, dict)
            and isinstance(value.get("message"), str)
        ):
            self._error_trail = (self._error_trail + value["message"])[-_TRAIL:]

    def release(self) -> None:
        """The stream ended: hold nothing back any more (what is left cannot be completed)."""
        self.hold = None
        self._error_trail = ""
        self._last_detailed = None  # a layout of the parser's, which forgets them at the end
        for call in self.tool_calls:
            call._hold = None

    def check_end(self, seq: int) -> None:
        """The stream ended at event ``seq``: note what only the whole answer tells. The usage
        counts completion tokens (beyond its reasoning tokens, which a model may keep hidden) but
        no text, reasoning, refusal, audio or tool call arrived: a proxy dropped the answer (LiteLLM
        with Mistral's list content), which would otherwise look like a plain empty ``done``."""
        counts = usage_counts(self.usage) if isinstance(self.usage, dict) else {}
        completion = counts.get("completion_tokens") or 0
        unseen = completion - (counts.get("reasoning_tokens") or 0)
        if unseen <= 0:
            return
        arrived = (
            self.content
            or self.refusal
            or self.tool_calls
            or self.audio is not None
            or self.reasoning
            or self._details_by_key
        )  # encrypted reasoning counts: it came, unreadable
        if not arrived:
            self.note(
                USAGE_WITHOUT_TEXT,
                f"the usage counts {completion:,} completion tokens, but no text, "
                "reasoning or tool call arrived (a proxy may have dropped the answer)",
                seq,
            )

    def replace_tail(self, channel: tuple[str, Any], old: str, new: str) -> None:
        """The end ``old`` of a channel's text (``text_slots.text_slots``' channels) becomes ``new``:
        a key that a later chunk completed, taken out of the text the chunks before it added
        (``_core/redaction.py``). A channel whose text does not end so is left alone."""
        name, sub = channel
        if name == "error":
            error = self._error
            message = error.get("message") if isinstance(error, dict) else None
            if isinstance(message, str) and message.endswith(old):
                self._error = {**error, "message": message[: len(message) - len(old)] + new}  # type: ignore[dict-item]
            if self._error_trail.endswith(old):
                self._error_trail = self._error_trail[: len(self._error_trail) - len(old)] + new
            return
        parts: list[str] | None
        if name == "content":
            parts = self._content
        elif name == "refusal":
            parts = self._refusal
        elif name == "transcript":
            parts = self._transcript
        elif name == "detail":
            detail = self._details_by_key.get(sub)
            parts = None if detail is None else detail.parts
        elif name == "tool":
            call = self._tools_by_index.get(sub)
            parts = None if call is None else call._parts
        else:
            parts = self._reasoning_strings.get(name)
        if not parts:
            return
        text = "".join(parts)
        if text.endswith(old):
            parts[:] = [text[: len(text) - len(old)] + new]

    def note(self, kind: str, message: str, seq: int) -> None:
        """Record an anomaly; the same kind again only counts."""
        known = self._anomaly_by_kind.get(kind)
        if known is None:
            anomaly = Anomaly(kind, message, seq)
            self._anomaly_by_kind[kind] = anomaly
            self.anomalies.append(anomaly)
        else:
            known.count += 1

    # -- folding -----------------------------------------------------------------------------

    def finish(self) -> None:
        """``[DONE]`` arrived (rule 9): later chunks are ignored and noted."""
        self.done = True

    def add_content(self, chunk: dict[str, Any], content: str, seq: int = 0) -> bool:
        """:meth:`add` for a chunk known to be one content-only delta of choice 0 with no other
        meaningful key (``ChunkParser``'s shortcut): the same result, fewer steps."""
        if (
            self.done
            or self.finish_reason is not None
            or self.model is None
            or chunk.get("id") != self.id
        ):
            return self.add(chunk, seq)  # something to note: the full rules
        self.n_chunks += 1
        if content:
            parts = self._content
            parts.append(content)
            if len(parts) > JOIN_AT:
                parts[:] = ["".join(parts)]
            return True
        return False

    def add_text(
        self, chunk_id: Any, slot: str, text: str, fragment: dict[str, Any] | None
    ) -> bool | None:
        """:meth:`add_content` (``slot`` "content") or :meth:`add_slot` of a chunk the parser has
        not built (its layout's, ``ChunkParser.parse_lazy``): ``chunk_id`` its id, ``fragment``
        its tool-call fragment for "arguments" (only its keys are read). None, with nothing
        folded, when the chunk has something to note: the caller then builds it and calls
        :meth:`add_content` or :meth:`add_slot`, which take the full rules. For
        :data:`~.plain_chunks.WITH_DETAIL`, ``fragment`` is the chunk's delta."""
        if self.done or self.model is None or chunk_id != self.id:
            return None
        if slot is WITH_DETAIL:
            assert fragment is not None
            return self._detailed(fragment, text)
        if slot == "content":
            if self.finish_reason is not None:
                return None
            self.n_chunks += 1
            if text:
                parts = self._content
                parts.append(text)
                if len(parts) > JOIN_AT:
                    parts[:] = ["".join(parts)]
                return True
            return False
        if slot == "arguments":
            assert fragment is not None
            index = fragment.get("index")
            call = (
                self._tools_by_index.get(index)
                if type(index) is int and len(fragment) == 2
                else None
            )
            if call is None or len(fragment["function"]) != 1:
                return None
            self.n_chunks += 1
            call.n_fragments += 1
            parts = call._parts
        else:
            self.n_chunks += 1
            parts = self._reasoning_strings[slot]
        if not text:
            return False
        parts.append(text)
        if len(parts) > JOIN_AT:
            parts[:] = ["".join(parts)]
        return True

    def _detailed(self, delta: dict[str, Any], text: str) -> bool | None:
        """:meth:`add_text` of OpenRouter's reasoning chunk (``plain_chunks.plain_detailed``):
        what fold() does with its two pieces, the detail and the plain string, when they only
        add text: the detail already known and every other field of it already taken, and a
        role that is noted again only (None otherwise: the full rules). ``delta`` is its
        layout's (the parser's template): what was found of one holds for the next chunks of it,
        since a detail's fields, once set, and a noted anomaly stay."""
        known = self._last_detailed
        if known is not None and known[0] is delta:
            detail, repeated = known[1], known[2]
        else:
            repeated = None
            if "role" in delta:
                repeated = self._anomaly_by_kind.get("role-repeated")
                if repeated is None:  # the first role, or the first time it repeats: full rules
                    return None
            sent = delta["reasoning_details"][0]
            found = self._details_by_key.get((sent["index"], sent["type"]))
            if found is None:
                return None
            for name, value in sent.items():
                if name in _DETAIL_TEXTS:
                    continue
                if name == "signature":
                    if value:
                        return None
                elif name == "id" or name == "format":
                    if value is not None and getattr(found, name) is None:
                        return None
                else:
                    return None  # kept in the detail's extra: the full rules
            detail = found
            self._last_detailed = (delta, detail, repeated)
        self.n_chunks += 1
        if repeated is not None:
            repeated.count += 1
        if not text:
            return False
        for parts in (detail.parts, self._reasoning_strings["reasoning"]):
            parts.append(text)
            if len(parts) > JOIN_AT:
                parts[:] = ["".join(parts)]
        return True

    def add_slot(self, chunk: dict[str, Any], slot: str, text: str, seq: int = 0) -> bool:
        """:meth:`add` for a chunk known to be one plain reasoning string (``slot`` its name) or
        one tool-call fragment's arguments (``slot`` "arguments") and nothing else meaningful
        (``ChunkParser.parse_slot``'s shortcut): what fold() does with its reading, in fewer steps.
        OpenRouter's reasoning chunk (:data:`~.plain_chunks.WITH_DETAIL`) takes the full rules."""
        if slot is WITH_DETAIL or self.done or self.model is None or chunk.get("id") != self.id:
            return self.add(chunk, seq)  # something to note: the full rules
        self.n_chunks += 1
        if slot == "arguments":
            fragment = chunk["choices"][0]["delta"]["tool_calls"][0]
            index = fragment.get("index")
            call = (
                self._tools_by_index.get(index)
                if type(index) is int and len(fragment) == 2
                else None
            )
            if call is None or len(fragment["function"]) != 1:
                return self._tool_fragment(
                    ToolFragment(fragment, fragment["function"].get("name"), text), seq
                )
            # The usual fragment, {index, function: {arguments}}, of a known call: all that
            # _tool_fragment() would do with it (no id, type, name or extra keys to take).
            call.n_fragments += 1
            if not text:
                return False
            parts = call._parts
            parts.append(text)
            if len(parts) > JOIN_AT:
                parts[:] = ["".join(parts)]
            return True
        if not text:
            return False
        parts = self._reasoning_strings[slot]
        parts.append(text)
        if len(parts) > JOIN_AT:
            parts[:] = ["".join(parts)]
        return True

    def add(self, chunk: dict[str, Any], seq: int = 0) -> bool:
        if self.done:
            self.note("after-done", "a chunk arrived after [DONE]; it was ignored", seq)
            return False
        # The usual chunk: one content fragment of choice 0 and nothing else meaningful, from the
        # same completion. Taken in one step, it keeps accumulation well under the cost of
        # json.loads (bench/bench_stream.py); it reads as read_chunk() would (the same test).
        choice = plain_choice(chunk)
        if choice is not None and self.model is not None and chunk.get("id") == self.id:
            delta = choice.get("delta")
            if type(delta) is dict:
                if len(delta) == 1 and type(delta.get("content")) is str:
                    if self.finish_reason is None:  # else a note: the full rules
                        self.n_chunks += 1
                        if delta["content"]:
                            parts = self._content
                            parts.append(delta["content"])
                            if len(parts) > JOIN_AT:
                                parts[:] = ["".join(parts)]
                            return True
                        return False
                # Reasoning and tool-call argument chunks: what fold() does with their reading,
                # without reading the rest of the chunk (the same pieces, bench/bench_stream.py).
                elif (pieces := plain_reasoning(delta)) is not None:
                    self.n_chunks += 1
                    carried = False
                    for piece in pieces:
                        carried = self._reasoning_piece(piece, seq) or carried
                    return carried
                elif (fragments := plain_tool_fragments(delta)) is not None:
                    self.n_chunks += 1
                    carried = False
                    for fragment in fragments:
                        carried = self._tool_fragment(fragment, seq) or carried
                    return carried
        return self.fold(read_chunk(chunk), seq)

    def fold(self, reading: Reading, seq: int = 0) -> bool:
        """Fold what one chunk says (:func:`read_chunk`) into the answer; True when it carried
        answer text. The rules that depend on the chunks before are here; the reading is not."""
        self.n_chunks += 1
        if reading.id != self.id or self.model is None:  # the usual chunk repeats both
            self._identity(reading, seq)
        if reading.error is not None:
            self.error = reading.error
        if reading.usage is not None:
            # cumulative on some gateways: take the last, never add (rule 6)
            self.usage = reading.usage
        if reading.has_web_search:
            self.web_search = reading.web_search
        if reading.has_free_tier:
            self.free_tier = reading.free_tier
        for kind, message in reading.problems:
            self.note(kind, message, seq)
        for index in reading.other_choices:
            # Rule 11: the answer is choice 0; the others stay in the log, and the view says so.
            self.note(
                "other-choices",
                f"choice {index!r} arrived (n > 1): the answer shown is choice 0; the other choices"
                " are kept in the log only",
                seq,
            )
        carried = False
        if reading.role is not None:
            if self.role is None:
                self.role = reading.role
            else:
                self.note("role-repeated", "role was sent on more than the first delta", seq)
        if reading.unread:
            self.unread_parts.extend(reading.unread)
        if reading.content:
            if self.finish_reason is not None:
                self.note("content-after-finish", "content arrived after the terminal chunk", seq)
            parts = self._content
            parts.append(reading.content)
            if len(parts) > JOIN_AT:
                parts[:] = ["".join(parts)]
            carried = True
        if reading.refusal:
            self._refusal.append(reading.refusal)
            carried = True
        if reading.audio is not None:
            self._audio(reading)
            carried = carried or bool(reading.audio_transcript)
        for fragment in reading.tools:
            carried = self._tool_fragment(fragment, seq) or carried
        for piece in reading.reasoning:
            carried = self._reasoning_piece(piece, seq) or carried
        for finish in reading.finishes:
            if self.finish_reason is not None:
                self.note("finish-repeated", "finish_reason was sent more than once", seq)
            self.finish_reason = finish
        return carried

    def _audio(self, reading: Reading) -> None:
        audio = dict(self.audio or {})
        for name, value in (reading.audio or {}).items():
            if name == "transcript" and isinstance(value, str):
                continue  # joined in audio_transcript; one of another type is kept as sent
            if name == "data_chars":
                value = (audio.get(name) or 0) + (value or 0)
            audio[name] = value
        self.audio = audio
        if reading.audio_transcript:
            self._transcript.append(reading.audio_transcript)

    def _identity(self, reading: Reading, seq: int) -> None:
        chunk_id = reading.id
        if chunk_id is not None:
            if not chunk_id:
                self.note("id-empty", "a chunk has an empty id", seq)
            elif self.id is None:
                self.id = chunk_id
            elif chunk_id != self.id:
                self.note("id-changed", f"the completion id changed to {chunk_id!r}", seq)
        if self.model is None and reading.model:
            self.model = reading.model
        if self.created is None and reading.created is not None:
            self.created = reading.created

    def _tool_fragment(self, fragment: ToolFragment, seq: int) -> bool:
        if not isinstance(fragment.raw.get("index"), int):
            self.note("tool-no-index", "a tool-call fragment has no index", seq)
        index = self._tool_indexer.index(fragment.raw)
        call = self._tools_by_index.get(index)
        if call is None:
            call = ToolCall(index=index, _hold=self.hold)
            self._tools_by_index[index] = call
            self.tool_calls.append(call)
            self.tool_calls.sort(key=lambda c: c.index)
        call.n_fragments += 1
        if fragment.function_call:
            call.function_call = True
        if fragment.extra:  # a new dict, not an update: a snapshot's copy keeps its own
            call.extra = {**call.extra, **fragment.extra}
        if fragment.id and call.id is None:
            call.id = fragment.id
        if fragment.type and call.type is None:
            call.type = fragment.type
        name = fragment.name
        if name:
            if not call.name:
                call.name = name
            elif name != call.name:
                self.note(
                    "tool-renamed", f"tool call {call.index} changed its name to {name!r}", seq
                )
        if fragment.arguments:
            parts = call._parts
            parts.append(fragment.arguments)
            if len(parts) > JOIN_AT:
                parts[:] = ["".join(parts)]
            return True
        return False

    def _reasoning_piece(self, piece: ReasoningPiece, seq: int) -> bool:
        if piece.index is None:  # a plain string: reasoning, reasoning_content or thinking
            parts = self._reasoning_strings[piece.type]
            parts.append(piece.payload)
            if len(parts) > JOIN_AT:
                parts[:] = ["".join(parts)]
            return True
        detail: ReasoningDetail | None
        if piece.type == "reasoning.encrypted":
            # Opaque: each encrypted block is kept whole, never joined with another.
            detail = ReasoningDetail(piece.index, piece.type)
            self._details.append(detail)
        else:
            key = (piece.index, piece.type)
            detail = self._details_by_key.get(key)
            if detail is None:
                detail = ReasoningDetail(piece.index, piece.type)
                self._details_by_key[key] = detail
                self._details.append(detail)
        carried = False
        if piece.payload and isinstance(piece.payload, str):
            detail.parts.append(piece.payload)
            if len(detail.parts) > JOIN_AT:
                detail.parts[:] = ["".join(detail.parts)]
            carried = piece.type in READABLE
        raw = piece.raw or {}
        if raw.get("signature"):
            detail.signature = raw["signature"]  # the last signature wins (rule 4)
        for name in ("id", "format"):
            if raw.get(name) is not None and getattr(detail, name) is None:
                setattr(detail, name, raw[name])
        for name, value in raw.items():
            if name not in (
                "type",
                "index",
                "text",
                "summary",
                "data",
                "signature",
                "id",
                "format",
            ):
                detail.extra[name] = value
        return carried
