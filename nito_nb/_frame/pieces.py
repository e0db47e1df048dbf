"""The pieces of a log's chunks once their text strings and paddings are found (``cuts.py``):
which chunks share a skeleton, and their texts and paddings as columns.

With pyarrow (a dependency), every chunk's pieces (before the text, the text, up to its echo,
the echo, up to the padding, the padding, after it) are one zero-copy array over the log's bytes,
and one ``dictionary_encode`` groups them all: the chunks whose pieces around the text are the
same, and whose echo is the same piece as their text (or the same bytes), share a skeleton, and
each distinct text is decoded once. Without pyarrow (an install made with
``--no-deps``), the same with Python bytes and dicts.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from .cuts import cut_all, cut_one, guess_all
from .dtypes import _arrow

# The pieces of one chunk, in order: before its text, the text, up to its echo (the same piece
# again: cuts.cut_one), the echo, up to the padding, the padding, after it, and the bytes up to the
# next chunk (other events). A chunk without an echo has it and the piece after it empty.
_HEAD, _TEXT, _TAIL, _ECHO, _TAIL2, _PAD, _REST, _GAP = range(8)
_PIECES = 8


class _Pieces:
    """The chunks ``body[firsts[i]:lasts[i]]`` cut at ``cut[i]`` (``cuts.cut_all``).

    ``rows``: the chunks cut (their positions in ``firsts``), None when none is; ``group``: each
    one's skeleton group; ``representatives``: the first chunk of each group; ``padded``: whether
    the group's chunks have a padding; ``echoed``: whether their echo is their text again (the
    skeleton has the text in both places; otherwise the echo is part of the skeleton's bytes)."""

    def __init__(
        self, body: bytes | bytearray, firsts: np.ndarray, lasts: np.ndarray, cut: np.ndarray
    ):
        self.body = body
        rows = np.flatnonzero(cut[:, 0] >= 0)
        self.rows: np.ndarray | None = rows if len(rows) else None
        self._text_codes: np.ndarray | None = None
        self._dictionary: Any = None
        self._texts: Any = None
        self._text_of: np.ndarray | None = None
        if self.rows is None:
            return
        n = len(rows)
        # The pieces' bounds, one after another: piece k of chunk i is offsets[8i+k:8i+k+2].
        offsets = np.empty(n * _PIECES + 1, dtype=np.int64)
        bounds = offsets[:-1].reshape(n, _PIECES)  # a view: the bounds are written in place
        bounds[:, 0] = firsts[rows]
        bounds[:, 1:7] = cut[rows]
        bounds[:, 7] = lasts[rows]
        offsets[-1] = bounds[-1, 7]
        padded = bounds[:, _PAD] < bounds[:, _GAP]
        has_echo = bounds[:, _ECHO] < bounds[:, _PAD]
        self._pads = bounds[:, _PAD : _PAD + 2]  # each cut chunk's padding (paddings())
        arrow = _arrow()
        if arrow is not None:
            self._pads = self._pads.copy()  # the bounds are let go of below
            # Only the pieces that name a skeleton, and the texts, are encoded: the paddings
            # (random, nearly all distinct: OpenAI's) and the bytes between chunks are null to
            # dictionary_encode, whose table of distinct values would cost more than the log.
            valid = np.ones((n, _PIECES), dtype=bool)
            valid[:, _PAD] = valid[:, _GAP] = False
            pieces = arrow.Array.from_buffers(
                arrow.large_binary(),
                len(offsets) - 1,
                [
                    arrow.py_buffer(np.packbits(valid.ravel(), bitorder="little")),
                    arrow.py_buffer(offsets),
                    arrow.py_buffer(body),
                ],
            )
            del valid, bounds, offsets
            encoded = pieces.dictionary_encode()
            del pieces
            # The codes as they are (int32; a null piece's code is any number, never read).
            codes = np.frombuffer(
                encoded.indices.buffers()[1], dtype=np.int32, count=n * _PIECES
            ).reshape(n, _PIECES)
            self._text_codes = codes[:, _TEXT].copy()
            self._dictionary = encoded.dictionary
            echoed = has_echo & (codes[:, _ECHO] == codes[:, _TEXT])
            # The echo as the skeleton has it: its own bytes, or (-1) the text again.
            echo = np.where(echoed, -1, codes[:, _ECHO])
            # One number per (before, up to the echo, the echo, up to the padding, after, padded):
            # factorized a pair at a time, so that no product of codes overflows.
            size = len(encoded.dictionary) + 1
            keys = codes[:, _HEAD].astype(np.int64)
            for column in (codes[:, _TAIL], echo, codes[:, _TAIL2], codes[:, _REST]):
                keys, _ = pd.factorize(keys * (size + 1) + column + 1)
                keys = keys.astype(np.int64)
            keys = keys * 2 + padded
            del codes, encoded, echo
            group, _ = pd.factorize(keys)
        else:
            self.bounds = bounds
            echoed = has_echo.copy()
            found: dict[tuple[bytes, bytes, bytes | None, bytes, bytes, bool], int] = {}
            numbers = []
            for number, ((a, b, c, d, e, f, g, h), p) in enumerate(
                zip(bounds.tolist(), padded.tolist(), strict=True)
            ):
                again: bytes | None = bytes(body[d:e])
                if echoed[number] and again == body[b:c]:
                    again = None  # the text again
                else:
                    echoed[number] = False
                key = (
                    bytes(body[a:b]),
                    bytes(body[c:d]),
                    again,
                    bytes(body[e:f]),
                    bytes(body[g:h]),
                    bool(p),
                )
                numbers.append(found.setdefault(key, len(found)))
            group = np.array(numbers, dtype=np.int64)
        self.group = np.asarray(group, dtype=np.int64)
        # factorize numbers groups in order of first appearance
        _, first = np.unique(self.group, return_index=True)
        self.representatives = rows[first]
        self.padded = padded[first]
        self.echoed = echoed[first]

    def _positions(self, chunks: np.ndarray) -> np.ndarray:
        assert self.rows is not None
        return np.searchsorted(self.rows, chunks)

    def _decoded(self) -> tuple[Any, np.ndarray]:
        """Each distinct text decoded once (JSON escapes, invalid UTF-8 replaced as
        ``bytes.decode(errors="replace")`` does), and where each cut chunk's text is in it."""
        if self._texts is None:
            assert self._text_codes is not None
            arrow = _arrow()
            distinct, where = np.unique(self._text_codes, return_inverse=True)
            raw = self._dictionary.take(arrow.array(distinct))
            try:
                texts = raw.cast(arrow.large_string())
            except arrow.ArrowInvalid:  # invalid UTF-8: replaced
                texts = arrow.array(
                    [value.decode("utf-8", "replace") for value in raw.to_pylist()],
                    type=arrow.large_string(),
                )
            escaped = np.flatnonzero(
                arrow.compute.match_substring(texts, "\\").to_numpy(zero_copy_only=False)
            )
            if len(escaped):
                # one json.loads for every string with escapes (faster than one each)
                listed = raw.take(arrow.array(escaped)).to_pylist()
                decoded = json.loads('["' + b'","'.join(listed).decode("utf-8", "replace") + '"]')
                mask = np.zeros(len(texts), dtype=bool)
                mask[escaped] = True
                texts = arrow.compute.replace_with_mask(
                    texts, arrow.array(mask), arrow.array(decoded, type=arrow.large_string())
                )
            self._texts, self._text_of = texts, where
        assert self._text_of is not None
        return self._texts, self._text_of

    def text_column(self, chunks: np.ndarray) -> Any:
        """The texts of the cut chunks ``chunks``, as a pyarrow array (a list without it)."""
        if self._text_codes is None:
            return self.texts(chunks)
        texts, where = self._decoded()
        return texts.take(_arrow().array(where[self._positions(chunks)]))

    def text_codes(self, chunks: np.ndarray) -> tuple[np.ndarray, Any]:
        """The texts of the cut chunks ``chunks`` as ``(codes, values)``: chunk i's text is
        ``values[codes[i]]``. With pyarrow, ``values`` are the distinct texts, so the text column
        is spread from them once (``dtypes._column_of``), not first copied in chunk order."""
        if self._text_codes is None:
            return np.arange(len(chunks), dtype=np.int64), self.texts(chunks)
        texts, where = self._decoded()
        return where[self._positions(chunks)], texts

    def texts(self, chunks: np.ndarray) -> list[str]:
        """The texts of the cut chunks ``chunks``, as Python strings."""
        if not len(chunks):
            return []
        if self._text_codes is not None:
            return self.text_column(chunks).to_pylist()
        bounds = self.bounds[self._positions(chunks)]
        out = []
        body = self.body
        for start, end in bounds[:, _TEXT : _TEXT + 2].tolist():
            text = body[start:end]
            if b"\\" in text:
                out.append(json.loads('"' + text.decode("utf-8", "replace") + '"'))
            else:
                out.append(text.decode("utf-8", "replace"))
        return out

    def paddings(self, chunks: np.ndarray) -> Any:
        """The paddings of the cut chunks ``chunks`` (letters and digits), pyarrow strings when
        there is pyarrow, else a list."""
        pads = self._pads[self._positions(chunks)]
        arrow = _arrow()
        if arrow is not None and self._text_codes is not None:
            # Copied straight from the log's bytes: the paddings are each chunk's own, and were
            # not encoded (__init__). Entry 2k is padding k, entry 2k+1 the bytes up to the next.
            offsets = np.ascontiguousarray(pads).ravel()
            every = arrow.Array.from_buffers(
                arrow.large_binary(),
                len(offsets) - 1,
                [None, arrow.py_buffer(offsets), arrow.py_buffer(self.body)],
            )
            picked = every.take(arrow.array(np.arange(0, len(offsets) - 1, 2)))
            return picked.cast(arrow.large_string())
        body = self.body
        return [body[a:b].decode("ascii") for a, b in pads.tolist()]


