"""The parts of an answer the accumulator builds, apart from its folding rules: an
:class:`Anomaly` (a rule a stream broke), a :class:`ToolCall` assembled from its fragments (and
what its arguments parse to), a :class:`ReasoningDetail` merged by index and type. Split from
``accumulate.py``, which folds chunks into them; users meet ``Anomaly`` and ``ToolCall`` on a
Stream. No I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .chunk import PAYLOAD_KEY

__all__ = ["Anomaly", "ReasoningDetail", "ToolCall", "parse_arguments"]


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
    #: The fragments' keys nito_nb does not read (Gemini's ``extra_content``, which holds the
    #: thought signature), merged across fragments (the last value of a key wins); sent back by
    #: :meth:`to_message`.
    extra: dict[str, Any] = field(default_factory=dict)
    #: Read from the deprecated ``delta.function_call``: sent back as the message's
    #: ``function_call``, not in its ``tool_calls`` (docs/PROTOCOL.md, "Tool calls").
    function_call: bool = False
    #: The key, while the stream runs: the end of the arguments that could still start it is
    #: held back (the accumulator's :attr:`Accumulator.hold`).
    _hold: Any = field(default=None, repr=False, compare=False)

    @property
    def arguments(self) -> str:
        if len(self._parts) > 1:  # join once, keep the joined string
            self._parts[:] = ["".join(self._parts)]
        text = self._parts[0] if self._parts else ""
        return text if self._hold is None else self._hold.hold_back(text)

    def __getstate__(self) -> dict[str, Any]:
        # A copy or a pickle never takes the key along (a call of a stream still arriving).
        return {**self.__dict__, "_hold": None}

    @property
    def valid_json(self) -> bool:
        return self.json_error is None

    @property
    def custom(self) -> bool:
        """An OpenAI custom tool call (``type: "custom"``): its ``arguments`` are the ``input``
        text, free text and not JSON."""
        return self.type == "custom"

    @property
    def json_error(self) -> str | None:
        """Why the arguments are not valid JSON, or None when they are (an empty string is ``{}``).
        None for a custom call, whose input is not JSON."""
        return None if self.custom else parse_arguments(self.arguments)[1]

    @property
    def parsed(self) -> Any:
        """The arguments parsed as JSON; None when they are not valid JSON (see :attr:`json_error`).
        A custom call's input text, as it is."""
        return self.arguments if self.custom else parse_arguments(self.arguments)[0]

    def to_message(self) -> dict[str, Any]:
        """The call as an assistant message carries it in the next request (with the fragments'
        unread keys, :attr:`extra`)."""
        call_id = self.id or f"call_{self.index}"
        if self.custom:
            body = {"custom": {"name": self.name, "input": self.arguments}}
        else:
            body = {"function": {"name": self.name, "arguments": self.arguments}}
        return {**self.extra, "id": call_id, "type": self.type or "function", **body}

    def __repr__(self) -> str:
        args = self.arguments
        shown = args if len(args) <= 80 else args[:77] + "..."
        ok = "" if self.valid_json else ", invalid JSON"
        return f"ToolCall(index={self.index}, id={self.id!r}, name={self.name!r}, arguments={shown!r}{ok})"


def parse_arguments(text: str) -> tuple[Any, str | None]:
    if not text.strip():
        return {}, None  # a call without arguments: what OpenAI-style clients send as "{}"
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, str(exc)


class ReasoningDetail:
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

    def as_dict(self, hold: Any = None) -> dict[str, Any]:
        key = PAYLOAD_KEY.get(self.type, "text")
        out: dict[str, Any] = {"type": self.type, "index": self.index, key: self.text(hold)}
        for name in ("signature", "id", "format"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        out.update(self.extra)
        return out

    def text(self, hold: Any = None) -> str:
        text = "".join(self.parts)
        return text if hold is None or self.type == "reasoning.encrypted" else hold.hold_back(text)
