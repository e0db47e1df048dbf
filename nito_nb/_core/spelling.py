"""A name that is a slip of a known one: the one rule behind every "Did you mean" of nito_nb (a
keyword of the Python API, a ``%%nito`` option, a ``%config Nito`` setting). No I/O.

A misspelt keyword that nobody catches is sent as a body field the gateway ignores
(``temprature=0.2``), or runs a whole batch at the default (``concurency=4``); a name far from
every known one is left alone, since gateways have fields of their own. How far is "a slip": the
optimal string alignment distance (Damerau-Levenshtein where each letter moves at most once: a
swap of two neighbours counts one), within 1 for names of 4 to 7 characters and 2 from 8. Shorter
names are too short to guess at (``n``, ``top``). Case and ``-`` for ``_`` count for nothing
(``--max_tokens`` for ``--max-tokens``). Chosen over ``difflib.get_close_matches`` (what traitlets
uses for ``%config``), whose ratio of 0.6 takes llama.cpp's ``n_probs`` for ``logprobs`` (0.67):
a real field refused is worse than a typo not caught.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["did_you_mean", "distance", "meant"]


def _plain(name: str) -> str:
    return name.lower().replace("-", "_")


def _allowed(name: str) -> int:
    """The most edits that still make ``name`` a slip of another (0: only case and dashes)."""
    size = len(name)
    return 0 if size <= 3 else 1 if size <= 7 else 2


def distance(a: str, b: str, limit: int | None = None) -> int:
    """The optimal string alignment distance of ``a`` and ``b`` (insertions, deletions,
    substitutions, swaps of two neighbours: one edit each). With ``limit``, anything past it is
    ``limit + 1`` (found sooner)."""
    if limit is not None and abs(len(a) - len(b)) > limit:
        return limit + 1
    before: list[int] | None = None
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cost = 0 if x == y else 1
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + cost)
            if before is not None and i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                current[j] = min(current[j], before[j - 2] + 1)
        if limit is not None and min(current) > limit:
            return limit + 1
        before, row = row, current
    return row[-1]


def meant(name: str, known: Iterable[str]) -> str | None:
    """The known name that ``name`` is most likely a slip of, or None (``name`` itself known, or
    far from all of them). The nearest wins; among equals, the first in ``known``."""
    plain = _plain(name)
    limit = _allowed(plain)
    best: tuple[int, str] | None = None
    for candidate in known:
        if candidate == name:
            return None
        found = distance(plain, _plain(candidate), limit)
        if found <= limit and (best is None or found < best[0]):
            best = (found, candidate)
    return None if best is None else best[1]


def did_you_mean(name: str, known: Iterable[str], shown: str = "{}") -> str:
    """`` Did you mean X?`` for the known name ``name`` is a slip of (``shown`` formats it, e.g.
    ``"{}="`` or ``"--{}"``), else an empty string."""
    found = meant(name, known)
    return "" if found is None else f" Did you mean {shown.format(found)}?"
