"""The request and response heads written and read by hand (nito_nb/_transport/head.py) against
h11 on generated heads: the hand path gives h11's answer or defers to h11, never another one."""

from __future__ import annotations

import h11
from hypothesis import given, settings
from hypothesis import strategies as st

from nito_nb._transport.head import request_head, response_head

# what real servers send: uvicorn (the simulator), and a gateway's usual head
USUAL = [
    b"HTTP/1.1 200 OK\r\ndate: Sat, 05 Dec 2026 08:00:00 GMT\r\nserver: uvicorn\r\n"
    b"content-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nDate: Sat, 05 Dec 2026 08:00:00 GMT\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\nopenai-processing-ms: 112\r\n"
    b"x-request-id: req_0123\r\nCF-RAY: 8f-SJC\r\n\r\n",
    b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\ncontent-length: 61\r\n"
    b"retry-after: 2\r\n\r\n",
    b"HTTP/1.1 200 \r\ncontent-type: text/event-stream\r\n\r\n",
]


def h11_response(data: bytes) -> tuple[int, bytes, list[tuple[bytes, bytes]]] | Exception:
    connection = h11.Connection(h11.CLIENT)
    connection.send(
        h11.Request(method="POST", target="/", headers=[("Host", "a"), ("Content-Length", "0")])
    )
    connection.send(h11.EndOfMessage())
    connection.receive_data(data)
    try:
        while True:
            event = connection.next_event()
            if isinstance(event, h11.Response):
                return event.status_code, event.reason, list(event.headers.raw_items())
            if event is h11.NEED_DATA:
                return RuntimeError("h11 needs more")
    except h11.ProtocolError as exc:
        return exc


def test_the_usual_heads_are_read_by_hand_as_h11_reads_them() -> None:
    for head in USUAL:
        assert response_head(head) is not None, head
        assert response_head(head) == h11_response(head)


STATUS_LINES = st.sampled_from(
    [
        b"HTTP/1.1 200 OK",
        b"HTTP/1.1 200",
        b"HTTP/1.1 200 ",
        b"HTTP/1.1 404 Not\tFound",
        b"HTTP/1.1 503 Service Unavailable \xe2\x9c\x93",
        b"HTTP/1.0 200 OK",
        b"HTTP/2 200",
        b"HTTP/1.1 100 Continue",
        b"HTTP/1.1 20 OK",
        b"HTTP/1.1  200 OK",
        b"HTTP/1.1 200 O\x00K",
        b"http/1.1 200 OK",
        b"",
        b"NOT HTTP",
    ]
)
NAMES = st.sampled_from(
    [
        b"content-type",
        b"X-Custom",
        b"content-length",
        b"Content-Length",
        b"transfer-encoding",
        b"Transfer-Encoding",
        b"x_y",
        b"bad name",
        b"",
        b"a:b",
        b"\xe2\x9c\x93",
        b"set-cookie",
    ]
)
VALUES = st.sampled_from(
    [
        b"text/event-stream",
        b"chunked",
        b"Chunked",
        b"gzip, chunked",
        b"12",
        b"012",
        b"1, 1",
        b"-1",
        b"",
        b" padded ",
        b"a\tb",
        b"a  b",
        b"\xff\xfe",
        b"x\x00y",
        b"x\ry",
        b"v\x7f",
        b" ",
        b"\t",
    ]
)
HEADER = st.tuples(NAMES, st.sampled_from([b":", b": ", b":\t", b" : ", b":  "]), VALUES).map(
    lambda p: p[0] + p[1] + p[2]
)
LINES = st.lists(
    st.one_of(HEADER, st.sampled_from([b" folded", b"\tfolded", b"no colon"])), max_size=6
)
ENDINGS = st.sampled_from([b"\r\n", b"\n"])


@settings(max_examples=400, deadline=None)
@given(STATUS_LINES, LINES, ENDINGS, ENDINGS)
def test_a_head_read_by_hand_is_read_as_h11_reads_it(
    status: bytes, lines: list[bytes], ending: bytes, last: bytes
) -> None:
    data = ending.join([status, *lines]) + ending + last
    mine = response_head(data)
    if mine is not None:  # deferring is always allowed; any other answer must be h11's
        assert mine == h11_response(data)


GOOD_HEADER = st.tuples(
    st.sampled_from(
        [
            b"content-type",
            b"X-Custom",
            b"content-length",
            b"Content-Length",
            b"transfer-encoding",
            b"Transfer-Encoding",
            b"set-cookie",
        ]
    ),
    st.sampled_from([b":", b": ", b":\t", b":  "]),
    st.sampled_from(
        [
            b"text/event-stream",
            b"chunked",
            b"Chunked",
            b"12",
            b"012",
            b"1, 1",
            b"",
            b"a\tb",
            b"v \xff",
            b"gzip, chunked",
        ]
    ),
    st.sampled_from([b"", b" ", b"\t"]),
).map(lambda p: p[0] + p[1] + p[2] + p[3])


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(
        [b"HTTP/1.1 200 OK", b"HTTP/1.1 204 No Content", b"HTTP/1.1 500", b"HTTP/1.1 200 "]
    ),
    st.lists(GOOD_HEADER, max_size=5),
)
def test_a_well_formed_head_read_by_hand_is_read_as_h11_reads_it(
    status: bytes, lines: list[bytes]
) -> None:
    data = b"\r\n".join([status, *lines]) + b"\r\n\r\n"
    mine = response_head(data)
    if mine is not None:
        assert mine == h11_response(data)


def h11_request(target: bytes, host: bytes, headers: list[tuple[str, str]]) -> bytes | Exception:
    connection = h11.Connection(h11.CLIENT)
    try:
        return (
            connection.send(
                h11.Request(method=b"POST", target=target, headers=[("Host", host), *headers])
            )
            or b""
        )
    except (h11.ProtocolError, UnicodeError) as exc:
        return exc


def test_the_request_a_run_sends_is_written_by_hand() -> None:
    headers = [
        ("User-Agent", "python-httpx/0.29.0"),
        ("Accept", "text/event-stream"),
        ("Accept-Encoding", "gzip, deflate"),
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer sk-or-v1-0123456789abcdef"),
        ("Content-Length", "204"),
        ("Connection", "close"),
    ]
    mine = request_head(b"/v1/chat/completions?x=1", b"127.0.0.1:8000", headers)
    assert mine is not None and mine == h11_request(
        b"/v1/chat/completions?x=1", b"127.0.0.1:8000", headers
    )


KEYS = st.text(alphabet=st.sampled_from(list("sk-AZaz09_. \t\r\n\x00\x7fé✓")), max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    KEYS,
    st.sampled_from([b"/v1/chat/completions", b"/a b", b"/\x00", b"/%20"]),
    st.sampled_from([b"h:1", b"h 1", b""]),
)
def test_a_request_written_by_hand_is_what_h11_writes(key: str, target: bytes, host: bytes) -> None:
    headers = [("Authorization", f"Bearer {key}"), ("Content-Length", "2")]
    mine = request_head(target, host, headers)
    if mine is not None:  # else h11 writes it, or refuses it
        assert mine == h11_request(target, host, headers)
