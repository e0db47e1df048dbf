"""nito_nb._core.metrics: docs/METRICS.md's definitions, one each (the frame and the views call them)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nito_nb._core import metrics


def test_itl_tpot_and_output_tps_follow_the_definitions() -> None:
    assert metrics.itl(1.0, 3.0, 5) == pytest.approx(0.5)  # (t_last - t_first) / (K - 1)
    assert metrics.itl(1.0, 1.0, 1) is None  # K < 2
    assert metrics.tpot(1.0, 3.0, 5, 21) == pytest.approx(0.1)  # / (N - 1)
    assert metrics.tpot(1.0, 3.0, 1, 21) is None and metrics.tpot(1.0, 3.0, 5, 1) is None
    assert metrics.output_tps(20, 1.0, 3.0) == pytest.approx(10.0)  # N / (e2e - ttft)
    assert metrics.output_tps(20, 3.0, 3.0) is None and metrics.output_tps(20, None, 3.0) is None
    assert metrics.output_tps(20, math.nan, 3.0) is None  # untimed: undefined, not an error
    assert metrics.output_chunks_per_s(5, 1.0, 3.0) == pytest.approx(2.5)  # K / (e2e - ttft)
    assert metrics.output_chunks_per_s(5, 3.0, 3.0) is None


def test_per_token_metrics_need_usage_and_never_fall_back_to_chunks() -> None:
    # Without usage N is unknown: the per-token figures are undefined, not the chunk figures.
    assert metrics.tpot(1.0, 3.0, 5, None) is None
    assert metrics.output_tps(None, 1.0, 3.0) is None
    assert metrics.output_chunks_per_s(5, 1.0, 3.0) == pytest.approx(2.5)  # still defined


def test_n_output_tokens_is_usage_or_nothing() -> None:
    assert metrics.n_output_tokens({"completion_tokens": 42}) == 42
    assert metrics.n_output_tokens({"completion_tokens": 0}) == 0
    assert metrics.n_output_tokens({"completion_tokens": None}) is None
    assert metrics.n_output_tokens({"completion_tokens": True}) is None
    assert metrics.n_output_tokens({"prompt_tokens": 3}) is None
    assert metrics.n_output_tokens(None) is None


@pytest.mark.parametrize("q", [0.0, 0.5, 0.9, 0.99, 1.0])
def test_quantiles_interpolate_linearly_like_numpy(q: float) -> None:
    gaps = [0.3, 0.1, 0.7, 0.2, 0.05, 1.5]
    assert metrics.quantile(gaps, q) == pytest.approx(float(np.quantile(gaps, q)))
    assert metrics.quantile([], q) is None and metrics.quantile([math.nan], q) is None


def test_token_gaps_are_between_consecutive_events() -> None:
    assert metrics.token_gaps([1.0, 1.5, 3.0]) == pytest.approx([0.5, 1.5])
    assert metrics.token_gaps([1.0]) == []
