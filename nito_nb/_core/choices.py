"""Every choice of a completion asked for several (``n > 1``): each one folded on its own.

The answer of a Stream is choice 0 (docs/PROTOCOL.md rule 11): the accumulator never mixes
another choice into it. The others stay in the log, and are read here, each by an accumulator of
its own, as if it were choice 0 of a stream of its own: :func:`per_choice` cuts a chunk into one
chunk per choice (a chunk without choices, the usage one, goes to choice 0), and :class:`Choices`
folds them, with each choice's logprobs. The same reading serves a Stream's ``choices`` and the
simulator's non-streaming answer (``sim/_completion.py``). Pure: standard library only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .accumulate import Accumulator
from .answer_parts import ToolCall
from .chunk import read_chunk
from .logprobs import logprobs_of

__all__ = ["Choice", "Choices", "per_choice"]


def per_choice(chunk: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(index, chunk)`` for each choice of ``chunk``, its one choice renumbered 0."""
    listed = chunk.get("choices")
    if not isinstance(listed, list) or all(
        not isinstance(c, dict) or c.get("index", 0) == 0 for c in listed
    ):
        yield 0, chunk
        return
    for choice in listed:
        if isinstance(choice, dict):
            index = choice.get("index", 0)
            yield (
                (index if isinstance(index, int) and not isinstance(index, bool) else 0),
                {**chunk, "choices": [{**choice, "index": 0}]},
            )


@dataclass(frozen=True)
class Choice:
    """One choice as it stands: what a Stream says of choice 0, for choice ``index``."""

    index: int
    content: str = ""
    reasoning: str = ""
    refusal: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    logprobs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def message(self) -> dict[str, Any]:
        """The choice as an assistant message (its content, and tool calls when it made some)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        calls = [call.to_message() for call in self.tool_calls if not call.function_call]
        if calls:
            message["tool_calls"] = calls
        return message


class Choices:
    """The chunks of a stream folded per choice: ``fold(chunk, seq)`` each, then ``choices()``."""

    def __init__(self, hold: Any = None) -> None:
        #: The key (a ``Secret``) of a stream still arriving: each choice's texts are shown without
        #: their end that could still start it, as choice 0's are (``Accumulator.hold``).
        self.hold = hold
        self.accumulators: dict[int, Accumulator] = {}
        self.logprobs: dict[int, dict[str, list[dict[str, Any]]]] = {}
        self.read = 0  # the events of the log followed so far (follow)
        self.ended = False  # [DONE] came: what follows is no choice's (rule 9)

    def follow(self, log: Any) -> list[Choice]:
        """Fold the events of ``log`` (a ``ChunkLog``, appended to by a live stream) that came since
        the last call, and return every choice as it stands: a live view folds each event once.
        A log's first ``len(log)`` events are complete (its kinds are appended last)."""
        n = len(log)
        while self.read < n and not self.ended:
            event = log[self.read]
            self.read += 1
            if event.kind == "done":
                self.ended = True
            elif event.kind == "chunk":
                try:
                    chunk = event.chunk
                # a chunk that is not JSON: no choice's (the anomaly is the state's)
                except ValueError:
                    continue
                if isinstance(chunk, dict):
                    self.fold(chunk, event.seq)
        return self.choices()

    def fold(self, chunk: dict[str, Any], seq: int = 0) -> None:
        for index, one in per_choice(chunk):
            accumulator = self.accumulators.get(index)
            if accumulator is None:
                accumulator = self.accumulators[index] = Accumulator()
                accumulator.hold = self.hold
            accumulator.fold(read_chunk(one), seq)
            tokens = logprobs_of(one)
            if tokens["content"] or tokens["refusal"]:
                kept = self.logprobs.setdefault(index, {"content": [], "refusal": []})
                for channel, entries in tokens.items():
                    kept[channel].extend(entries)

    def choices(self) -> list[Choice]:
        """One Choice per index that came, in index order."""
        out = []
        for index in sorted(self.accumulators):
            acc = self.accumulators[index]
            out.append(
                Choice(
                    index,
                    acc.content,
                    acc.reasoning,
                    acc.refusal,
                    list(acc.tool_calls),
                    acc.finish_reason,
                    list(self.logprobs.get(index, {}).get("content", [])),
                )
            )
        return out
