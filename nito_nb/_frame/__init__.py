"""The pandas adapter: chunk logs as DataFrames (``build``), their dtypes (``dtypes``), the
``df.nito`` accessor (``accessor``: metrics, tool calls, usage, texts) and its plots (``plots``).

Importing this package imports pandas and registers the accessor; ``import nito_nb`` does not
(``nito_nb.frame`` and ``Stream.frame()`` import it on first use). The chunks are read by the
engine's one chunk reader (``nito_nb._core.chunk``), so a frame and a Stream agree by construction;
the metrics are those of ``nito_nb._core.metrics`` (docs/METRICS.md).
"""

from __future__ import annotations

from .accessor import NitoAccessor
from .build import events_rows, frame
from .dtypes import COLUMNS
from .inputs import EndedStream

__all__ = ["COLUMNS", "EndedStream", "NitoAccessor", "events_rows", "frame"]
