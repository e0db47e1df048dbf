"""The capacity model of a simulated server: slots, a queue, a batch that slows as it fills.

Pure (standard library only, no I/O, no threads; the clock is injected), so that the tests drive
it with a clock of their own. The app's shell (`_batching.py`) keeps one `Scheduler` per model
and capacity, sleeps and writes; docs/SIMULATOR.md ("Capacity") states the model:

- `slots` requests are served at once (a batch); a request holds its slot from its admission to
  its last chunk. Beyond them up to `queue` requests wait, first come first served; a request
  that finds the slots and the queue full is refused (the shell answers 429 with Retry-After).
- prefill: `prefill_ms` plus the prompt's tokens at `prefill_tps`, from admission to the first
  token. Time to first token is the wait in the queue plus the prefill.
- decode: each later token after 1 / decode_tps(batch) seconds, where
  decode_tps(b) = tps / (1 + slowdown * (b - 1)) and b is the number of requests holding a slot
  when the token before it left; times a jitter factor in [1 - jitter, 1 + jitter], plus a stall
  of `stall_ms` with probability `stall_rate`. Both drawn from a generator seeded by `seed` and
  the request's arrival number at its scheduler: the same seed and the same arrivals give the
  same schedule of stalls.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from ._reply import DONE, KEEPALIVE, Event, dumps

#: The model whose requests always go through the capacity model (other models: `sim.capacity`).
SERVER_MODEL = "sim/server"
#: The variable that sets the capacity's defaults (`--capacity` of `python -m nito_nb.sim`).
CAPACITY_VARIABLE = "NITO_SIM_CAPACITY"


@dataclass(frozen=True)
class Capacity:
    """The settings of a simulated server's capacity (`"sim": {"capacity": {...}}`)."""

    slots: int = 4  # requests served at once (the batch)
    queue: int = 8  # requests that may wait beyond the slots; past them: 429
    tps: float = 100.0  # decode tokens/s of a request alone in the batch; 0 = at once
    slowdown: float = 0.2  # k of decode_tps(b) = tps / (1 + k (b - 1))
    prefill_ms: float = 20.0  # fixed part of the prefill
    prefill_tps: float = 5000.0  # prompt tokens/s of the prefill; 0 = no per-token part
    jitter: float = 0.0  # each decode gap times a factor in [1 - jitter, 1 + jitter]
    stall_rate: float = 0.0  # the chance that a decode gap also holds a stall
    stall_ms: float = 500.0  # the length of a stall
    seed: int = 0  # seeds the jitter and the stalls (with each request's arrival number)

    def decode_tps(self, batch: int) -> float:
        """Tokens per second of each request when `batch` requests hold a slot (inf: at once)."""
        if self.tps <= 0:
            return math.inf
        return self.tps / (1 + self.slowdown * (max(batch, 1) - 1))

    def prefill_s(self, prompt_tokens: int) -> float:
        per_token = prompt_tokens / self.prefill_tps if self.prefill_tps > 0 else 0.0
        return self.prefill_ms / 1000 + per_token

    def service_s(self, prompt_tokens: int, output_tokens: int) -> float:
        """How long a request holds its slot in a full batch, without jitter or stalls."""
        return self.prefill_s(prompt_tokens) + max(output_tokens - 1, 0) / self.decode_tps(
            self.slots
        )

    def requests_per_s(self, prompt_tokens: int, output_tokens: int) -> float:
        """The capacity: requests ended per second with every slot busy (the knee of a sweep)."""
        service = self.service_s(prompt_tokens, output_tokens)
        return math.inf if service <= 0 else self.slots / service


_INTEGERS = ("slots", "queue", "seed")
_SHARES = ("jitter", "stall_rate")  # between 0 and 1
NAMES = tuple(f.name for f in fields(Capacity))


def parse_capacity(value: Any, defaults: Capacity) -> Capacity:
    """`value` (an object of Capacity's fields, or `true` for the defaults) over `defaults`;
    ValueError with one sentence that names what is wrong."""
    if value is True:
        return defaults
    if not isinstance(value, Mapping):
        raise ValueError(
            f'sim.capacity must be an object such as {{"slots": 4, "queue": 8}} or true, got {value!r}'
        )
    values: dict[str, Any] = {}
    for name, raw in value.items():
        if name not in NAMES:
            raise ValueError(
                f"unknown sim.capacity option {name!r}: the options are {', '.join(NAMES)}"
            )
        if (
            isinstance(raw, bool)
            or not isinstance(raw, int | float)
            or raw != raw
            or raw < 0
            or raw == math.inf
        ):
            raise ValueError(f"sim.capacity.{name} must be a number >= 0, got {raw!r}")
        if name in _INTEGERS:
            if int(raw) != raw:
                raise ValueError(f"sim.capacity.{name} must be an integer, got {raw!r}")
            raw = int(raw)
        elif name in _SHARES and raw > 1:
            raise ValueError(f"sim.capacity.{name} is a share between 0 and 1, got {raw!r}")
        values[name] = raw if name in _INTEGERS else float(raw)
    if values.get("slots", defaults.slots) < 1:
        raise ValueError("sim.capacity.slots must be at least 1")
    return Capacity(**{**{f: getattr(defaults, f) for f in NAMES}, **values})


def parse_spec(text: str) -> dict[str, float]:
    """`slots=4,queue=8` (NITO_SIM_CAPACITY, `--capacity`) as `{"slots": 4, "queue": 8}`;
    ValueError when a part is not NAME=NUMBER (the names are checked by `parse_capacity`)."""
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, equals, number = part.partition("=")
        try:
            if not equals:
                raise ValueError
            parsed = float(number)
        except ValueError:
            raise ValueError(f"{part!r} is not NAME=NUMBER (such as slots=4,queue=8)") from None
        values[name.strip()] = int(parsed) if parsed.is_integer() else parsed
    return values


