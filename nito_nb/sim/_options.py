"""The `"sim"` options of a request: every option, its default, its type and its check.

One place for them: a new option is a field of `SimOptions` (with its default and a comment) and
its name in one of the type tables below (or a branch of `parse_options` when it needs its own
check). Pacing defaults may come from NITO_SIM_* variables, passed in as a mapping (no
environment is read here); so do the capacity's (`NITO_SIM_CAPACITY`, `_capacity.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._capacity import CAPACITY_VARIABLE, Capacity, parse_capacity, parse_spec

DEFAULT_TTFT_MS = 400.0
DEFAULT_TPS = 80.0
DEFAULT_JITTER = 0.5


@dataclass(frozen=True)
class SimOptions:
    """Settings of one request: the body's `"sim"` object over the environment's defaults."""

    # Pacing (defaults: NITO_SIM_TTFT_MS, NITO_SIM_TPS, NITO_SIM_JITTER, else like a real model).
    ttft_ms: float = DEFAULT_TTFT_MS  # time to first token
    tps: float = DEFAULT_TPS  # tokens per second; 0 = as fast as possible (ttft, think_s 0)
    jitter: float = DEFAULT_JITTER  # each gap is 1/tps times a factor in [1 - jitter, 1 + jitter]
    seed: int = 0  # picks the text variant, tool arguments and jitter (also the body's `seed`)
    # Scenario settings.
    chunks: int = 20_000  # sim/long: number of content chunks
    size: int = 1 << 20  # sim/bigchunk: bytes of the big delta
    stall_s: float = 60.0  # sim/stall: silence in the middle of the stream
    think_s: float = 5.0  # sim/slow: thinking time, with keep-alive comments
    keepalive_s: float = 1.0  # interval of keep-alive comments while thinking
    retry_after: float = 1.0  # sim/http-429: the Retry-After header
    tool_calls: int | None = None  # sim/tools: number of calls (default: one per tool, up to 4)
    interleave: bool = False  # sim/tools: interleave the fragments of parallel calls
    # Ground truth for client benchmarks: each chunk gains "sim_sent_ns", the server's
    # time.perf_counter_ns() when its bytes were handed to the socket (same clock on one machine).
    stamp: bool = False
    # OpenAI's "obfuscation" padding (random letters and digits, random length) last in every
    # chunk, as real OpenAI and Azure send it: no two chunks share a byte layout.
    obfuscation: bool = False
    # A server that saturates (`_capacity.py`): slots, a queue (then 429), a batch that slows as
    # it fills. None: unbounded (every model but sim/server, unless the request asks).
    capacity: Capacity | None = None
    # The server's view of the request (queue, prefill and decode times) in a top-level
    # "metrics" object of its last chunk; needs the capacity model.
    metrics: bool = False
    # Faults of a flaky gateway, on any model (see `fault`).
    fail_rate: float = 0.0  # the share of distinct requests that fail, picked by hash
    fail_status: int | str = 429  # an HTTP status >= 400, "drop" or "error" (mid-stream)
    fail_attempts: int = 1  # a picked request fails this many times, then goes through
    # sim/replay.
    replay: str | None = None  # path of a .sse recording or a nito_nb .jsonl log
    speed: float = 1.0  # timing of a log divided by this; 0 = as fast as possible
    status: int | None = None  # override the recorded HTTP status
    content_type: str | None = None  # override the recorded content type


_NUMBER_OPTIONS = ("ttft_ms", "tps", "jitter", "stall_s", "think_s", "keepalive_s", "speed")
_INT_OPTIONS = ("seed", "chunks", "size", "status", "tool_calls", "fail_attempts")
_STRING_OPTIONS = ("replay", "content_type")
_BOOL_OPTIONS = ("interleave", "stamp", "metrics", "obfuscation")
FAULTS = ("drop", "error")
_ENV_OPTIONS = {"NITO_SIM_TPS": "tps", "NITO_SIM_TTFT_MS": "ttft_ms", "NITO_SIM_JITTER": "jitter"}


class OptionError(ValueError):
    """A `sim` option or a NITO_SIM_* variable that is not usable."""


def _number(name: str, value: Any, *, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OptionError(f"sim.{name} must be a number, got {value!r}")
    if value < 0 or value != value:
        raise OptionError(f"sim.{name} must be >= 0, got {value!r}")
    if integer and int(value) != value:
        raise OptionError(f"sim.{name} must be an integer, got {value!r}")
    return value


def capacity_defaults(env: Mapping[str, str]) -> Capacity:
    """The capacity's defaults: `NITO_SIM_CAPACITY` (`slots=4,queue=8`) over `Capacity()`."""
    raw = env.get(CAPACITY_VARIABLE, "").strip()
    if not raw:
        return Capacity()
    try:
        return parse_capacity(parse_spec(raw), Capacity())
    except ValueError as exc:
        raise OptionError(
            f"the environment variable {CAPACITY_VARIABLE}={raw!r} is not usable ({exc}): set it"
            " to NAME=NUMBER pairs such as slots=4,queue=8, or unset it"
        ) from None


