"""The chunk-level frame of one run or of several (a sweep's): the one rule of ``Run.frame()`` and
``Sweep.frame()``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core.errors import ConfigurationError

if TYPE_CHECKING:
    import pandas as pd

    from .._stream_results import StreamResults
    from .runner import Run

__all__ = ["frame_of"]


def frame_of(runs: list[Run]) -> pd.DataFrame:
    """One chunk-level frame of the finished streams of ``runs`` (``stream`` = the request key;
    a load run's keys hold its run id, so the runs of a sweep never share one): from their store
    when they have one (a sweep's runs share theirs), else from the Streams they kept; a run
    whose store failed kept the Streams from then on, and those are added to what the store has.
    One frame, not a concat of frames: ``df.attrs`` holds what each stream's rows need (``df.nito``)."""
    from .._frame import frame

    kept: dict[str, StreamResults] = {}
    for run in runs:
        with run._lock:
            kept.update(run._streams)
    stores = {run.store_path for run in runs}
    if len(stores) == 1 and (path := stores.pop()) is not None:
        from .store import open_store

        keys = [row["key"] for run in runs for row in list(run._rows) if row["key"] not in kept]
        if not kept:
            with open_store(path) as store:
                return store.frame(keys)
        if not keys:  # the store failed at its first batch: nothing to read there
            return frame(kept)
        with open_store(path) as store:
            return _joined(store.frame(keys), frame(kept))
    if any(run.store_path is not None for run in runs):
        raise ConfigurationError("these runs keep their streams in different stores: frame each run apart")
    return frame(kept)


def _joined(stored: pd.DataFrame, kept: pd.DataFrame) -> pd.DataFrame:
    """The frame of a store's streams and the frame of Streams kept in memory, as one frame: the
    rows of both (dtypes restored: the two ``stream`` columns have other categories) and the
    ``df.attrs["nito"]`` of both."""
    import pandas as pd

    from .._frame import frame
    from .._frame.inputs import freeze

    out = frame(pd.concat([stored, kept], ignore_index=True))
    out.attrs = {"nito": freeze({**stored.attrs["nito"], **kept.attrs["nito"]})}
    return out
