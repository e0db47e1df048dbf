"""The chunk-level frame of one run or of several (a sweep's): the one rule of ``Run.frame()`` and
``Sweep.frame()``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core.errors import ConfigurationError

if TYPE_CHECKING:
    import pandas as pd

    from .._stream_base import StreamBase
    from ._runner import Run

__all__ = ["frame_of"]


def frame_of(runs: list[Run]) -> pd.DataFrame:
    """One chunk-level frame of the finished streams of ``runs`` (``stream`` = the request key;
    a load run's keys hold its run id, so the runs of a sweep never share one): from their store
    when they have one (a sweep's runs share theirs), else from the Streams they kept. One frame,
    not a concat of frames: ``df.attrs`` holds what each stream's rows need (``df.nito``)."""
    from .._frame import frame

    stores = {run.store_path for run in runs}
    if len(stores) == 1 and (path := stores.pop()) is not None:
        from ._store import open_store

        with open_store(path) as store:
            return store.frame([row["key"] for run in runs for row in list(run._rows)])
    streams: dict[str, StreamBase] = {}
    for run in runs:
        if run.store_path is not None:
            raise ConfigurationError("these runs keep their streams in different stores: frame each run apart")
        with run._lock:
            streams.update(run._streams)
    return frame(streams)