def parse_options(
    sim: Any, env: Mapping[str, str], seed: Any = None, *, capped: bool = False
) -> SimOptions:
    """Merge the request's `"sim"` object over NITO_SIM_* variables over the defaults.

    `tps: 0` means as fast as possible: then the time to first token and sim/slow's thinking
    time are 0 too, unless given explicitly (in the request or the environment). `capped`: the
    model always has a capacity (sim/server), the defaults' unless `sim.capacity` says more.
    """
    values: dict[str, Any] = {}
    for var, name in _ENV_OPTIONS.items():
        raw = env.get(var, "").strip()
        if raw:
            try:
                values[name] = _number(name, float(raw))
            except ValueError as exc:
                raise OptionError(
                    f"the environment variable {var}={raw!r} is not a number >= 0: set it to one, or"
                    " unset it for the simulator's default"
                ) from exc
    if seed is not None:
        values["seed"] = int(_number("seed", seed, integer=True))
    if sim is not None and not isinstance(sim, dict):
        raise OptionError(f"`sim` must be an object, got {sim!r}")
    for name, value in (sim or {}).items():
        if name in _NUMBER_OPTIONS:
            values[name] = float(_number(name, value))
        elif name in _INT_OPTIONS:
            values[name] = int(_number(name, value, integer=True))
        elif name == "retry_after":
            values[name] = _number(name, value)
        elif name in _STRING_OPTIONS:
            if not isinstance(value, str):
                raise OptionError(f"sim.{name} must be a string, got {value!r}")
            values[name] = value
        elif name == "fail_rate":
            values[name] = _number(name, value)
            if values[name] > 1:
                raise OptionError(f"sim.fail_rate is a share between 0 and 1, got {value!r}")
        elif name == "fail_status":
            if value in FAULTS or (type(value) is int and 400 <= value <= 599):
                values[name] = value
            else:
                raise OptionError(
                    f'sim.fail_status must be an HTTP status 400-599, "drop" or "error", got {value!r}'
                )
        elif name == "capacity":
            try:
                values[name] = parse_capacity(value, capacity_defaults(env))
            except ValueError as exc:
                raise OptionError(str(exc)) from None
        elif name in _BOOL_OPTIONS:
            if not isinstance(value, bool):
                raise OptionError(f"sim.{name} must be true or false, got {value!r}")
            values[name] = value
        else:
            raise OptionError(f"unknown sim option {name!r}")
    if "status" in values and not 100 <= values["status"] <= 599:
        raise OptionError(f"sim.status must be an HTTP status (100-599), got {values['status']}")
    if values.get("tps") == 0:
        # As fast as possible: no waiting unless asked for (sim/stall still stalls: that is
        # its point; sim/slow still sends its keep-alive comments, without the wait).
        values.setdefault("ttft_ms", 0.0)
        values.setdefault("think_s", 0.0)
    values["jitter"] = min(values.get("jitter", DEFAULT_JITTER), 1.0)
    if capped and "capacity" not in values:
        values["capacity"] = capacity_defaults(env)
    if values.get("metrics") and "capacity" not in values:
        raise OptionError(
            "sim.metrics reports a capacity model's queue, prefill and decode times: use the model"
            " sim/server, or add sim.capacity (an object, {} for the defaults)"
        )
    return SimOptions(**values)
