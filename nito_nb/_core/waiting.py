"""The one rule for the ``timeout`` of every ``wait()`` (streams, runs, sweeps, the chat widget).

``None`` waits for the end; a number of seconds >= 0 waits that long at most, after which the wait
returns and what it waits for goes on. An infinite timeout is the same as None: threading's and
asyncio's waits overflow past about 292 years (``OverflowError: timestamp out of range``).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

from .errors import ConfigurationError

__all__ = ["wait_or_stop", "wait_timeout"]


def wait_timeout(timeout: Any) -> float | None:
    """``timeout`` checked: None or seconds (a float), or one clear ConfigurationError."""
    if timeout is None:
        return None
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or timeout != timeout
        or timeout < 0
    ):
        raise ConfigurationError(
            f"timeout is in seconds, a number >= 0 (or None to wait for the end), not {timeout!r}"
        )
    return None if timeout >= threading.TIMEOUT_MAX else float(timeout)


def wait_or_stop(
    finished: concurrent.futures.Future[Any], stop: Callable[[], None], timeout: float | None
) -> None:
    """Wait for ``finished``, ``timeout`` seconds at most (then return: it goes on, as a Stream's
    wait does; it raised an empty TimeoutError); a KeyboardInterrupt (the notebook's stop button)
    calls ``stop``, waits for the clean end (what arrived is recorded), then goes on up. For runs
    and sweeps."""
    timeout = wait_timeout(timeout)
    try:
        concurrent.futures.wait([finished], timeout)
        if finished.done():
            finished.result()  # its exception, if it failed
    except KeyboardInterrupt:
        stop()
        finished.result()
        raise
