"""Where each chunk's text string and padding are, found for all chunks of a log at once.

A chunk's "skeleton" is its bytes without its text string (``delta.content``, else, or when it
is empty, DeepSeek's or OpenRouter's reasoning string, else a tool fragment's arguments), without
the echo of a reasoning string (OpenRouter sends each piece again as its reasoning detail's text)
and without OpenAI's padding (``obfuscation``, random letters of random length): ``plan.py``
reads each skeleton once. The
rule for one chunk is :func:`cut_one`; :func:`cut_all` finds the same places for every chunk with
numpy (a Python loop over 100,000 chunks cost most of a frame: docs/BENCHMARKS.md) and asks
:func:`cut_one` only for the chunks whose strings run past its windows.
"""

from __future__ import annotations

import numpy as np

from .chunks import _ECHOED, _ECHOES, _PADDING, _SLOTS

_CONTENT = b'"content":"'
_QUOTE, _BACKSLASH = 0x22, 0x5C
# Bytes looked at past a string's start, at once for every chunk; longer strings get a second,
# wider look, then cut_one. Token-sized strings fit the first.
_WINDOWS = (32, 1024)
# Chunks handled at once: bounds the windows' memory (rows x window bytes).
_BLOCK = 32768


def cut_one(
    body: bytes | bytearray, first: int, last: int
) -> tuple[int, int, int, int, int, int] | None:
    """``(start, end, echo_start, echo_end, pad_start, pad_end)`` of the chunk
    ``body[first:last]``: its text string is ``body[start:end]``, its echo (the same piece sent
    again: OpenRouter's) ``body[echo_start:echo_end]``, its padding ``body[pad_start:pad_end]``;
    a chunk without an echo has it empty at ``pad_start``, one without padding has both at
    ``last``. None when nothing can be cut (the chunk is parsed whole).

    The text string is the first ``"content":"``'s, unless that is empty: then, as in a chunk
    without one, the first of ``_SLOTS`` found, when its string is not empty (an empty or cut-off
    one: the empty content, or nothing). The padding is the first ``"obfuscation":"`` after the
    text, when it is as sent (letters and digits). A reasoning string's echo is the first string
    of ``_ECHOES`` between the text and the padding (whatever it holds: the skeleton's reading
    says whether it is the same piece)."""
    find = body.find
    found = find(_CONTENT, first, last)
    start = found + len(_CONTENT)
    slot = None
    if found < 0 or (start < last and body[start] == _QUOTE):
        # reasoning and tool-call chunks: their one text string instead
        for pattern in _SLOTS:
            at = find(pattern, first, last)
            if at >= 0:
                begin = at + len(pattern)
                if begin < last and body[begin] != _QUOTE:  # not cut off, not an empty string
                    start, slot = begin, pattern
                break
        if found < 0 and slot is None:
            return None
    end = _string_end(body, start, last)
    if end < 0:
        return None
    at = find(_PADDING, end, last)
    if at < 0:
        pad_start = pad_end = last
    else:
        pad_start = at + len(_PADDING)
        pad_end = find(b'"', pad_start, last)
        if pad_end < 0 or (pad_end > pad_start and not body[pad_start:pad_end].isalnum()):
            return None  # not as sent: parsed whole
    echo_start = echo_end = pad_start
    if slot in _ECHOED:
        keys = [(at, len(key)) for key in _ECHOES if (at := find(key, end, pad_start)) >= 0]
        if keys:
            at, size = min(keys)
            begin = at + size
            stop = _string_end(body, begin, pad_start)
            if stop >= 0:
                echo_start, echo_end = begin, stop
    return start, end, echo_start, echo_end, pad_start, pad_end


