"""Where each chunk's text string and padding are, found for all chunks of a log at once.

A chunk's "skeleton" is its bytes without its text string (``delta.content``, else DeepSeek's or
OpenRouter's reasoning string, else a tool fragment's arguments) and without OpenAI's padding
(``obfuscation``, random letters of random length): ``plan.py`` reads each skeleton once. The
rule for one chunk is :func:`cut_one`; :func:`cut_all` finds the same places for every chunk with
numpy (a Python loop over 100,000 chunks cost most of a frame: docs/BENCHMARKS.md) and asks
:func:`cut_one` only for the chunks whose strings run past its windows.
"""

from __future__ import annotations

import numpy as np

from .chunks import _PADDING, _SLOTS

_CONTENT = b'"content":"'
_QUOTE, _BACKSLASH = 0x22, 0x5C
# Bytes looked at past a string's start, at once for every chunk; longer strings get a second,
# wider look, then cut_one. Token-sized strings fit the first.
_WINDOWS = (32, 1024)
# Chunks handled at once: bounds the windows' memory (rows x window bytes).
_BLOCK = 32768


def cut_one(body: bytes | bytearray, first: int, last: int) -> tuple[int, int, int, int] | None:
    """``(start, end, pad_start, pad_end)`` of the chunk ``body[first:last]``: its text string is
    ``body[start:end]``, its padding ``body[pad_start:pad_end]`` (both ``last`` when it has
    none); None when nothing can be cut (the chunk is parsed whole).

    The text string is the first ``"content":"``'s; a chunk without one has its first of
    ``_SLOTS`` found (an empty or cut-off one: nothing). The padding is the first
    ``"obfuscation":"`` after the text, when it is as sent (letters and digits)."""
    find = body.find
    found = find(_CONTENT, first, last)
    start = found + len(_CONTENT)
    if found < 0:  # reasoning and tool-call chunks: their one text string instead
        for slot in _SLOTS:
            found = find(slot, first, last)
            if found >= 0:
                start = found + len(slot)
                if start >= last or body[start] == _QUOTE:  # cut off, or an empty string
                    return None
                break
    if found < 0:
        return None
    end = find(b'"', start, last)
    # A quote after a backslash ends nothing, unless the backslash is itself escaped.
    while end >= 0 and body[end - 1] == _BACKSLASH:
        before = end - 2
        while body[before] == _BACKSLASH:
            before -= 1
        if (end - 1 - before) % 2 == 0:
            break
        end = find(b'"', end + 1, last)
    if end < 0:
        return None
    at = find(_PADDING, end, last)
    if at < 0:
        return start, end, last, last
    pad_start = at + len(_PADDING)
    pad_end = find(b'"', pad_start, last)
    if pad_end < 0 or (pad_end > pad_start and not body[pad_start:pad_end].isalnum()):
        return None  # not as sent: parsed whole
    return start, end, pad_start, pad_end


def _occurrences(body: bytes | bytearray, pattern: bytes) -> np.ndarray:
    """Every position of ``pattern`` in ``body``, in order: ``bytes.split`` finds them all in C."""
    pieces = body.split(pattern)
    if len(pieces) == 1:
        return np.zeros(0, dtype=np.int64)
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces) - 1)
    return np.cumsum(lengths + len(pattern)) - len(pattern)


def _first_in(found: np.ndarray, firsts: np.ndarray, lasts: np.ndarray, size: int) -> np.ndarray:
    """The first of the sorted positions ``found`` of a pattern of ``size`` bytes inside each
    ``[firsts[i], lasts[i])``, or -1."""
    if not len(found):
        return np.full(len(firsts), -1, dtype=np.int64)
    at = np.searchsorted(found, firsts)
    position = found[np.minimum(at, len(found) - 1)]
    return np.where((at < len(found)) & (position + size <= lasts), position, -1)


