"""Pseudo-logprobs: what the simulator sends in `choices[].logprobs` when a request asks for
`logprobs: true` (and `top_logprobs: K`), as OpenAI sends them for each content token.

Deterministic (the same request and seed give the same numbers) and plausible: a token's
probability is drawn from a hash of (seed, position, token), most tokens near certain and about
one in six unsure, so that a view shading by confidence has something to show. The top
alternatives are the token itself and made-up neighbours (other spellings of it, common words)
sharing the rest of the probability, sorted most likely first, as OpenAI lists them.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

__all__ = ["MAX_TOP_LOGPROBS", "token_logprobs"]

#: OpenAI's limit on `top_logprobs`.
MAX_TOP_LOGPROBS = 20

_FILLERS = (
    " the",
    " a",
    " and",
    " of",
    " to",
    " is",
    ",",
    ".",
    " it",
    " that",
    " in",
    " for",
    " on",
    " as",
    " with",
    " was",
    " by",
    " at",
    " or",
    " be",
)


def _unit(*parts: Any) -> float:
    """A number in [0, 1) made of ``parts`` alone."""
    digest = hashlib.sha256(repr(parts).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _entry(token: str, logprob: float) -> dict[str, Any]:
    return {
        "token": token,
        "logprob": round(logprob, 6),
        "bytes": list(token.encode("utf-8", "surrogatepass")),
    }


def token_logprobs(token: str, position: int, seed: int, top: int) -> dict[str, Any]:
    """The `logprobs.content` entry of the token at ``position`` of the answer."""
    u = _unit(seed, position, token)
    # Five tokens in six are near certain (p in [0.85, 1)), the others anywhere in [0.05, 0.85).
    p = 0.85 + 0.15 * (u * 6 % 1) if u < 5 / 6 else 0.05 + 0.8 * (u * 6 % 1)
    p = min(p, 0.999)
    entry = _entry(token, math.log(p))
    alternatives: list[dict[str, Any]] = []
    if top:
        others = [token.upper(), token.strip().capitalize(), *_FILLERS]
        names = [t for t in dict.fromkeys(others) if t and t != token][: top - 1]
        rest, left = 1.0 - p, []
        for name in names:  # each alternative half of what is left, so they sum below 1 - p
            rest /= 2
            left.append(_entry(name, math.log(max(rest, 1e-12))))
        alternatives = sorted([_entry(token, math.log(p)), *left], key=lambda e: -e["logprob"])[
            :top
        ]
    return {**entry, "top_logprobs": alternatives}
