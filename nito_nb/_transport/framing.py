"""Where an HTTP/1.1 response's header block and body end (RFC 9112), read incrementally and I/O-free.

Written by hand for one measured need: in a load run, httpx/httpcore/h11's work on each read of
a body (six nested async iterators, h11's state machine, one task switch per read) made the
client, not the gateway, the bottleneck at 10,000 chunks a second (``bench/bench_load.py`` under
py-spy; docs/BENCHMARKS.md). The stamping transport (this package) therefore lets
httpx send the request and read the headers, then reads the body itself; these classes are the
only HTTP it needs for that: where the headers end (so that no body byte goes through h11), and
the body's framing (chunked, Content-Length, or until the connection closes). They follow h11's
rules (the header block ends at the first ``\\n\\r?\\n``; a chunk header is hex digits with optional
extensions and ends in CRLF; chunk data ends in CRLF; trailers end at a blank line) and its
messages for a body cut short, so a stream fails the same way whichever reads it.
"""

from __future__ import annotations

import re

__all__ = ["Chunked", "FramingError", "HeaderEnd", "Length", "UntilClose", "body_framing"]

_BLANK_LINE = re.compile(rb"\n\r?\n")
_STATUS = re.compile(rb"HTTP/\d(?:\.\d)? (\d{3})")
_CHUNK_HEADER = re.compile(rb"([0-9A-Fa-f]{1,20})(?:;.*)?[ \t]*")
#: A header block or a chunk header longer than this is not searched any further (h11 refuses
#: header blocks over 16 KiB; a chunk header is a few bytes).
MAX_LINE = 64 * 1024


class FramingError(ValueError):
    """The body does not follow its framing (httpx's ``RemoteProtocolError`` for the caller)."""


class HeaderEnd:
    """Finds the end of a response's final header block in the bytes as they are read, past any
    informational (1xx) blocks before it."""

    def __init__(self) -> None:
        self._block = bytearray()  # the current header block so far
        self.done = False

    def split(self, data: bytes) -> int | None:
        """The position in ``data`` just after the final header block, or None if it does not end
        in ``data``. Once it has ended (or the block grew past ``MAX_LINE``) ``done`` is True and
        nothing is searched any more."""
        if self.done:
            return None
        start = len(self._block)
        self._block += data
        search = max(0, start - 2)
        while True:
            match = _BLANK_LINE.search(self._block, search)
            if match is None:
                if len(self._block) > MAX_LINE:  # h11 refuses it anyway; stop looking
                    self.done = True
                return None
            end = match.end()
            status = _STATUS.match(self._block)
            # informational: another block follows
            if status is not None and status.group(1).startswith(b"1"):
                del self._block[:end]
                start -= end
                search = 0
                continue
            self.done = True
            self._block = bytearray()
            return end - start


class Length:
    """A body of ``Content-Length`` bytes."""

    def __init__(self, length: int) -> None:
        self._length = self._remaining = length
        self.done = length == 0

    def feed(self, data: bytes) -> bytes:
        if self.done:
            return b""
        body = data[: self._remaining]
        self._remaining -= len(body)
        self.done = self._remaining == 0
        return body

    def end(self) -> None:
        if not self.done:
            raise FramingError(
                "peer closed connection without sending complete message body "
                f"(received {self._length - self._remaining} bytes, expected {self._length})"
            )


class UntilClose:
    """A body that ends when the connection closes (no length, not chunked)."""

    done = False

    def feed(self, data: bytes) -> bytes:
        return data

    def end(self) -> None:
        self.done = True


# The states of a chunked body.
_SIZE, _DATA, _DATA_END, _TRAILER = range(4)


class Chunked:
    """A body in the chunked transfer coding: ``feed`` returns the chunks' data, framing removed.
    Every split of the bytes gives the same body (tests/test_framing.py)."""

    def __init__(self) -> None:
        self._state = _SIZE
        self._left = 0  # data bytes left in the current chunk, or CRLF bytes left after it
        self._line = b""  # a chunk header or the trailers, incomplete so far
        self.done = False

    def feed(self, data: bytes) -> bytes:
        parts: list[bytes] = []
        at, n = 0, len(data)
        while at < n and not self.done:
            state = self._state
            if state == _DATA:
                take = min(self._left, n - at)
                parts.append(data[at : at + take])
                at += take
                self._left -= take
                if not self._left:
                    self._state, self._left = _DATA_END, 2
            elif state == _SIZE:
                if self._line:
                    data, at, n = self._line + data[at:], 0, len(self._line) + n - at
                    self._line = b""
                eol = data.find(b"\r\n", at)
                if eol < 0:
                    self._hold(data[at:])
                    break
                header = _CHUNK_HEADER.fullmatch(data, at, eol)
                if header is None:
                    raise FramingError(f"illegal chunk header: {data[at : eol + 2]!r}")
                size = int(header.group(1), 16)
                at = eol + 2
                if size:
                    self._state, self._left = _DATA, size
                else:
                    self._state = _TRAILER
            elif state == _DATA_END:
                expected = b"\r\n"[2 - self._left :]
                got = data[at : at + self._left]
                if got != expected[: len(got)]:
                    raise FramingError(f"malformed chunk footer: {got!r} (expected {expected!r})")
                at += len(got)
                self._left -= len(got)
                if not self._left:
                    self._state = _SIZE
            else:  # _TRAILER: none, or header lines up to a blank line; their content is not kept
                rest = self._line + data[at:]
                self._line = b""
                if rest[:1] == b"\n" or rest[:2] == b"\r\n" or _BLANK_LINE.search(rest):
                    self.done = True
                elif len(rest) < 2 and rest in (b"", b"\r"):
                    self._line = rest
                else:
                    self._hold(rest)
                break
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _hold(self, rest: bytes) -> None:
        if len(rest) > MAX_LINE:
            raise FramingError("a chunk header or the trailers of the body are too long")
        self._line = rest

    def end(self) -> None:
        if self.done:
            return
        if self._line:  # in the middle of a chunk header or the trailers (h11's two messages)
            raise FramingError("peer unexpectedly closed connection")
        raise FramingError(
            "peer closed connection without sending complete message body (incomplete chunked read)"
        )


def body_framing(
    transfer_encoding: str | None, content_length: str | None
) -> Chunked | Length | UntilClose | None:
    """The framing of a response body from its headers (values joined by commas where repeated),
    or None for one this module does not read (a transfer coding other than chunked alone: httpx
    reads those)."""
    if transfer_encoding is not None:
        codings = [c.strip().lower() for c in transfer_encoding.split(",") if c.strip()]
        return Chunked() if codings == ["chunked"] else None
    if content_length is not None:
        values = {v.strip() for v in content_length.split(",")}
        if len(values) != 1:
            return None
        (value,) = values
        return Length(int(value)) if value.isdigit() else None
    return UntilClose()