def _quotes(
    data: np.ndarray, starts: np.ndarray, lasts: np.ndarray, escapes: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The first quote at or after each start before its last (not one escaped by a backslash
    when ``escapes``): (its position, -1 when there is none before last, or -2 when the windows
    ended first; whether every byte before it is a letter or digit)."""
    n = len(starts)
    end = np.full(n, -2, dtype=np.int64)
    alnum = np.ones(n, dtype=bool)
    todo = np.arange(n)
    offset = 0
    for window in _WINDOWS:
        # Windows are views of the body: the chunks near its end, which a window would overrun,
        # are left to cut_one.
        begin = starts[todo] + offset
        todo = todo[begin + window <= len(data)]
        if not len(todo):
            break
        begin = starts[todo] + offset
        block = np.lib.stride_tricks.sliding_window_view(data, window)[begin]
        inside = np.arange(window) < (lasts[todo] - begin)[:, None]
        quote = (block == _QUOTE) & inside
        found = quote.any(axis=1)
        column = quote.argmax(axis=1)
        if escapes:
            # A quote after an odd number of backslashes is part of the string: only each row's
            # first quote is checked (the window goes on past the string, through the quotes of
            # the chunk's next keys), and the rows whose first one was escaped look again.
            rows = np.flatnonzero(found)
            while len(rows):
                at = begin[rows] + column[rows]
                odd = np.zeros(len(rows), dtype=bool)
                live = np.flatnonzero(data[at - 1] == _BACKSLASH)
                back = 1
                while len(live):
                    odd[live] = ~odd[live]
                    back += 1
                    live = live[data[at[live] - back] == _BACKSLASH]
                rows = rows[odd]
                quote[rows, column[rows]] = False
                found[rows] = quote[rows].any(axis=1)
                column[rows] = quote[rows].argmax(axis=1)
                rows = rows[found[rows]]
        if not escapes:
            other = ~_is_alnum(block) & inside
            # the quote is the first byte that is not a letter or digit
            ok = np.where(found, other.argmax(axis=1) == column, ~other.any(axis=1))
            alnum[todo] &= ok
        hit = todo[found]
        end[hit] = begin[found] + column[found]
        more = ~found & inside[:, -1]  # no quote yet, and the chunk goes on
        end[todo[~found & ~more]] = -1
        todo = todo[more]
        offset += window
    return end, alnum


def cut_all(body: bytes | bytearray, firsts: np.ndarray, lasts: np.ndarray) -> np.ndarray:
    """:func:`cut_one` of every chunk ``body[firsts[i]:lasts[i]]``, as an ``(n, 4)`` array of
    ``(start, end, pad_start, pad_end)``, ``start`` -1 where nothing can be cut."""
    n = len(firsts)
    out = np.full((n, 4), -1, dtype=np.int64)
    if not n:
        return out
    data = np.frombuffer(body, dtype=np.uint8)
    slow: list[int] = []  # chunks left to cut_one
    found = _first_in(_occurrences(body, _CONTENT), firsts, lasts, len(_CONTENT))
    start = np.where(found >= 0, found + len(_CONTENT), -1)
    rest = np.flatnonzero(found < 0)
    if len(rest) * 16 < n:  # a few chunks without content (a first, a last one): one by one
        slow += rest.tolist()
        rest = rest[:0]
    for slot in _SLOTS:
        if not len(rest):
            break
        at = _first_in(_occurrences(body, slot), firsts[rest], lasts[rest], len(slot))
        hit = at >= 0
        begin = at[hit] + len(slot)
        rows = rest[hit]
        # An empty string (no piece) or one cut off: nothing to cut, and no later slot is tried.
        usable = begin < lasts[rows]
        usable[usable] = data[begin[usable]] != _QUOTE
        start[rows[usable]] = begin[usable]
        rest = rest[~hit]
    rows = np.flatnonzero(start >= 0)
    padding = _occurrences(body, _PADDING)
    for block in range(0, len(rows), _BLOCK):
        some = rows[block : block + _BLOCK]
        end, _ = _quotes(data, start[some], lasts[some], escapes=True)
        slow += some[end == -2].tolist()
        ok = end >= 0
        some, end = some[ok], end[ok]
        at = _first_in(padding, end, lasts[some], len(_PADDING))
        pad_start = np.where(at >= 0, at + len(_PADDING), lasts[some])
        pad_end = pad_start.copy()
        padded = np.flatnonzero(at >= 0)
        if len(padded):
            quote, alnum = _quotes(data, pad_start[padded], lasts[some][padded], escapes=False)
            slow += some[padded[quote == -2]].tolist()
            pad_end[padded] = quote
            keep = np.ones(len(some), dtype=bool)
            keep[padded[(quote < 0) | ~alnum]] = False  # not as sent: parsed whole
            some, end, pad_start, pad_end = some[keep], end[keep], pad_start[keep], pad_end[keep]
        out[some] = np.stack([start[some], end, pad_start, pad_end], axis=1)
    for row in slow:
        cut = cut_one(body, int(firsts[row]), int(lasts[row]))
        out[row] = (-1, -1, -1, -1) if cut is None else cut
    return out


def _is_alnum(byte: np.ndarray) -> np.ndarray:
    """ASCII letters and digits (``bytes.isalnum``)."""
    lower = byte | 0x20
    return ((byte >= 0x30) & (byte <= 0x39)) | ((lower >= 0x61) & (lower <= 0x7A))


# Chunks read by cut_one whose places are tried on all the others (guess_all).
_REFERENCES = 8


def guess_all(
    body: bytes | bytearray, firsts: np.ndarray, lasts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`cut_all`'s result, found without searching the whole body where the chunks are
    shaped like one of a few that :func:`cut_one` reads: a stream's chunks mostly have their text
    the same number of bytes after their start, and their padding the same number after their
    text. Each such place is checked (the pattern is there), the string's end found as cut_all
    finds it; ``guessed`` says which cuts are guesses. A guess is right when nothing before it
    in the chunk holds the pattern: true of every chunk whose bytes around its text are those of
    a chunk cut_one read, which the caller checks once per skeleton (``pieces.pieces_of``)."""
    n = len(firsts)
    out = np.full((n, 4), -1, dtype=np.int64)
    guessed = np.zeros(n, dtype=bool)
    if not n:
        return out, guessed
    data = np.frombuffer(body, dtype=np.uint8)
    todo = np.arange(n)
    start = np.full(n, -1, dtype=np.int64)
    reference = np.full(n, -1, dtype=np.int64)
    tails: list[int | None] = []  # each reference's bytes from its text's end to its padding
    for _ in range(_REFERENCES):
        if not len(todo):
            break
        first, last = int(firsts[todo[0]]), int(lasts[todo[0]])
        one = cut_one(body, first, last)
        if one is None:
            todo = todo[1:]  # nothing to cut: what cut_one says
            continue
        begin, text_end, pad_start, _ = one
        pattern = next(p for p in (_CONTENT, *_SLOTS) if body.startswith(p, begin - len(p)))
        at = firsts[todo] + (begin - first)
        match = at < lasts[todo]
        view = np.lib.stride_tricks.sliding_window_view(data, len(pattern))
        match[match] = (
            view[at[match] - len(pattern)] == np.frombuffer(pattern, dtype=np.uint8)
        ).all(axis=1)
        if pattern != _CONTENT:  # an empty reasoning or arguments string: nothing to cut
            match[match] = data[at[match]] != _QUOTE
        rows = todo[match]
        start[rows] = at[match]
        reference[rows] = len(tails)
        tails.append(None if pad_start == last else pad_start - text_end)
        todo = todo[~match]
    rows = np.flatnonzero(start >= 0)
    slow: list[int] = []
    for block in range(0, len(rows), _BLOCK):
        some = rows[block : block + _BLOCK]
        end, _ = _quotes(data, start[some], lasts[some], escapes=True)
        slow += some[end < 0].tolist()
        ok = end >= 0
        some, end = some[ok], end[ok]
        pad_start = lasts[some].copy()
        pad_end = pad_start.copy()
        tail = np.array([-1 if t is None else t for t in tails], dtype=np.int64)[reference[some]]
        at = end + tail
        padded = np.flatnonzero((tail >= 0) & (at < lasts[some]))
        view = np.lib.stride_tricks.sliding_window_view(data, len(_PADDING))
        there = (view[at[padded] - len(_PADDING)] == np.frombuffer(_PADDING, dtype=np.uint8)).all(
            axis=1
        )
        padded = padded[there]
        if len(padded):
            pad_start[padded] = at[padded]
            quote, alnum = _quotes(data, at[padded], lasts[some][padded], escapes=False)
            pad_end[padded] = quote
            bad = padded[(quote < 0) | ~alnum]
            slow += some[bad].tolist()
            keep = np.ones(len(some), dtype=bool)
            keep[bad] = False
            some, end, pad_start, pad_end = some[keep], end[keep], pad_start[keep], pad_end[keep]
        out[some] = np.stack([start[some], end, pad_start, pad_end], axis=1)
        guessed[some] = True
    for row in slow:
        cut = cut_one(body, int(firsts[row]), int(lasts[row]))
        out[row] = (-1, -1, -1, -1) if cut is None else cut
    if len(todo) * 16 < n:
        for row in todo.tolist():
            cut = cut_one(body, int(firsts[row]), int(lasts[row]))
            out[row] = (-1, -1, -1, -1) if cut is None else cut
    else:
        out[todo] = cut_all(body, firsts[todo], lasts[todo])
    return out, guessed
