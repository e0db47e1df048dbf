"""A body's content coding (``Content-Encoding: gzip``), decoded in bounded pieces, and the one
rule that tells a compression bomb from a compressed answer. Standard library only (zlib), no I/O.

Why nito_nb decodes, not httpx: httpx decodes each read whole, so one 64 KiB read of a gzip bomb
became 64 MB at once (and a body gzipped twice, which httpx also decodes, a thousand times more);
a few hundred KB on the wire took a gigabyte (issue 28). Here every layer hands on at most
``PIECE`` bytes at a time (zlib's ``max_length``), and the Stream (``_core/state.py``) counts what
the pieces add up to as it takes them: it stops at ``max_body_size``, or as soon as the body is a
bomb by :func:`is_bomb`.

Only the codings a client asks for are decoded (``ACCEPT_ENCODING``): gzip and deflate, in any
chain of them; anything else (br, zstd) is :class:`UnsupportedEncoding`, said in one line rather
than fed as bytes that no event could be read from.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

__all__ = [
    "ACCEPT_ENCODING",
    "BOMB_GRACE",
    "BOMB_RATIO",
    "PIECE",
    "BadEncoding",
    "BodyBounds",
    "BodyDecoder",
    "TooLarge",
    "UnsupportedEncoding",
    "body_decoder",
    "is_bomb",
]

#: What nito_nb's clients ask for (the codings this module decodes; httpx would add zstd when
#: ``zstandard`` is installed, whose decoder has no bound).
ACCEPT_ENCODING = "gzip, deflate"
#: The most decoded bytes handed on at once.
PIECE = 64 * 1024
#: A compressed body that decodes to more than this many times its bytes on the wire is a bomb.
#: gzip's best is about 1,030:1 (a run of one byte); the bodies of real answers compress far less:
#: 3-47:1 for tests/data/real's 108 recordings compressed whole, 3-20:1 compressed event by event
#: as a streaming gateway must (each flush costs bytes). The bombs of issue 28 were 300:1 (chunks
#: of one character), 500:1 (keep-alive comments) and 1,000:1 (newlines).
BOMB_RATIO = 200
#: The ratio is judged only past this many decoded bytes: a short body's ratio says little, and
#: costs little whatever it is. At the bound, a bomb of one-character chunks holds about 100 MB
#: (the parsed chunks waiting for whoever iterates are ten times their bytes).
BOMB_GRACE = 8 * 1024 * 1024

_CODINGS = ("gzip", "x-gzip", "deflate")


class UnsupportedEncoding(ValueError):
    """A content coding this module does not decode (``coding`` names it)."""

    def __init__(self, coding: str) -> None:
        super().__init__(f"content coding {coding!r} is not decoded")
        self.coding = coding


class BadEncoding(ValueError):
    """The body's bytes are not what their content coding says (damaged, or not compressed)."""


def is_bomb(wire: int, decoded: int) -> bool:
    """Whether a compressed body of ``wire`` bytes that decoded to ``decoded`` is a bomb."""
    return decoded > BOMB_GRACE and decoded > BOMB_RATIO * wire


class _Layer:
    """One coding of the chain: a zlib decompressor read ``PIECE`` bytes at a time."""

    __slots__ = ("_deflate", "_first", "_z")

    def __init__(self, coding: str) -> None:
        self._deflate = coding == "deflate"
        self._first = True
        # gzip's header, or zlib's for deflate; a raw deflate stream (no header, as some servers
        # send "deflate") is tried when the first bytes are not zlib's, as httpx does.
        self._z = zlib.decompressobj(zlib.MAX_WBITS if self._deflate else 16 + zlib.MAX_WBITS)

    def pieces(self, data: bytes) -> Iterator[bytes]:
        try:
            if self._first and data:
                self._first = False
                if self._deflate:
                    try:
                        piece = self._z.decompress(data, PIECE)
                    except zlib.error:
                        self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                        piece = self._z.decompress(data, PIECE)
                else:
                    piece = self._z.decompress(data, PIECE)
            else:
                piece = self._z.decompress(data, PIECE)
            while True:
                if piece:
                    yield piece
                tail = self._z.unconsumed_tail
                if not tail:
                    return
                piece = self._z.decompress(tail, PIECE)
        except zlib.error as exc:
            raise BadEncoding(str(exc)) from None


