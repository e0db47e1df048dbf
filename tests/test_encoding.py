"""A body's content coding, decoded by nito_nb in bounded pieces, and the compression-bomb rule
(nito_nb/_core/encoding.py; issue 28)."""

from __future__ import annotations

import gzip
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nito_nb._core.encoding import (
    BOMB_GRACE,
    BOMB_RATIO,
    PIECE,
    BadEncoding,
    BodyBounds,
    TooLarge,
    UnsupportedEncoding,
    body_decoder,
    is_bomb,
)

BODY = b"".join(b'data: {"choices":[{"delta":{"content":"%d"}}]}\n\n' % i for i in range(3000))


def decoded(coding: str, data: bytes, cuts: list[int]) -> bytes:
    decoder = body_decoder(coding)
    assert decoder is not None
    out, start = [], 0
    for end in [*sorted(cuts), len(data)]:
        for piece in decoder.decode(data[start:end]):
            assert 0 < len(piece) <= PIECE
            out.append(piece)
        start = max(start, end)
    assert decoder.wire == len(data)
    return b"".join(out)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 30_000), max_size=6))
def test_every_split_of_a_gzip_body_decodes_to_the_body(cuts: list[int]) -> None:
    assert decoded("gzip", gzip.compress(BODY), cuts) == BODY


def test_deflate_with_and_without_its_zlib_header_and_a_chain_of_codings() -> None:
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    assert decoded("deflate", zlib.compress(BODY), []) == BODY
    assert decoded("deflate", raw.compress(BODY) + raw.flush(), [5]) == BODY
    # deflate undone first
    assert decoded("gzip, deflate", zlib.compress(gzip.compress(BODY)), [100]) == BODY
    assert decoded("x-gzip", gzip.compress(BODY), []) == BODY


def test_identity_is_no_decoder_and_other_codings_are_refused() -> None:
    assert (
        body_decoder(None) is None and body_decoder("") is None and body_decoder("identity") is None
    )
    for coding in ("br", "zstd", "gzip, br", "compress"):
        with pytest.raises(UnsupportedEncoding):
            body_decoder(coding)


def test_bytes_that_are_not_gzip_are_bad_encoding() -> None:
    decoder = body_decoder("gzip")
    assert decoder is not None
    with pytest.raises(BadEncoding):
        list(decoder.decode(b"data: not compressed\n\n"))


def test_a_bomb_by_its_ratio_past_the_grace() -> None:
    assert not is_bomb(wire=1, decoded=BOMB_GRACE)  # a short body is never judged
    # 100:1, a real answer's at most
    assert not is_bomb(wire=BOMB_GRACE // 100, decoded=BOMB_GRACE + 1)
    assert is_bomb(wire=1000, decoded=max(BOMB_GRACE, BOMB_RATIO * 1000) + 1)


def test_bounds_stop_at_the_limit_and_at_a_bomb_before_taking_the_piece() -> None:
    plain = BodyBounds(limit=100_000)
    assert sum(map(len, plain.pieces(BODY[:90_000]))) == 90_000
    with pytest.raises(TooLarge) as limit:
        list(plain.pieces(BODY[:20_000]))
    assert not limit.value.bomb and plain.size <= 100_000 and limit.value.size > 100_000
    bomb = BodyBounds(limit=None)
    bomb.set_encoding("gzip")
    zeros = gzip.compress(b"\n" * (4 * BOMB_GRACE))
    with pytest.raises(TooLarge) as ratio:
        list(bomb.pieces(zeros))
    assert ratio.value.bomb and ratio.value.coding == "gzip" and ratio.value.wire == len(zeros)
    assert bomb.size <= ratio.value.size <= bomb.size + PIECE and bomb.size < 2 * BOMB_GRACE
