"""When each piece of a streamed body is due: time to first token, tokens per second, jitter."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ._options import SimOptions
from ._reply import KEEPALIVE, Event


@dataclass(frozen=True)
class Pacing:
    ttft_s: float
    tps: float
    jitter: float
    seed: int

    @classmethod
    def of(cls, options: SimOptions) -> Pacing:
        return cls(options.ttft_ms / 1000, options.tps, options.jitter, options.seed)


def schedule(
    events: Iterable[Event], pacing: Pacing, keepalive_s: float = 1.0
) -> Iterator[tuple[float, bytes | None]]:
    """When each piece of the body is due: `(seconds since the response started, bytes)`.

    `None` for bytes means: cut the connection. The first chunk is due after the time to first
    token, with a keep-alive comment at once and then every `keepalive_s` while waiting (as
    gateways do while the model thinks); each later token after 1/tps seconds, times a random
    jitter factor in [1 - jitter, 1 + jitter] drawn from the request's seed. Other chunks (the
    terminal and usage chunks, `[DONE]`) follow the token before them at once.
    """
    rng = random.Random(pacing.seed)
    gap = 1.0 / pacing.tps if pacing.tps > 0 else 0.0
    low, high = 1.0 - pacing.jitter, 1.0 + pacing.jitter
    t = 0.0
    waiting_first = pacing.ttft_s > 0
    for event in events:
        kind = event.kind
        if waiting_first and kind in ("token", "send") and event.data.startswith(b"data:"):
            # The model "thinks" before its first chunk, whatever that chunk carries.
            waiting_first = False
            yield t, KEEPALIVE
            beat = t + keepalive_s
            t += pacing.ttft_s
            while keepalive_s > 0 and beat < t:
                yield beat, KEEPALIVE
                beat += keepalive_s
            yield t, event.data
        elif kind == "token":
            if gap:
                t += gap * rng.uniform(low, high)
            yield t, event.data
        elif kind == "send":
            yield t, event.data
        elif kind == "pause":
            t += event.seconds
        elif kind == "at":
            t = max(t, event.seconds)
            yield t, event.data
        else:
            yield t, None
            return