def pieces_of(
    body: bytes | bytearray, firsts: np.ndarray, lasts: np.ndarray
) -> tuple[np.ndarray, _Pieces]:
    """The cuts of the chunks ``body[firsts[i]:lasts[i]]`` (``cuts.cut_all``'s) and their pieces.

    The cuts are guessed where they can be (``cuts.guess_all``: no search of the whole body),
    then one chunk of each skeleton is cut by the rule (``cuts.cut_one``): its chunks share all
    their bytes but the text and padding, so where it agrees every one of them does; where it
    does not, those chunks are cut by ``cuts.cut_all`` and grouped again."""
    cut, guessed = guess_all(body, firsts, lasts)
    pieces = _Pieces(body, firsts, lasts, cut)
    if pieces.rows is None or not guessed.any():
        return cut, pieces
    wrong = []
    for number, row in enumerate(pieces.representatives.tolist()):
        if guessed[row]:
            one = cut_one(body, int(firsts[row]), int(lasts[row]))
            if one is None or one != tuple(cut[row].tolist()):
                wrong.append(number)
    if wrong:
        rows = pieces.rows[np.isin(pieces.group, wrong)]
        cut[rows] = cut_all(body, firsts[rows], lasts[rows])
        pieces = _Pieces(body, firsts, lasts, cut)
    return cut, pieces