def _string_end(body: bytes | bytearray, start: int, last: int) -> int:
    """The closing quote of the JSON string that starts at ``start`` (before ``last``), or -1."""
    find = body.find
    end = find(b'"', start, last)
    # A quote after a backslash ends nothing, unless the backslash is itself escaped.
    while end >= 0 and body[end - 1] == _BACKSLASH:
        before = end - 2
        while body[before] == _BACKSLASH:
            before -= 1
        if (end - 1 - before) % 2 == 0:
            break
        end = find(b'"', end + 1, last)
    return end


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
    """:func:`cut_one` of every chunk ``body[firsts[i]:lasts[i]]``, as an ``(n, 6)`` array of
    ``(start, end, echo_start, echo_end, pad_start, pad_end)``, ``start`` -1 where nothing can be
    cut."""
    n = len(firsts)
    out = np.full((n, 6), -1, dtype=np.int64)
    if not n:
        return out
    data = np.frombuffer(body, dtype=np.uint8)
    slow: list[int] = []  # chunks left to cut_one
    found = _first_in(_occurrences(body, _CONTENT), firsts, lasts, len(_CONTENT))
    start = np.where(found >= 0, found + len(_CONTENT), -1)
    # an empty content gives way to a reasoning or tool-argument string, when there is one
    empty = np.zeros(n, dtype=bool)
    some = np.flatnonzero((start >= 0) & (start < lasts))
    empty[some] = data[start[some]] == _QUOTE
    rest = np.flatnonzero((found < 0) | empty)
    if len(rest) * 16 < n:  # a few chunks without content (a first, a last one): one by one
        slow += rest.tolist()
        start[rest] = -1
        rest = rest[:0]
    echoed = np.zeros(n, dtype=bool)  # cut at a reasoning string: its echo is looked for
    for slot in _SLOTS:
        if not len(rest):
            break
        at = _first_in(_occurrences(body, slot), firsts[rest], lasts[rest], len(slot))
        hit = at >= 0
        begin = at[hit] + len(slot)
        rows = rest[hit]
        # An empty string (no piece) or one cut off: nothing to cut (an empty content stays
        # cut), and no later slot is tried.
        usable = begin < lasts[rows]
        usable[usable] = data[begin[usable]] != _QUOTE
        start[rows[usable]] = begin[usable]
        echoed[rows[usable]] = slot in _ECHOED
        rest = rest[~hit]
    rows = np.flatnonzero(start >= 0)
    padding = _occurrences(body, _PADDING)
    keys = [_occurrences(body, key) for key in _ECHOES] if echoed.any() else []
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
        echo_start, echo_end = pad_start.copy(), pad_start.copy()
        look = np.flatnonzero(echoed[some])
        if len(look):
            # the first key of _ECHOES between the text and the padding, then its string's end
            key_at = np.full(len(look), -1, dtype=np.int64)
            begin = np.full(len(look), -1, dtype=np.int64)
            for key, occurrences in zip(_ECHOES, keys, strict=True):
                at = _first_in(occurrences, end[look], pad_start[look], len(key))
                first = (at >= 0) & ((key_at < 0) | (at < key_at))
                key_at[first] = at[first]
                begin[first] = at[first] + len(key)
            has = np.flatnonzero(key_at >= 0)
            stop, _ = _quotes(data, begin[has], pad_start[look[has]], escapes=True)
            slow += some[look[has[stop == -2]]].tolist()
            fine = stop >= 0
            echo_start[look[has[fine]]] = begin[has[fine]]
            echo_end[look[has[fine]]] = stop[fine]
        out[some] = np.stack([start[some], end, echo_start, echo_end, pad_start, pad_end], axis=1)
    for row in slow:
        cut = cut_one(body, int(firsts[row]), int(lasts[row]))
        out[row] = -1 if cut is None else cut
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
    the same number of bytes after their start, their echo (if any) the same number after their
    text, and their padding the same number after that. Each such place is checked (the pattern
    is there), the strings' ends found as cut_all finds them; ``guessed`` says which cuts are
    guesses. A guess is right when nothing before it in the chunk holds the pattern: true of
    every chunk whose bytes around its text are those of a chunk cut_one read, which the caller
    checks once per skeleton (``pieces.pieces_of``)."""
    n = len(firsts)
    out = np.full((n, 6), -1, dtype=np.int64)
    guessed = np.zeros(n, dtype=bool)
    if not n:
        return out, guessed
    data = np.frombuffer(body, dtype=np.uint8)
    todo = np.arange(n)
    for _ in range(_REFERENCES):
        if not len(todo):
            break
        row = int(todo[0])
        first, last = int(firsts[row]), int(lasts[row])
        one = cut_one(body, first, last)
        todo = todo[1:]
        if one is None:
            continue  # nothing to cut: what cut_one says
        out[row] = one
        begin, text_end, echo_start, echo_end, pad_start, _ = one
        pattern = next(p for p in (_CONTENT, *_SLOTS) if body.startswith(p, begin - len(p)))
        at = firsts[todo] + (begin - first)
        match = at < lasts[todo]
        match[match] = _there(data, at[match], pattern)
        # Not an empty string: no piece to cut (and an empty content gives way to a reasoning
        # string, which cut_one looks for).
        match[match] = data[at[match]] != _QUOTE
        key = None
        if echo_start < pad_start:
            key = next(k for k in _ECHOES if body.startswith(k, echo_start - len(k)))
        rows = todo[match]
        like, state = _like(
            data,
            rows,
            at[match],
            lasts[rows],
            (echo_start - text_end, key),
            None if pad_start == last else pad_start - (echo_end if key else text_end),
        )
        out[rows] = like
        guessed[rows[state == _GUESSED]] = True
        slow = rows[state == _SLOW]
        for at_row in slow.tolist():
            cut = cut_one(body, int(firsts[at_row]), int(lasts[at_row]))
            out[at_row] = -1 if cut is None else cut
        # the chunks whose echo is not where the reference's is: left to the next reference
        todo = np.concatenate([todo[~match], rows[state == _UNLIKE]])
        todo.sort()
    if len(todo) * 16 < n:
        for row in todo.tolist():
            cut = cut_one(body, int(firsts[row]), int(lasts[row]))
            out[row] = -1 if cut is None else cut
    else:
        out[todo] = cut_all(body, firsts[todo], lasts[todo])
    return out, guessed


# What _like says of each chunk: guessed, to be cut by cut_one, unlike the reference.
_GUESSED, _SLOW, _UNLIKE = range(3)


def _there(data: np.ndarray, at: np.ndarray, pattern: bytes) -> np.ndarray:
    """Whether ``pattern`` ends at each position ``at`` of ``data``."""
    view = np.lib.stride_tricks.sliding_window_view(data, len(pattern))
    return (view[at - len(pattern)] == np.frombuffer(pattern, dtype=np.uint8)).all(axis=1)


def _like(
    data: np.ndarray,
    rows: np.ndarray,
    start: np.ndarray,
    lasts: np.ndarray,
    echo: tuple[int, bytes | None],
    padding: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """The cuts of the chunks ``rows`` whose text string starts at ``start``, guessed as a
    reference chunk's: its echo ``echo[0]`` bytes after the text's end, after the key
    ``echo[1]`` (None: no echo), and its padding ``padding`` bytes after the echo's end (or the
    text's; None: no padding). Returns the cuts and each chunk's state (``_GUESSED``, ``_SLOW``:
    its strings run past the windows or its padding is not as sent, ``_UNLIKE``: no echo there)."""
    gap, key = echo
    out = np.full((len(rows), 6), -1, dtype=np.int64)
    state = np.full(len(rows), _GUESSED, dtype=np.int8)
    for block in range(0, len(rows), _BLOCK):
        some = np.arange(block, min(block + _BLOCK, len(rows)))
        end, _ = _quotes(data, start[some], lasts[some], escapes=True)
        state[some[end < 0]] = _SLOW
        ok = end >= 0
        some, end = some[ok], end[ok]
        echo_start = echo_end = end  # no echo: moved to the padding's start below
        if key is not None:
            echo_start = end + gap
            there = echo_start < lasts[some]
            there[there] = _there(data, echo_start[there], key)
            state[some[~there]] = _UNLIKE
            some, end, echo_start = some[there], end[there], echo_start[there]
            echo_end, _ = _quotes(data, echo_start, lasts[some], escapes=True)
            state[some[echo_end < 0]] = _SLOW
            ok = echo_end >= 0
            some, end, echo_start, echo_end = some[ok], end[ok], echo_start[ok], echo_end[ok]
        after = echo_end
        pad_start = lasts[some].copy()
        pad_end = pad_start.copy()
        if padding is not None:
            at = after + padding
            padded = np.flatnonzero(at < lasts[some])
            padded = padded[_there(data, at[padded], _PADDING)]
            if len(padded):
                pad_start[padded] = at[padded]
                quote, alnum = _quotes(data, at[padded], lasts[some][padded], escapes=False)
                pad_end[padded] = quote
                bad = padded[(quote < 0) | ~alnum]
                state[some[bad]] = _SLOW
        if key is None:
            echo_start = echo_end = pad_start
        out[some] = np.stack([start[some], end, echo_start, echo_end, pad_start, pad_end], axis=1)
    return out, state
