"""A network layer for httpx that stamps each socket read the moment its bytes arrived.

httpx hands a body's bytes to its caller only when the task that iterates the body runs again:
on an event loop busy with hundreds of streams, that is long after the bytes came
(bench/bench_load.py; docs/BENCHMARKS.md). The rule of this project is that a timing is the
moment bytes reached the process, so for load runs the socket itself is read here, by a callback
of the event loop (``loop.add_reader``), and every read carries its own time:

- on Linux, the kernel's receive time of the read's last packet (``SO_TIMESTAMPNS``: the
  realtime clock, mapped onto ``time.perf_counter_ns`` at the read), which no lateness of the
  loop changes;
- elsewhere, ``perf_counter_ns()`` in the read callback (as late as the loop's selector is).

A read that takes several packets at once (the loop was later than the gap between two chunks of
one stream) carries the time of the last one: an upper bound for the earlier ones. It cannot be
split: the kernel merges packets that wait in a socket's queue and keeps the newest time (peeking
up to each event's end was tried, and gave every event the same time).

``StampingBackend`` is an httpcore network backend (plain TCP, TLS through ``ssl.MemoryBIO``);
``arrival_clock(response)`` returns the function that gives the stamp of the read that carried
the bytes httpx just yielded (``response.extensions["network_stream"]``), or
``time.perf_counter_ns`` for any other transport. ``AsyncClient`` (``nito_nb.astream``, load runs
and their worker processes) uses it for the httpx client it makes for each stream, unless the
environment sets a proxy (a transport given to httpx turns off its proxy settings). An httpx client
of the user's keeps its own transport. The sync ``Client`` does not need it: its reader thread
does nothing but read, and stamps each read as the blocking call returns.

After the headers, the body of a response that this transport carried is not read through httpx
at all when its framing allows (``pushed.py``): the socket's callback unframes each read
(``framing.py``) and hands it on in the same callback, without a task switch per read, unless
earlier bytes of the body still wait for their turn (``pump.py``).

Modules: ``streams.py`` (the stamped socket, and TLS over it), ``framing.py`` (HTTP/1.1
header end and body framing, I/O-free), ``pushed.py`` (the pushed body), ``pump.py`` (how much of
the pushed bodies is parsed per turn of the loop), ``transport.py`` (the
httpcore backend and httpx transport), ``direct.py`` (a request sent and its head read without
httpx's client: ``AsyncClient`` uses it when it makes its own connection), ``head.py`` (the usual
heads written and read by hand, h11 for the others).
"""

from .pushed import PushedBody, pushed_body
from .streams import StampedSocketStream, StampedTLSStream
from .transport import StampingBackend, StampingTransport, arrival_clock, stamping_allowed

__all__ = [
    "PushedBody",
    "StampedSocketStream",
    "StampedTLSStream",
    "StampingBackend",
    "StampingTransport",
    "arrival_clock",
    "pushed_body",
    "stamping_allowed",
]
