"""What a chunk says of its tokens' log probabilities: OpenAI's ``choices[].logprobs``.

A chunk that was asked for them (``logprobs: true``, ``top_logprobs: K``) carries, for each
content token it holds, ``{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
"bytes"}...]}`` in ``choices[i].logprobs.content``; the tokens of a refusal come in
``logprobs.refusal`` instead. :func:`logprobs_of` reads both, for one choice; everything else
(a Stream's ``logprobs``, ``df.nito.tokens()``, the simulator's non-streaming answer) calls it.
Pure: standard library only.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["CHANNELS", "logprobs_of", "probability"]

#: Where a token's logprobs come from: the answer's text, or a refusal's.
CHANNELS = ("content", "refusal")


def _entries(value: Any) -> list[dict[str, Any]]:
    """The token entries of one channel as sent, those that name a token (others are dropped)."""
    if not isinstance(value, list):
        return []
    return [
        entry for entry in value if isinstance(entry, dict) and isinstance(entry.get("token"), str)
    ]


def logprobs_of(chunk: Any, choice: int = 0) -> dict[str, list[dict[str, Any]]]:
    """``{"content": [...], "refusal": [...]}``: the token entries one chunk carries for ``choice``
    (empty lists when it carries none: no ``logprobs``, ``null``, another choice)."""
    found: dict[str, list[dict[str, Any]]] = {"content": [], "refusal": []}
    listed = chunk.get("choices") if isinstance(chunk, dict) else None
    if not isinstance(listed, list):
        return found
    for item in listed:
        if not isinstance(item, dict) or item.get("index", 0) != choice:
            continue
        logprobs = item.get("logprobs")
        if isinstance(logprobs, dict):
            for channel in CHANNELS:
                found[channel].extend(_entries(logprobs.get(channel)))
    return found


def probability(logprob: Any) -> float | None:
    """``exp(logprob)``, or None for a logprob that is not a finite number."""
    if (
        isinstance(logprob, bool)
        or not isinstance(logprob, int | float)
        or not math.isfinite(logprob)
    ):
        return None
    return math.exp(min(float(logprob), 0.0))
