"""While the run's writer thread works in the run's own process, the sending loop gets the GIL back quickly.

The writer thread turns each batch of finished streams into result rows (``writer.py``), and,
where this process builds a store's events itself (the helper process of ``_events.py`` died,
Windows, the magic's writes), their frame rows too. CPython hands the GIL from a busy thread to a
waiting one only every ``sys.getswitchinterval()`` seconds (5 ms by default). The run's loop
thread waits for it after every ``select`` while the writer works, so each of its wake-ups could
come up to 5 ms late: requests left late and chunks were read late; a shorter interval shortened
the send delay's tail (docs/BENCHMARKS.md). The interval is process-wide, so it is shortened only
while some writer works, and the value found is put back when the last one ends (a value set
meanwhile by someone else is overwritten then).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

__all__ = ["WRITER_SWITCH_INTERVAL", "loop_first"]

#: The switch interval (seconds) while a writer builds a store's frame rows in this process.
WRITER_SWITCH_INTERVAL = 0.0005

_lock = threading.Lock()
_active = 0
_saved = 0.0


@contextlib.contextmanager
def loop_first() -> Iterator[None]:
    """Shorten the GIL's switch interval for the duration (nested and concurrent uses count)."""
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_saved, WRITER_SWITCH_INTERVAL))
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                sys.setswitchinterval(_saved)
