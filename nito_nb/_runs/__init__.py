"""Runs: many prompts × models × repeats from one call, with progress, a store and resume.

    run = nito_nb.run(df, template="Summarise: {text}", model=["sim/chat", "z-ai/glm-5.2"],
                      store="runs/summaries")
    run.wait(); run.results(); run.summary(); run.frame()
    df["summary"] = nito_nb.map(df, template="Summarise: {text}", model="sim/chat")
    nito_nb.open_store("runs/summaries").sql("select model, quantile_cont(ttft, 0.99) from requests group by model")

See docs/RUNS.md. Pure parts: ``_plan`` (requests and keys), ``_backoff`` (the shared 429
backoff), ``_results`` (rows and summary); shells: ``_api`` (``run``, ``map``), ``_runner`` (the
Run and its loop thread), ``_record`` (its writer thread), ``_store`` (DuckDB), ``_progress``
(panel, stderr line). This module only re-exports (tests/test_architecture.py).
"""

from __future__ import annotations

from .api import map, run
from .runner import Run
from .store import Store, StoreBusy, StoreError, open_store
from .sweep import Sweep, sweep

__all__ = ["Run", "Store", "StoreBusy", "StoreError", "Sweep", "map", "open_store", "run", "sweep"]