@dataclass(eq=False)
class Ticket:
    """One request at a scheduler: when it arrived, was admitted to a slot, sent its first token
    and its last chunk (the scheduler's clock), and its own random generator."""

    number: int  # arrival order at its scheduler (refused requests get none)
    prompt_tokens: int
    arrived: float
    rng: random.Random
    admitted: float | None = None
    first_token: float | None = None
    last_chunk: float | None = None
    stalls: list[float] = field(default_factory=list)  # the stalls drawn for it, in seconds

    def metrics(self) -> dict[str, float]:
        """The server's view of the request, in milliseconds (`"metrics"` of its last chunk):
        queue (arrival to admission), prefill (admission to the first token's write), decode
        (first token to the last chunk's write)."""

        def ms(later: float | None, earlier: float | None) -> float:
            if later is None or earlier is None:
                return 0.0
            return round((later - earlier) * 1000, 3)

        return {
            "queue_time_ms": ms(self.admitted, self.arrived),
            "prefill_time_ms": ms(self.first_token, self.admitted),
            "decode_time_ms": ms(self.last_chunk, self.first_token),
        }


class Scheduler:
    """The slots and the queue of one simulated server (one model and capacity in one simulator
    process), and the pace of its batch."""

    def __init__(self, capacity: Capacity, clock: Callable[[], float]) -> None:
        self.capacity = capacity
        self.clock = clock
        self.running: set[Ticket] = set()
        self.waiting: deque[Ticket] = deque()
        self.arrivals = 0
        self.refused = 0

    @property
    def batch(self) -> int:
        return len(self.running)

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting

    def arrive(self, prompt_tokens: int) -> Ticket | None:
        """A request arrives: admitted to a free slot, else queued, else refused (None)."""
        if len(self.running) >= self.capacity.slots and len(self.waiting) >= self.capacity.queue:
            self.refused += 1
            return None
        now = self.clock()
        number = self.arrivals
        self.arrivals += 1
        ticket = Ticket(number, prompt_tokens, now, random.Random(f"{self.capacity.seed}:{number}"))
        if len(self.running) < self.capacity.slots:
            ticket.admitted = now
            self.running.add(ticket)
        else:
            self.waiting.append(ticket)
        return ticket

    def leave(self, ticket: Ticket) -> list[Ticket]:
        """`ticket` ended (or its client went away): its slot, or its place in the queue, is
        freed. Returns the tickets admitted now, first come first served. Idempotent."""
        if ticket in self.running:
            self.running.discard(ticket)
        elif ticket in self.waiting:
            self.waiting.remove(ticket)
        admitted = []
        while self.waiting and len(self.running) < self.capacity.slots:
            next_ticket = self.waiting.popleft()
            next_ticket.admitted = self.clock()
            self.running.add(next_ticket)
            admitted.append(next_ticket)
        return admitted

    def gap(self, ticket: Ticket) -> float:
        """Seconds from a token of `ticket` to its next one, at the batch of now. Draws twice from
        the ticket's generator whatever the settings, so that the stalls of a seed do not move
        when the jitter changes."""
        capacity = self.capacity
        factor = ticket.rng.uniform(1 - capacity.jitter, 1 + capacity.jitter)
        stalled = ticket.rng.random() < capacity.stall_rate
        gap = factor / capacity.decode_tps(self.batch)
        if stalled:
            stall = capacity.stall_ms / 1000
            ticket.stalls.append(stall)
            gap += stall
        return gap


class Piece(NamedTuple):
    """Bytes of a served body, due `due` seconds after the request's admission (None: cut the
    connection); `first`: its first token, `last`: its last chunk before [DONE]."""

    due: float
    data: bytes | None
    first: bool = False
    last: bool = False


def served(
    events: Iterable[Event], scheduler: Scheduler, ticket: Ticket, keepalive_s: float = 1.0
) -> Iterator[Piece]:
    """When each piece of an admitted request's body is due, as `_pacing.schedule` says for an
    unbounded server but with the capacity's prefill and decode: the first data chunk after the
    prefill (keep-alive comments meanwhile), each later token after `scheduler.gap`, computed
    when the piece is asked for (so the shell asks right after writing the piece before)."""
    t = 0.0
    waiting_first = True
    pending = iter(events)
    event = next(pending, None)
    while event is not None:
        following = next(pending, None)
        last = (
            following is not None and following.data == DONE and event.data.startswith(b"data: {")
        )
        kind = event.kind
        if waiting_first and kind in ("token", "send") and event.data.startswith(b"data:"):
            waiting_first = False
            beat = t + keepalive_s
            t += scheduler.capacity.prefill_s(ticket.prompt_tokens)
            while keepalive_s > 0 and beat < t:
                yield Piece(beat, KEEPALIVE)
                beat += keepalive_s
            yield Piece(t, event.data, first=True, last=last)
        elif kind == "token":
            t += scheduler.gap(ticket)
            yield Piece(t, event.data, last=last)
        elif kind == "send":
            yield Piece(t, event.data, last=last)
        elif kind == "pause":
            t += event.seconds
        elif kind == "at":
            t = max(t, event.seconds)
            yield Piece(t, event.data, last=last)
        else:
            yield Piece(t, None)
            return
        event = following


def with_metrics(data: bytes, metrics: Mapping[str, float]) -> bytes:
    """A chunk's bytes with `"metrics": {...}` as its first field (as vLLM's
    `--enable-per-request-metrics` adds `metrics` to its last message)."""
    return b'data: {"metrics":' + dumps(dict(metrics)) + b"," + data[len(b"data: {") :]
