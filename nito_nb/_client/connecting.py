"""How long an attempt spent opening its connection (docs/METRICS.md's ``connect``).

Read from httpcore's trace events, through httpx's documented ``trace`` request extension: they
come from httpcore's connection classes, so this works with httpx's own transport (a proxy,
Windows, the sync client) and with a user's own httpx client. A request on nito_nb's own
connection (``_transport/direct.py``) goes through no httpcore connection: it times the same span
around the connection it opens. The span runs from the first ``connect_tcp`` (or
``connect_unix_socket``) started to the last ``connect_tcp`` or ``start_tls`` completed: name
lookup, TCP, TLS, and through a proxy its connection and tunnel. A request sent on a connection
reused from a pool has no such event, and its ``connect`` stays None.

Why it is kept: every request of a load run opens its own connection, so its ttft includes this;
tools that keep connections open (vLLM's ``bench serve``, guidellm) do not pay it after their
first requests. ``ttft - connect`` is the figure to set beside theirs (docs/LOAD.md).
"""

from __future__ import annotations

import time
import weakref
from typing import Any

import httpx

__all__ = ["trace_connect"]

_OPEN = frozenset({"connect_tcp", "connect_unix_socket"})
_OPENED = frozenset({"connect_tcp", "connect_unix_socket", "start_tls"})


class _ConnectTimer:
    """The trace callback of one attempt: gives the Stream (through its producer) its attempt's
    connect time."""

    __slots__ = ("_source", "_started")

    def __init__(self, source: Any) -> None:
        # Weakly: the stream keeps its response, which keeps its request, which keeps this; a
        # strong reference made every ended stream a cycle that only a full GC pass frees
        # (tests/test_gc.py). The producer lives while the client connects, which is when this
        # fires.
        self._source = weakref.ref(source)
        self._started: int | None = None

    def event(self, name: str) -> None:
        # Names are "<httpcore module>.<step>.<started|complete|failed>" (connection, proxy, socks).
        _, _, rest = name.partition(".")
        step, _, phase = rest.rpartition(".")
        if phase == "started" and step in _OPEN:
            if self._started is None:
                self._started = time.perf_counter_ns()
        elif phase == "complete" and step in _OPENED and self._started is not None:
            source = self._source()
            if source is not None:
                source.set_connect(time.perf_counter_ns() - self._started)

    def __call__(self, name: str, info: dict[str, Any]) -> None:  # httpx.Client
        self.event(name)

    async def asynchronous(self, name: str, info: dict[str, Any]) -> None:  # httpx.AsyncClient
        self.event(name)


def trace_connect(request: httpx.Request, source: Any, *, asynchronous: bool) -> None:
    """Have ``request`` (one attempt of the Stream that ``source`` fills) tell the stream how long
    its connection took to open. A trace the request already carries (set by the user's own
    client) is left alone."""
    if "trace" in request.extensions:
        return
    timer = _ConnectTimer(source)
    request.extensions["trace"] = timer.asynchronous if asynchronous else timer
