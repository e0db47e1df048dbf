"""A request's head written, and a response's head read, by hand for the usual case; h11 for every
other. I/O-free.

Why by hand: with httpx's layers gone (``direct.py``), h11 was what was left of a run's cost per
request outside the body: its state machine, events and header checks took 12% of the loop's
time for the fixed part of a request (py-spy, 10,000 ``sim/chat`` requests with a two-token answer,
docs/BENCHMARKS.md), to write eight known headers and read a status line and five headers. So:

- :func:`request_head` writes the bytes h11 would write (Host first, then the headers in order)
  when every header value passes h11's check; otherwise it returns None and h11 writes them, and
  refuses what it refuses (a key with a line break in it).
- :func:`response_head` reads a final head in the strict form servers send (``HTTP/1.1``, CRLF
  lines, each header a token, a colon and a value as RFC 9110 has it; a ``Transfer-Encoding`` of
  ``chunked`` alone, in lower case, or one ``Content-Length`` of digits); anything else (an informational answer,
  another version, a bare LF, a folded line, a header h11 would refuse or rewrite) returns None,
  and h11 reads the same bytes, with its errors. ``tests/test_head.py`` checks both against h11
  on generated heads: each gives h11's answer or defers to it.
"""

from __future__ import annotations

import functools
import re

__all__ = ["Head", "request_head", "response_head"]

# RFC 9110's grammar, as h11 writes it (h11/_abnf.py)
_TOKEN = rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+"
_VALUE = rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?"
_FIELD_VALUE = re.compile(_VALUE)
_FIELD_NAME = re.compile(_TOKEN)
_TARGET = re.compile(rb"[^\x00\s]+")
_STATUS_LINE = re.compile(rb"HTTP/1\.1 ([0-9]{3})(?: ((?:[ \t]|[^\x00\s])*))?")
_HEADER = re.compile(rb"(" + _TOKEN + rb"):[ \t]*(" + _VALUE + rb")[ \t]*")

#: (status code, reason phrase, headers as (name, value) pairs in the order and case sent).
Head = tuple[int, bytes, list[tuple[bytes, bytes]]]


def request_head(target: bytes, host: bytes, headers: list[tuple[str, str]]) -> bytes | None:
    """The head of ``POST target`` with ``Host: host`` and ``headers`` (``Content-Length`` among
    them), as h11 writes it; None when a value is not one h11 takes as it is (h11 then says
    why)."""
    if _TARGET.fullmatch(target) is None or _FIELD_VALUE.fullmatch(host) is None:
        return None
    lines = [b"POST ", target, b" HTTP/1.1\r\nHost: ", host, b"\r\n"]
    for name, value in headers:
        line = _kept_line(name, value) if name in _ALIKE else _header_line(name, value)
        if line is None:
            return None
        lines.append(line)
    lines.append(b"\r\n")
    return b"".join(lines)


#: Headers that a run's requests send alike (``_client/base.py``, ``direct.py``): their lines are
#: checked and written once. Never a credential's (``Authorization``): no key is kept here.
_ALIKE = frozenset(
    {"User-Agent", "Accept", "Accept-Encoding", "Content-Type", "Content-Length", "Connection"}
)


def _header_line(name: str, value: str) -> bytes | None:
    """``name: value`` and its line end, as h11 writes it; None when h11 would not take it as it
    is."""
    if not (name.isascii() and value.isascii()):
        return None
    raw_name, raw_value = name.encode(), value.encode()
    if _FIELD_NAME.fullmatch(raw_name) is None or _FIELD_VALUE.fullmatch(raw_value) is None:
        return None
    return b"%s: %s\r\n" % (raw_name, raw_value)


#: :func:`_header_line` kept for the headers every request sends alike: checking them took two
#: regular expressions each, sixteen a request of a run.
_kept_line = functools.lru_cache(maxsize=256)(_header_line)


def response_head(data: bytes | bytearray) -> Head | None:
    """The final response head that ``data`` is, whole (it ends with its blank line); None for
    anything but the strict usual form: h11 reads those."""
    if not data.endswith(b"\r\n\r\n"):
        return None
    lines = bytes(data[:-4]).split(b"\r\n")
    status = _STATUS_LINE.fullmatch(lines[0])
    if status is None:
        return None
    code = int(status.group(1))
    if code < 200:  # informational: h11 reads what follows
        return None
    headers = []
    framing = 0  # Content-Length and Transfer-Encoding lines (h11 merges or refuses repeats)
    for line in lines[1:]:
        header = _HEADER.fullmatch(line)
        if header is None:
            return None
        name, value = header.group(1), header.group(2)
        lower = name.lower()
        if lower == b"content-length":
            framing += 1
            if not value.isdigit():
                return None
        elif lower == b"transfer-encoding":
            framing += 1
            if value != b"chunked":  # h11 would write another case of it in lower case
                return None
        headers.append((name, value))
    if framing > 1:
        return None
    return code, status.group(2) or b"", headers
