"""Runs: many prompts × models × repeats from one call, with progress, a store and resume.

    run = nito_nb.run(df, template="Summarise: {text}", model=["sim/chat", "z-ai/glm-5.2"],
                      store="runs/summaries")
    run.wait(); run.results(); run.summary(); run.frame()
    df["summary"] = nito_nb.map(df, template="Summarise: {text}", model="sim/chat")
    nito_nb.open_store("runs/summaries").sql("select model, quantile_cont(ttft, 0.99) from requests group by model")

See docs/RUNS.md. Pure parts: ``plan`` (requests and keys), ``backoff`` (the shared 429
backoff), ``results`` (rows and summary); shells: ``api`` (``run``, ``map``), ``runner`` (the
Run, over its three collaborators: ``dispatch`` its sender, ``writer`` its results, ``stats`` its
counts), ``store`` (DuckDB: reading; ``store_writer`` writing, ``store_open`` opening),
``progress`` (panel, stderr line). This module only re-exports (tests/test_architecture.py).
"""

from __future__ import annotations

from .api import map, run
from .runner import Run
from .store import Store, open_store
from .store_errors import StoreBusy, StoreError
from .sweep import Sweep, sweep

__all__ = ["Run", "Store", "StoreBusy", "StoreError", "Sweep", "map", "open_store", "run", "sweep"]
