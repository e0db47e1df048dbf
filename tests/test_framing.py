"""HTTP/1.1 framing read by hand for the stamping transport's pushed bodies (nito_nb/_transport/framing.py),
checked against h11 (what httpx would have read from the same bytes) for every split of the bytes."""

from __future__ import annotations

import h11
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nito_nb._transport.framing import (
    Chunked,
    FramingError,
    HeaderEnd,
    Length,
    UntilClose,
    body_framing,
)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def h11_body(head: bytes, body: bytes, *, eof: bool = True) -> tuple[bytes, str | None]:
    """What h11 reads as the body of the response ``head + body``: (bytes, error or None)."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="GET", target="/", headers=[("host", "x")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(head + body)
    if eof:
        conn.receive_data(b"")
    out = bytearray()
    try:
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Data):
                out += event.data
            elif event in (h11.NEED_DATA, h11.PAUSED) or isinstance(
                event, (h11.EndOfMessage, h11.ConnectionClosed)
            ):
                return bytes(out), None
    except h11.ProtocolError as exc:
        return bytes(out), str(exc)


def ours(
    framing: Chunked | Length | UntilClose, parts: list[bytes], *, eof: bool = True
) -> tuple[bytes, str | None]:
    out = bytearray()
    try:
        for part in parts:
            out += framing.feed(part)
        if eof and not framing.done:
            framing.end()
    except FramingError as exc:
        return bytes(out), str(exc)
    return bytes(out), None


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"


@st.composite
def chunked_bodies(draw: st.DrawFn) -> bytes:
    out = bytearray()
    for data in draw(st.lists(st.binary(min_size=1, max_size=40), max_size=8)):
        size = format(len(data), draw(st.sampled_from(["x", "X", "04x"])))
        ext = draw(st.sampled_from([b"", b";name=value", b";x", b" "]))
        out += size.encode() + ext + b"\r\n" + data + b"\r\n"
    out += b"0" + draw(st.sampled_from([b"", b";end"])) + b"\r\n"
    out += draw(st.sampled_from([b"\r\n", b"x-trailer: 1\r\n\r\n", b"a: 1\r\nb: 2\r\n\r\n"]))
    return bytes(out)


@given(body=chunked_bodies(), cuts=st.lists(st.integers(0, 1000), max_size=10))
@settings(max_examples=300, deadline=None)
@example(body=b"5\r\nhello\r\n0\r\n\r\n", cuts=list(range(20)))  # a byte at a time
def test_chunked_any_split_reads_what_h11_reads(body: bytes, cuts: list[int]) -> None:
    expected = h11_body(CHUNKED_HEAD, body)
    assert expected[1] is None
    framing = Chunked()
    assert ours(framing, _split(body, cuts)) == expected
    assert framing.done  # the terminal chunk and trailers ended it, not the connection


@given(
    body=chunked_bodies(), cut=st.integers(0, 1000), cuts=st.lists(st.integers(0, 1000), max_size=6)
)
@settings(max_examples=300, deadline=None)
def test_chunked_cut_short_fails_as_h11_does(body: bytes, cut: int, cuts: list[int]) -> None:
    short = body[: cut % len(body)]
    got, error = ours(Chunked(), _split(short, cuts))
    expected, expected_error = h11_body(CHUNKED_HEAD, short)
    assert got == expected
    assert error is not None and error == expected_error


@given(garbage=st.binary(max_size=60), cuts=st.lists(st.integers(0, 100), max_size=5))
@settings(max_examples=300, deadline=None)
def test_chunked_garbage_is_a_framing_error_or_what_h11_reads(
    garbage: bytes, cuts: list[int]
) -> None:
    got, error = ours(Chunked(), _split(garbage, cuts))
    expected, expected_error = h11_body(CHUNKED_HEAD, garbage)
    assert got == expected[: len(got)]  # the same bytes up to where one of them stopped
    assert (error is None) == (expected_error is None)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"zz\r\nhello\r\n", "illegal chunk header"),
        (b"5\r\nhelloXX0\r\n\r\n", "malformed chunk footer"),
    ],
)
def test_chunked_errors_say_what_h11_says(body: bytes, message: str) -> None:
    _, error = ours(Chunked(), [body])
    assert error is not None and error.startswith(message)
    assert h11_body(CHUNKED_HEAD, body)[1].startswith(message)  # type: ignore[union-attr]


def test_bytes_after_the_last_chunk_are_not_body() -> None:
    framing = Chunked()
    assert framing.feed(b"3\r\nabc\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n") == b"abc"
    assert framing.done and framing.feed(b"more") == b""


@given(
    length=st.integers(0, 50),
    extra=st.binary(max_size=10),
    cuts=st.lists(st.integers(0, 100), max_size=6),
    short=st.integers(0, 60),
)
@settings(max_examples=200, deadline=None)
def test_content_length_reads_what_h11_reads(
    length: int, extra: bytes, cuts: list[int], short: int
) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % length
    body = bytes(range(65, 65 + length)) + extra
    assert ours(Length(length), _split(body, cuts)) == h11_body(head, body)
    cut = body[: min(short, length)]  # the connection closed early (or just in time)
    assert ours(Length(length), _split(cut, cuts)) == h11_body(head, cut)


def test_until_close_is_everything() -> None:
    framing = UntilClose()
    assert ours(framing, [b"a", b"", b"bc"]) == (b"abc", None) and framing.done


@pytest.mark.parametrize(
    ("transfer_encoding", "content_length", "kind"),
    [
        ("chunked", None, Chunked),
        (" Chunked ", "12", Chunked),
        (None, "12", Length),
        (None, "12, 12", Length),
        (None, None, UntilClose),
        ("gzip, chunked", None, type(None)),
        (None, "12, 13", type(None)),
        (None, "-1", type(None)),
    ],
)
def test_the_framing_from_the_headers(
    transfer_encoding: str | None, content_length: str | None, kind: type
) -> None:
    assert type(body_framing(transfer_encoding, content_length)) is kind


# -- the end of the headers -----------------------------------------------------------------------

_HEADS = [
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n",
    b"HTTP/1.1 200 OK\ncontent-type: text/event-stream\n\n",  # bare LF, as h11 accepts
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nx: y\r\n\r\n",
    b"HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\n\r\n",
    b"HTTP/1.0 200 OK\r\n\r\n",
]


@given(
    head=st.sampled_from(_HEADS),
    body=st.sampled_from([b"", b"data: x\n\n", b"\r\n\r\n5\r\nhello\r\n"]),
    cuts=st.lists(st.integers(0, 200), max_size=8),
)
@settings(max_examples=300, deadline=None)
def test_the_headers_end_where_h11_ends_them(head: bytes, body: bytes, cuts: list[int]) -> None:
    finder, seen, found = HeaderEnd(), 0, None
    for part in _split(head + body, cuts):
        end = finder.split(part)
        if end is not None:
            assert found is None  # found once
            found = seen + end
        seen += len(part)
    assert found == len(head) and finder.done
    conn = h11.Connection(h11.CLIENT)  # h11 needs exactly these bytes for the final response
    conn.send(h11.Request(method="GET", target="/", headers=[("host", "x")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(head)
    while not isinstance(event := conn.next_event(), h11.Response):
        assert isinstance(event, h11.InformationalResponse)
    assert conn.trailing_data == (b"", False)


def test_an_endless_header_block_stops_the_search() -> None:
    finder = HeaderEnd()
    assert finder.split(b"HTTP/1.1 200 OK\r\n" + b"x: y\r\n" * 20_000) is None
    assert finder.done and finder.split(b"\r\n\r\n") is None  # h11 refuses such a block itself
