"""Server-Sent Events decoding: bytes in, events out, no I/O.

An incremental decoder after the WHATWG event-stream rules (lines end in CRLF, LF or CR, never
U+2028; a leading BOM is dropped; ``data:`` lines join with LF; an event is dispatched by a blank
line), with one deliberate addition: comment lines (``: keep-alive``) are surfaced as events of
their own, because the chunk log records keep-alives and when they arrived. httpx-sse drops them.

Lines are split on bytes, not text: CR and LF never occur inside a multi-byte UTF-8 sequence, so a
character split across two network reads is simply carried in the buffer with the unfinished line
and decoded once the line is whole. Splitting bytes also gives each event its exact raw bytes (the
chunk log keeps them), and is faster than decoding first.

Any split of the same bytes gives the same events (tested with hypothesis against every split).

Linear in the body, also for one very long line: a line that goes on over many reads is kept as a
list of pieces and joined once, when its end arrives (re-joining the buffer on every read made
the time quadratic in the line). ``max_event_size`` bounds what one event may buffer: past it
the decoder raises :class:`EventTooLarge` rather than eat memory (bench/bench_sse.py measures
both; its figures are in docs/BENCHMARKS.md).
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["EventTooLarge", "SSEDecoder", "ServerSentEvent"]

_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"\r\n|\r|\n")


class ServerSentEvent(NamedTuple):
    """One event: a dispatched ``data`` event or a comment line.

    ``comment`` is None for data events and the comment text (after ``:`` and one optional space)
    for comments. ``raw`` is the exact body bytes consumed since the previous event, this event's
    own lines included: the ``raw`` of all events, in order, concatenate back to the body.
    (A NamedTuple, not a dataclass: one is made per chunk, and a tuple is cheaper to create;
    docs/BENCHMARKS.md.)
    """

    data: str = ""
    event: str = "message"
    id: str | None = None
    retry: int | None = None
    comment: str | None = None
    raw: bytes = b""

    @property
    def is_comment(self) -> bool:
        return self.comment is not None


_Event = ServerSentEvent


class EventTooLarge(ValueError):
    """One event's bytes (``raw``: its lines and what preceded them since the previous event) went
    past ``limit``. ``size`` is how many had arrived when the decoder stopped (at least
    ``limit + 1``); ``events`` are the complete events of the same read that came before it, which
    the caller keeps. ``blank`` is True when those bytes were only line ends (an all-newline body:
    no event at all, which a message must not call one). The decoder has dropped the event's
    bytes and decodes nothing more."""

    def __init__(
        self, size: int, limit: int, events: list[ServerSentEvent], blank: bool = False
    ) -> None:
        what = "empty lines went" if blank else "an event went"
        super().__init__(f"{what} past {limit:,} bytes ({size:,} bytes and not finished)")
        self.size = size
        self.limit = limit
        self.events = events
        self.blank = blank


class SSEDecoder:
    """Feed bytes with :meth:`decode`, get complete events; call :meth:`flush` at end of body.

    ``max_event_size`` (bytes, default None: no limit) bounds one event's raw bytes: :meth:`decode`
    raises :class:`EventTooLarge` as soon as the event being built is larger, or a read completes
    one that is. Which events come before the error does not depend on how the body was split.
    """

    def __init__(self, max_event_size: int | None = None) -> None:
        self._buffer = b""  # the unfinished last line
        self._held: list[bytes] = []  # further pieces of that line, joined once its end arrives
        self._held_size = 0
        self._limit = max_event_size
        self._failed: EventTooLarge | None = None
        self._raw = bytearray()  # bytes consumed since the last emitted event
        self._data: list[str] | None = None  # data lines of the event being built
        self._event = ""
        self._last_id: str | None = None
        self._retry: int | None = None
        self._at_start = True  # a BOM is only dropped at the very start of the stream

    def decode(self, chunk: bytes) -> list[ServerSentEvent]:
        if not chunk:
            return []
        if self._failed is not None:
            raise self._failed
        events: list[ServerSentEvent] = []
        limit = self._limit
        if limit is None:
            self._decode(chunk, events)
            return events
        before = self._pending_size()
        self._decode(chunk, events)
        if before + len(chunk) > limit:
            # Rare (a read as large as the limit, or an event near it): every event this read
            # completed is at most `before + len(chunk)` long, so only then can one be too large.
            for i, event in enumerate(events):
                if len(event.raw) > limit:
                    self._fail(len(event.raw), events[:i], pending=False)
        size = self._pending_size()
        if size > limit:
            self._fail(size, events)
        return events

    def _pending_size(self) -> int:
        """Bytes of the event being built: its consumed lines and its unfinished one."""
        return len(self._raw) + len(self._buffer) + self._held_size

    def _fail(self, size: int, events: list[ServerSentEvent], pending: bool = True) -> None:
        assert self._limit is not None
        blank = (
            pending
            and self._data is None
            and not (
                self._raw.strip(b"\r\n")
                or self._buffer.strip(b"\r\n")
                or any(p.strip(b"\r\n") for p in self._held)
            )
        )
        self._failed = EventTooLarge(size, self._limit, events, blank)
        # Let go of the event's bytes: not holding them is the point of the limit.
        self._buffer, self._held, self._held_size = b"", [], 0
        self._raw = bytearray()
        self._data = None
        raise self._failed

    def _decode(self, chunk: bytes, events: list[ServerSentEvent]) -> None:
        buffer = self._buffer
        if buffer:
            if (
                b"\n" not in chunk
                and b"\r" not in chunk
                and buffer[-1] != 0x0D  # a CR waits for the next byte: it may be half a CRLF
                and not self._at_start
            ):
                # The unfinished line goes on: hold the piece, and scan and copy the line only
                # once, when its end arrives. This keeps one long line linear.
                self._held.append(chunk)
                self._held_size += len(chunk)
                return
            if self._held:
                buffer = b"".join([buffer, *self._held, chunk])
                self._held, self._held_size = [], 0
            else:
                buffer += chunk
        else:
            buffer = chunk
        if self._at_start:
            if len(buffer) < 3 and _BOM.startswith(buffer):
                self._buffer = buffer  # could still become a BOM
                return
            self._at_start = False
            if buffer.startswith(_BOM):
                self._raw += _BOM
                buffer = buffer[3:]
        if b"\r" not in buffer:
            if self._data is None and not self._raw and not self._event:
                self._blocks(buffer, events)
                return
            # The common case (LF only): one C-level split instead of a regex scan.
            lines = buffer.split(b"\n")
            self._buffer = lines.pop()
            line_event = self._line
            for line in lines:
                line_event(line, line + b"\n", events)
            return
        # A CR at the very end may be the first half of a CRLF split across two reads: that line
        # waits for the next byte, so every split of the body gives the same events and raw bytes.
        limit = len(buffer) - 1 if buffer.endswith(b"\r") else len(buffer)
        start = 0
        for match in _LINE_END.finditer(buffer, 0, limit):
            end = match.end()
            self._line(buffer[start : match.start()], buffer[start:end], events)
            start = end
        self._buffer = buffer[start:]

    def _blocks(self, buffer: bytes, events: list[ServerSentEvent]) -> None:
        """The fast path for LF-only bodies between events: split on the blank lines that end
        events, and turn the usual one-line ``data:`` event into an event in one step. Anything
        else goes through the general line rules, so both paths give the same events and bytes
        (tested against every split). It roughly halves the decoder's cost per chunk."""
        blocks = buffer.split(b"\n\n")
        rest = blocks.pop()  # the unfinished event, still waiting for its blank line
        append, last_id, line_event = events.append, self._last_id, self._line
        new = tuple.__new__  # what ServerSentEvent(...) does, without its Python-level __new__
        # One step only when no field of this event came before it (a `retry:` line, even one
        # whose bytes were already consumed by an earlier read, belongs to this event): only the
        # general rules below change that, so it is asked again after them, not for every block.
        fresh = not self._raw and self._retry is None
        for block in blocks:
            if fresh and block[:6] == b"data: " and b"\n" not in block:
                append(
                    new(
                        _Event,
                        (
                            block[6:].decode("utf-8", "replace"),
                            "message",
                            last_id,
                            None,
                            None,
                            block + b"\n\n",
                        ),
                    )
                )
                continue
            for line in block.split(b"\n"):
                line_event(line, line + b"\n", events)
            line_event(b"", b"\n", events)
            last_id = self._last_id
            fresh = not self._raw and self._retry is None
        # The whole lines of the unfinished event take effect now, as on the line-by-line path: a
        # comment is an event when its line arrives, not when the next blank line does.
        lines = rest.split(b"\n")
        self._buffer = lines.pop()
        for line in lines:
            line_event(line, line + b"\n", events)

    def flush(self) -> list[ServerSentEvent]:
        """End of body: finish an unterminated last line and dispatch a pending event.

        The spec discards an event that is not followed by a blank line; real gateways end bodies
        with ``data: [DONE]\\n`` and no blank line, and a truncated body may end mid-line, so the
        pending event is dispatched rather than lost (the caller may note it as an anomaly).
        """
        events: list[ServerSentEvent] = []
        if self._failed is not None:
            return events
        if self._held:
            self._buffer = b"".join([self._buffer, *self._held])
            self._held, self._held_size = [], 0
        if self._buffer:
            buffer, self._buffer = self._buffer, b""
            if self._at_start and buffer.startswith(_BOM):
                self._raw += _BOM
                buffer = buffer[3:]
            # Whole lines left by the fast path, then the unterminated last one.
            start = 0
            for match in _LINE_END.finditer(buffer):
                self._line(buffer[start : match.start()], buffer[start : match.end()], events)
                start = match.end()
            if start < len(buffer):
                self._line(buffer[start:], buffer[start:], events)
        self._at_start = False
        if self._data is not None:
            self._dispatch(events)
        # Whatever is left (trailing blank lines, fields of an event that never got data) makes
        # no event: the body is reconstructible from the events' raw bytes up to those.
        self._raw.clear()
        return events

    @property
    def pending(self) -> bool:
        """True while bytes of an unfinished event are buffered."""
        return bool(self._buffer) or self._data is not None

    def _line(self, line: bytes, raw_line: bytes, events: list[ServerSentEvent]) -> None:
        self._raw += raw_line
        if not line:
            if self._data is not None:
                self._dispatch(events)
            else:
                self._event = ""
            return
        if line[0] == 0x3A:  # ":" starts a comment
            text = line[1:].decode("utf-8", "replace")
            if text.startswith(" "):
                text = text[1:]
            events.append(ServerSentEvent(comment=text, raw=bytes(self._raw)))
            self._raw.clear()
            return
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            text = value.decode("utf-8", "replace")
            if self._data is None:
                self._data = [text]
            else:
                self._data.append(text)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\x00" not in value:
                self._last_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value.isdigit():
                self._retry = int(value)
        elif name == b"error":
            # Not an SSE field, but llama.cpp's server (builds before its OpenAI-style errors)
            # wrote a mid-stream error as "error: {json}", then "data: [DONE]". Ignored, as the
            # spec says of unknown fields, the error was lost and the stream read "done"; read
            # as "event: error" with that data, it is the error event it was meant to be.
            self._event = "error"
            text = value.decode("utf-8", "replace")
            if self._data is None:
                self._data = [text]
            else:
                self._data.append(text)
        # Any other field name is ignored, as the spec says.

    def _dispatch(self, events: list[ServerSentEvent]) -> None:
        data = self._data or []
        events.append(
            ServerSentEvent(
                data=data[0] if len(data) == 1 else "\n".join(data),
                event=self._event or "message",
                id=self._last_id,
                retry=self._retry,
                raw=bytes(self._raw),
            )
        )
        self._raw.clear()
        self._data = None
        self._event = ""
        self._retry = None