class BodyDecoder:
    """Decodes a body read by read: :meth:`decode` yields the decoded bytes of one read in pieces
    of at most ``PIECE``; ``wire`` counts the bytes taken in, ``coding`` is the header's value."""

    __slots__ = ("_layers", "coding", "wire")

    def __init__(self, codings: list[str], coding: str) -> None:
        # Codings are listed in the order they were applied: the last is undone first.
        self._layers = [_Layer(c) for c in reversed(codings)]
        self.coding = coding
        self.wire = 0

    def decode(self, data: bytes) -> Iterator[bytes]:
        self.wire += len(data)
        return self._through(0, data)

    def _through(self, depth: int, data: bytes) -> Iterator[bytes]:
        if depth == len(self._layers):
            yield data
            return
        for piece in self._layers[depth].pieces(data):
            yield from self._through(depth + 1, piece)


def body_decoder(content_encoding: str | None) -> BodyDecoder | None:
    """The decoder of a body sent with this ``Content-Encoding`` value; None for none (identity).
    Raises :class:`UnsupportedEncoding` for a coding other than gzip and deflate."""
    if not content_encoding:
        return None
    codings = [c.strip().lower() for c in content_encoding.split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return None
    for coding in codings:
        if coding not in _CODINGS:
            raise UnsupportedEncoding(coding)
    return BodyDecoder(codings, ", ".join(codings))


class TooLarge(ValueError):
    """A body went past its bounds (:class:`BodyBounds`): ``size`` bytes decoded (the last piece,
    which passed them, included: it was not taken), ``limit`` the limit, ``wire`` and ``coding``
    when it came compressed, ``bomb`` when it was the ratio (:func:`is_bomb`), not the limit."""

    def __init__(
        self, size: int, limit: int | None, decoder: BodyDecoder | None, bomb: bool
    ) -> None:
        super().__init__(
            f"the body went past {'the bomb ratio' if bomb else f'{limit:,} bytes'} ({size:,} decoded)"
        )
        self.size = size
        self.limit = limit
        self.wire = None if decoder is None else decoder.wire
        self.coding = None if decoder is None else decoder.coding
        self.bomb = bomb


class BodyBounds:
    """What a body decodes to, counted against its limit (``max_body_size``, None: none) and,
    compressed, against the bomb ratio. :meth:`pieces` yields what one read decodes to, in pieces
    of at most ``PIECE`` bytes (a large read of a plain body is cut too), each counted as it is
    taken; :class:`TooLarge` instead of the first one that would pass a bound."""

    __slots__ = ("decoder", "limit", "size")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.size = 0
        #: The body's content coding, None for none (``set_encoding``).
        self.decoder: BodyDecoder | None = None

    def set_encoding(self, content_encoding: str | None) -> None:
        """The body comes with this ``Content-Encoding`` (:class:`UnsupportedEncoding` if it is not
        one this module decodes)."""
        self.decoder = body_decoder(content_encoding)

    def count(self, n: int) -> None:
        """Take ``n`` more decoded bytes, or raise :class:`TooLarge`."""
        size = self.size + n
        if self.limit is not None and size > self.limit:
            raise TooLarge(size, self.limit, self.decoder, bomb=False)
        self.size = size

    def pieces(self, data: bytes) -> Iterator[bytes]:
        decoder = self.decoder
        if decoder is None:
            for start in range(0, len(data), PIECE):
                piece = data[start : start + PIECE]
                self.count(len(piece))
                yield piece
            return
        for piece in decoder.decode(data):
            if is_bomb(decoder.wire, self.size + len(piece)):
                raise TooLarge(self.size + len(piece), self.limit, decoder, bomb=True)
            self.count(len(piece))
            yield piece
