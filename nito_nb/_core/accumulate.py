"""Accumulation: fold parsed chunks into the answer, following docs/PROTOCOL.md's rules. No I/O.

One accumulator serves everything (live iteration, ``read_sse``, ``load``, the magic, the widget,
the DataFrames' text), so they agree by construction. It never raises on odd input: whatever
breaks the rules is noted in :attr:`Accumulator.anomalies` and accumulation carries on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Accumulator", "Anomaly", "ContentParts", "ToolCall", "read_content_parts"]


@dataclass
class Anomaly:
    """A protocol rule the stream broke. Repeats of the same kind are counted, not listed."""

    kind: str
    message: str
    seq: int  # the first event where it was seen
    count: int = 1

    def __str__(self) -> str:
        times = f" ({self.count}x)" if self.count > 1 else ""
        return f"[{self.kind}] {self.message} (event {self.seq}){times}"


@dataclass
class ToolCall:
    """One tool call assembled from its fragments. ``arguments`` is the raw concatenated string."""

    index: int
    id: str | None = None
    type: str | None = None
    name: str = ""
    _parts: list[str] = field(default_factory=list, repr=False)
    n_fragments: int = 0

    @property
    def arguments(self) -> str:
        if len(self._parts) > 1:  # join once, keep the joined string
            self._parts[:] = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    @property
    def valid_json(self) -> bool:
        return self.json_error is None

    @property
    def json_error(self) -> str | None:
        """Why the arguments are not valid JSON, or None when they are (an empty string is ``{}``)."""
        return _parse_arguments(self.arguments)[1]

    @property
    def parsed(self) -> Any:
        """The arguments parsed as JSON; None when they are not valid JSON (see :attr:`json_error`)."""
        return _parse_arguments(self.arguments)[0]

    def to_message(self) -> dict[str, Any]:
        """The call as an assistant message carries it in the next request."""
        return {
            "id": self.id or f"call_{self.index}",
            "type": self.type or "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }

    def __repr__(self) -> str:
        args = self.arguments
        shown = args if len(args) <= 80 else args[:77] + "..."
        ok = "" if self.valid_json else ", invalid JSON"
        return f"ToolCall(index={self.index}, id={self.id!r}, name={self.name!r}, arguments={shown!r}{ok})"


def _parse_arguments(text: str) -> tuple[Any, str | None]:
    if not text.strip():
        return {}, None  # a call without arguments: what OpenAI-style clients send as "{}"
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, str(exc)


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

    The one reading of that format: the accumulator and the frame builder both call it.
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


def _describe_unread(unread: list[Any]) -> str:
    """How an anomaly names the parts nobody reads: their types, in order, once each."""
    kinds = [str(p.get("type")) if isinstance(p, dict) else type(p).__name__ for p in unread]
    return ", ".join(dict.fromkeys(kinds))


class _Reasoning:
    """One reasoning detail merged by (index, type)."""

    __slots__ = ("extra", "format", "id", "index", "parts", "signature", "type")

    def __init__(self, index: int, type_: str) -> None:
        self.index = index
        self.type = type_
        self.parts: list[str] = []
        self.signature: str | None = None
        self.id: str | None = None
        self.format: str | None = None
        self.extra: dict[str, Any] = {}

    def as_dict(self) -> dict[str, Any]:
        key = PAYLOAD_KEY.get(self.type, "text")
        out: dict[str, Any] = {"type": self.type, "index": self.index, key: "".join(self.parts)}
        for name in ("signature", "id", "format"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        out.update(self.extra)
        return out


_READABLE = {"reasoning.text": "text", "reasoning.summary": "summary"}
#: The key of a reasoning detail's payload, by its type (``text`` for any other type).
PAYLOAD_KEY = {"reasoning.summary": "summary", "reasoning.encrypted": "data"}


class Accumulator:
    """Fold chunks (parsed JSON objects) into one answer.

    :meth:`add` returns True when the chunk carried answer text (content, reasoning or tool-call
    arguments): the "token-bearing events" of the timing metrics.
    """

    def __init__(self) -> None:
        self.role: str | None = None
        self.id: str | None = None
        self.model: str | None = None
        self.created: int | None = None
        self._content: list[str] = []
        self.tool_calls: list[ToolCall] = []
        self._tools_by_index: dict[int, ToolCall] = {}
        self._details: list[_Reasoning] = []
        self._details_by_key: dict[tuple[int, str], _Reasoning] = {}
        # Plain reasoning by where it came from; "thinking" is Mistral's thinking parts.
        self._reasoning_strings: dict[str, list[str]] = {
            "reasoning": [],
            "reasoning_content": [],
            "thinking": [],
        }
        self._refusal: list[str] = []
        #: Parts of a list-valued ``delta.content`` of a type nito_nb does not read, as sent.
        self.unread_parts: list[Any] = []
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
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
        return self._content[0] if self._content else ""

    @property
    def refusal(self) -> str | None:
        """The model's refusal (OpenAI's ``delta.refusal``, structured outputs), None if it sent none."""
        if not self._refusal:
            return None
        if len(self._refusal) > 1:
            self._refusal[:] = ["".join(self._refusal)]
        return self._refusal[0]

    @property
    def reasoning(self) -> str:
        """Readable reasoning (docs/PROTOCOL.md rule 4): text and summary details in index order,
        else the plain ``reasoning`` / ``reasoning_content`` strings (never both: they duplicate),
        else Mistral's thinking parts."""
        readable = sorted(
            (d for d in self._details if d.type in _READABLE and d.parts), key=lambda d: d.index
        )
        if readable:
            return "\n\n".join("".join(d.parts) for d in readable)
        for parts in self._reasoning_strings.values():
            if parts:
                return "".join(parts)
        return ""

    @property
    def reasoning_details(self) -> list[dict[str, Any]]:
        return [d.as_dict() for d in self._details]

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
        if self.done or self.finish_reason is not None or self.model is None or chunk.get("id") != self.id:
            return self.add(chunk, seq)  # something to note: the full rules
        self.n_chunks += 1
        if content:
            self._content.append(content)
            return True
        return False

    def add(self, chunk: dict[str, Any], seq: int = 0) -> bool:
        if self.done:
            self.note("after-done", "a chunk arrived after [DONE]; it was ignored", seq)
            return False
        self.n_chunks += 1
        if chunk.get("id") != self.id or self.model is None:  # the usual chunk repeats both
            self._identity(chunk, seq)
        error = chunk.get("error")
        if error is not None:
            self.error = error if isinstance(error, dict) else {"message": str(error)}
        usage = chunk.get("usage")
        if usage is None and "x_groq" in chunk:
            vendor = chunk["x_groq"]  # Groq puts the usage under its own key
            if isinstance(vendor, dict):
                usage = vendor.get("usage")
        if usage is not None and isinstance(usage, dict):
            self.usage = usage  # cumulative on some gateways: take the last, never add (rule 6)
        if "web_search" in chunk:
            self.web_search = chunk["web_search"]
        if "free_tier" in chunk:
            self.free_tier = chunk["free_tier"]

        choices = chunk.get("choices")
        if not choices:
            return False
        # The usual chunk: one choice whose delta holds only a content fragment. Taken in one
        # step, it keeps accumulation well under the cost of json.loads (bench/bench_stream.py).
        if type(choices) is list and len(choices) == 1:
            choice = choices[0]
            if type(choice) is dict and choice.get("finish_reason") is None and choice.get("index", 0) == 0:
                delta = choice.get("delta")
                if type(delta) is dict and len(delta) == 1:
                    content = delta.get("content")
                    if type(content) is str and self.finish_reason is None:
                        if not content:
                            return False
                        self._content.append(content)
                        return True
        if not isinstance(choices, list):
            self.note("bad-field", "choices is not a list", seq)
            return False
        carried = False
        for position, choice in enumerate(choices):
            if not isinstance(choice, dict):
                self.note("bad-field", "a choice is not an object", seq)
                continue
            # Rule 11: the answer is choice 0; the others stay in the log, and the view says so.
            if choice.get("index", position) != 0:
                self.note(
                    "other-choices",
                    f"choice {choice.get('index', position)!r} arrived (n > 1): the answer shown"
                    " is choice 0; the other choices are kept in the log only",
                    seq,
                )
                continue
            delta = choice.get("delta")
            if delta:
                if isinstance(delta, dict):
                    carried = self._delta(delta, seq) or carried
                else:
                    self.note("bad-field", "delta is not an object", seq)
            finish = choice.get("finish_reason")
            if finish is not None:
                if self.finish_reason is not None:
                    self.note("finish-repeated", "finish_reason was sent more than once", seq)
                self.finish_reason = str(finish)
        return carried

    def _identity(self, chunk: dict[str, Any], seq: int) -> None:
        chunk_id = chunk.get("id")
        if chunk_id is not None:
            if not chunk_id:
                self.note("id-empty", "a chunk has an empty id", seq)
            elif self.id is None:
                self.id = chunk_id
            elif chunk_id != self.id:
                self.note("id-changed", f"the completion id changed to {chunk_id!r}", seq)
        if self.model is None and chunk.get("model"):
            self.model = chunk["model"]
        if self.created is None and chunk.get("created") is not None:
            self.created = chunk["created"]

    def _delta(self, delta: dict[str, Any], seq: int) -> bool:
        carried = False
        role = delta.get("role")
        if role is not None:
            if self.role is None:
                self.role = role
            else:
                self.note("role-repeated", "role was sent on more than the first delta", seq)
        content = delta.get("content")
        if content:
            if isinstance(content, list):
                parts = read_content_parts(content)
                content = "".join(parts.text)
                if parts.thinking:
                    self._reasoning_strings["thinking"].extend(parts.thinking)
                    carried = carried or any(parts.thinking)
                if parts.unread:
                    self.unread_parts.extend(parts.unread)
                    self.note(
                        "content-part",
                        f"delta.content has parts nito_nb does not read ({_describe_unread(parts.unread)}):"
                        " they are kept in the log",
                        seq,
                    )
            if isinstance(content, str):
                if content:
                    if self.finish_reason is not None:
                        self.note("content-after-finish", "content arrived after the terminal chunk", seq)
                    self._content.append(content)
                    carried = True
            else:
                self.note("bad-field", "delta.content is neither a string nor a list of parts", seq)
        refusal = delta.get("refusal")
        if refusal:
            if isinstance(refusal, str):
                self._refusal.append(refusal)
                carried = True
            else:
                self.note("bad-field", "delta.refusal is not a string", seq)
        tool_calls = delta.get("tool_calls")
        if tool_calls:
            carried = self._tool_fragments(tool_calls, seq) or carried
        details = delta.get("reasoning_details")
        if details:
            carried = self._reasoning_fragments(details, seq) or carried
        for name in ("reasoning", "reasoning_content"):
            text = delta.get(name)
            if text and isinstance(text, str):
                self._reasoning_strings[name].append(text)
                carried = True
        return carried

    def _tool_fragments(self, fragments: Any, seq: int) -> bool:
        if not isinstance(fragments, list):
            self.note("bad-field", "delta.tool_calls is not a list", seq)
            return False
        carried = False
        for fragment in fragments:
            if not isinstance(fragment, dict):
                self.note("bad-field", "a tool-call fragment is not an object", seq)
                continue
            call = self._tool_call_for(fragment, seq)
            call.n_fragments += 1
            if fragment.get("id") and call.id is None:
                call.id = fragment["id"]
            if fragment.get("type") and call.type is None:
                call.type = fragment["type"]
            function = fragment.get("function")
            if not isinstance(function, dict):
                continue
            name = function.get("name")
            if name:
                if not call.name:
                    call.name = name
                elif name != call.name:
                    self.note("tool-renamed", f"tool call {call.index} changed its name to {name!r}", seq)
            arguments = function.get("arguments")
            if arguments:
                if not isinstance(arguments, str):
                    self.note("bad-field", "tool-call arguments sent as an object, not a string", seq)
                    arguments = json.dumps(arguments)
                call._parts.append(arguments)
                carried = True
        return carried

    def _tool_call_for(self, fragment: dict[str, Any], seq: int) -> ToolCall:
        index = fragment.get("index")
        if not isinstance(index, int):
            # Some gateways send whole calls without an index: a new id starts a new call,
            # a fragment without id continues the last one.
            self.note("tool-no-index", "a tool-call fragment has no index", seq)
            known_ids = {c.id for c in self.tool_calls}
            if self.tool_calls and (not fragment.get("id") or fragment.get("id") in known_ids):
                if fragment.get("id"):
                    return next(c for c in self.tool_calls if c.id == fragment["id"])
                return self.tool_calls[-1]
            index = max(self._tools_by_index, default=-1) + 1
        call = self._tools_by_index.get(index)
        if call is None:
            call = ToolCall(index=index)
            self._tools_by_index[index] = call
            self.tool_calls.append(call)
            self.tool_calls.sort(key=lambda c: c.index)
        return call

    def _reasoning_fragments(self, fragments: Any, seq: int) -> bool:
        if not isinstance(fragments, list):
            self.note("bad-field", "delta.reasoning_details is not a list", seq)
            return False
        carried = False
        for fragment in fragments:
            if not isinstance(fragment, dict):
                self.note("bad-field", "a reasoning detail is not an object", seq)
                continue
            type_ = str(fragment.get("type") or "reasoning.text")
            index = fragment.get("index")
            if not isinstance(index, int):
                index = 0
            if type_ == "reasoning.encrypted":
                # Opaque: each encrypted block is kept whole, never joined with another.
                detail = _Reasoning(index, type_)
                self._details.append(detail)
            else:
                key = (index, type_)
                detail = self._details_by_key.get(key)  # type: ignore[assignment]
                if detail is None:
                    detail = _Reasoning(index, type_)
                    self._details_by_key[key] = detail
                    self._details.append(detail)
            payload_key = PAYLOAD_KEY.get(type_, "text")
            payload = fragment.get(payload_key)
            if payload:
                if isinstance(payload, str):
                    detail.parts.append(payload)
                    carried = carried or type_ in _READABLE
                else:
                    self.note("bad-field", f"reasoning {payload_key} is not a string", seq)
            if fragment.get("signature"):
                detail.signature = fragment["signature"]  # the last signature wins (rule 4)
            for name in ("id", "format"):
                if fragment.get(name) is not None and getattr(detail, name) is None:
                    setattr(detail, name, fragment[name])
            for name, value in fragment.items():
                if name not in ("type", "index", "text", "summary", "data", "signature", "id", "format"):
                    detail.extra[name] = value
        return carried
