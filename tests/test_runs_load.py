"""Load runs (rate=..., docs/LOAD.md): the open-loop schedule (pure), a run against the
simulator on loopback that keeps to it, warmup/cooldown, SLO goodput, the stop on an error rate,
the client's own lag, and sweeps."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np
import pandas as pd
import pytest

import nito_nb
from nito_nb._runs import client_load as _client_load
from nito_nb._runs import dispatch as _dispatch
from nito_nb._runs import results as _results
from nito_nb._runs.gate import Gate
from nito_nb._runs.schedule import Schedule, phase


def _sim(**options: Any) -> dict[str, Any]:
    return {"sim": {"tps": 0, "ttft_ms": 0, **options}}


# -- the schedule (pure) ------------------------------------------------------------------------


def test_a_constant_schedule_is_evenly_spaced_and_ends_at_duration_or_max_requests() -> None:
    offsets = Schedule(rate=4, duration=2).offsets()
    assert offsets == [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]
    assert len(Schedule(rate=1000, duration=10, max_requests=7).offsets()) == 7
    assert len(Schedule(rate=100, max_requests=5).offsets()) == 5


def test_a_poisson_schedule_has_the_rate_on_average_and_burstiness_sets_its_spread() -> None:
    def gaps(burstiness: float) -> np.ndarray:
        return np.diff(
            Schedule(rate=50, kind="poisson", burstiness=burstiness, max_requests=20_000).offsets()
        )

    poisson = gaps(1.0)
    assert abs(poisson.mean() - 1 / 50) / (1 / 50) < 0.05
    # exponential: coefficient of variation 1
    assert abs(poisson.std() / poisson.mean() - 1.0) < 0.05
    assert gaps(0.25).std() > 1.5 * poisson.std() > 2 * gaps(4.0).std()  # CV = 1/sqrt(shape)
    # computed up front, from a seed: the same schedule every time
    assert (
        Schedule(rate=5, kind="poisson", duration=3).offsets()
        == Schedule(rate=5, kind="poisson", duration=3).offsets()
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rate": 0, "duration": 1}, "rate is requests per second"),
        ({"rate": 1}, "needs duration=SECONDS or max_requests=N"),
        ({"rate": 1, "duration": 1, "kind": "bursty"}, "schedule must be one of constant, poisson"),
        ({"rate": 1, "duration": 1, "burstiness": 0.5}, "burstiness applies to schedule='poisson'"),
        ({"rate": 1, "duration": 1, "warmup": -1}, "warmup is in seconds"),
        ({"rate": 1, "duration": 1, "warmup": float("nan")}, "warmup is in seconds"),  # it ran
        ({"rate": 1, "duration": 1, "cooldown": float("inf")}, "cooldown is in seconds"),
        (
            {"rate": 1, "duration": 1, "kind": "poisson", "burstiness": float("inf")},
            "burstiness is the gamma shape",
        ),
        # An OverflowError's traceback, when max_requests was set too.
        (
            {"rate": 1, "duration": float("inf"), "max_requests": 3},
            r"duration is in seconds, a finite number .* "
            r"leave it out and set max_requests=N",
        ),
    ],
)
def test_bad_schedules_are_one_clear_error(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(nito_nb.ConfigurationError, match=match):
        Schedule(**kwargs)


def test_bad_load_options_are_refused_before_anything_is_sent() -> None:
    with pytest.raises(nito_nb.ConfigurationError, match="add rate="):
        nito_nb.run(["a"], model="sim/chat", duration=5, progress=False)
    with pytest.raises(nito_nb.ConfigurationError, match="slo: unknown metric 'latency'"):
        nito_nb.run(["a"], model="sim/chat", rate=1, duration=1, slo={"latency": 1}, progress=False)
    with pytest.raises(nito_nb.ConfigurationError, match="leave no time to measure"):
        nito_nb.run(
            ["a"], model="sim/chat", rate=1, duration=2, warmup=1, cooldown=1, progress=False
        )
    # Taken and ignored before: the user meant a worker engine and got none.
    for option in ({"workers": 2}, {"per_worker": 8}):
        name = next(iter(option))
        with pytest.raises(
            nito_nb.ConfigurationError, match=f"^{name}= is for engine='processes' or engine='ray'"
        ):
            nito_nb.run(["a"], model="sim/chat", progress=False, **option)


def test_phases() -> None:
    assert [phase(t, 1.0, 1.0, 5.0) for t in (0.0, 0.99, 1.0, 3.99, 4.0)] == [
        "warmup",
        "warmup",
        "measure",
        "measure",
        "cooldown",
    ]


def test_goodput_counts_done_requests_within_every_bound() -> None:
    import pandas as pd

    results = pd.DataFrame(
        {
            "status": ["done", "done", "done", "error"],
            "ttft": [0.1, 0.5, 0.1, 0.1],
            "itl": [0.01, 0.01, math.nan, 0.01],
        }
    )
    assert _results.meets_slo(results, {"ttft": 0.2, "itl": 0.02}).tolist() == [
        True,
        False,
        False,
        False,
    ]


def test_the_verdict_warns_only_when_the_client_skewed_a_result() -> None:
    verdict = _client_load.verdict
    assert verdict({"client_lag_p99": 0.001, "client_cpu_max": 0.3}, 0.2) == (False, "")
    # A 20 ms lag and a full core beside a median TTFT of 1 s: timings 2% off, nothing changed (an
    # ordinary batch on a shared machine said "the client was the bottleneck" every time).
    assert verdict({"client_lag_p99": 0.020, "client_cpu_max": 0.95}, 1.0) == (False, "")
    assert verdict({"client_lag_p99": 0.020, "client_cpu_max": 0.95}, None) == (
        False,
        "",
    )  # nothing ended yet
    # Beside a median TTFT of 100 ms: 20%, said in one line, with the CPU share as the cause.
    bound, note = verdict({"client_lag_p99": 0.020, "client_cpu_max": 0.95}, 0.1)
    assert (
        bound
        and "its event loop lagged 20.0 ms at p99 (bound 10 ms; 10% of the median TTFT, 100 ms)"
        in note
    )
    assert "95% of a core" in note and "\n" not in note and "simulator" not in note
    assert verdict({"client_lag_p99": 0.004}, 0.001) == (
        False,
        "",
    )  # under 5 ms: noise, whatever the TTFT
    # An open loop the client itself sent late (the gateway's 429 pauses are left out of the figure).
    bound, note = verdict({"client_lag_p99": 0.001, "client_send_late_p99": 0.012}, 0.05)
    assert bound and "it sent requests 12.0 ms late at p99, 429 pauses aside (bound 5 ms;" in note
    assert verdict({"client_send_late_p99": 0.012}, 0.5) == (False, "")  # 2.4% of 500 ms
    # The embedded simulator runs in the client's process: its work counts there, and the note says so.
    bound, note = verdict(
        {"client_lag_p99": 0.020, "client_cpu_max": 0.5, "client_runs_simulator": True}, 0.1
    )
    assert bound and "also runs the sim/ simulator" in note and "python -m nito_nb.sim" in note
    assert verdict({"client_lag_p99": 0.001, "client_runs_simulator": True}, 0.1) == (False, "")


def test_the_verdict_says_when_the_lag_was_waiting_for_a_cpu() -> None:
    # The share of the lag's tail (samples at or above its p99) that was run-queue wait.
    calm = [(0.0001, 0.0)] * 99
    assert _client_load.waiting_share([*calm, (0.020, 0.018)]) == pytest.approx(0.9)
    assert _client_load.waiting_share([*calm, (0.020, 0.0)]) == 0
    assert math.isnan(_client_load.waiting_share([])) and math.isnan(
        _client_load.waiting_share([(0.0, 0.0)])
    )
    busy = {"client_lag_p99": 0.020, "client_cpu_max": 0.5}
    bound, note = _client_load.verdict({**busy, "client_lag_waiting_cpu": 0.9}, 0.05)
    assert (
        bound
        and "lagged 20.0 ms at p99 (bound 5 ms; 10% of the median TTFT, 50 ms), 90% of it waiting for a CPU"
        in note
    )
    for own_work in (0.2, math.nan):  # the loop's own work, or a kernel that does not say
        bound, note = _client_load.verdict({**busy, "client_lag_waiting_cpu": own_work}, 0.05)
        assert bound and "waiting for a CPU" not in note


def test_a_run_knows_whether_its_process_runs_the_simulator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nito_nb.sim import SimServer

    # A run's sim/ models go to a simulator process of its own (tests/test_sim_process.py)...
    apart = nito_nb.run(["a"], model="sim/chat", rate=10, duration=0.2, progress=False, **_sim())
    apart.wait(timeout=60)
    assert apart.error is None and not apart.client.simulator
    # ... unless it cannot start: then the in-process one serves, and its work counts as the run's.
    monkeypatch.setattr(nito_nb, "_apart_failed", "it cannot start here")
    embedded = nito_nb.run(["a"], model="sim/chat", rate=10, duration=0.2, progress=False, **_sim())
    embedded.wait(timeout=60)
    assert embedded.client.simulator and embedded.client.report()["client_runs_simulator"]
    assert "client_runs_simulator" not in embedded.summary().columns  # a note, not a column
    server = SimServer()
    # here in this process too, but the run cannot know: a base URL is a gateway
    with server as base_url:
        apart = nito_nb.run(
            ["a"],
            model="sim/chat",
            base_url=base_url,
            api_key=server.api_key,
            rate=10,
            duration=0.2,
            progress=False,
            **_sim(),
        )
        apart.wait(timeout=60)
    assert apart.error is None and not apart.client.simulator


# -- against the simulator on loopback ----------------------------------------------------------


def test_an_open_loop_run_sends_on_schedule_not_when_earlier_requests_end() -> None:
    # Each stream lasts ~0.5 s; at 20 requests/s a closed loop of 2 would send ~4/s. Open loop
    # keeps sending on the schedule, so about 10 streams are in flight at once.
    run = nito_nb.run(
        ["a", "b"], model="sim/chat", rate=20, duration=1.0, progress=False, **_sim(ttft_ms=500)
    )
    run.wait(timeout=60)
    assert run.error is None
    r = run.results().sort_values("scheduled_at")
    assert len(r) == 20 and (r["status"] == "done").all()
    assert r["scheduled_at"].tolist() == pytest.approx([i / 20 for i in range(20)])
    assert (r["send_delay"] >= 0).all()
    # sends follow the schedule, not the ends: many requests were in flight at once
    sent, ended = r["sent_at"].to_numpy(), (r["sent_at"] + r["e2e"]).to_numpy()
    in_flight = max(int(((sent <= t) & (t < ended)).sum()) for t in sent)
    assert in_flight >= 5
    # latency from the schedule includes the send delay
    assert (r["ttft_from_schedule"] - r["ttft"] - r["send_delay"]).abs().max() < 1e-9
    assert r["key"].is_unique and set(r["repeat"]) == set(range(10))


def test_the_achieved_rate_is_what_was_sent_and_ended_beside_the_rate_scheduled() -> None:
    # At rate=2000 a client that sent and ended about 376 requests/s read achieved_rate 2000/s:
    # it counted the done requests over the schedule's window. 4,000/s of sim/chat is far past
    # what one client process on loopback ends (376/s here): every request is still sent and
    # done, later and later, and the summary, the panel and the sweep say the rate they ended at.
    from nito_nb._runs.progress import panel_model

    sweep = nito_nb.sweep(
        [f"q{i}" for i in range(50)],
        model="sim/chat",
        rates=[4000],
        duration=0.5,
        progress=False,
        **_sim(),
    )
    [run] = sweep.runs
    assert run.error is None
    r = run.results()
    done = int((r["status"] == "done").sum())
    assert done == len(r) == 2000
    s = run.summary().loc["sim/chat"]
    assert s["rate"] == 4000 and s["achieved_rate"] < s["rate"] / 2  # by a clear factor
    # ... and it is the requests done per second of the time they took, from the first send to
    # the last end (on the run's timeline), within what the spread of the middle 80% allows
    took = (r["sent_at"] + r["e2e"]).max() - r["sent_at"].min()
    assert s["achieved_rate"] == pytest.approx(done / took, rel=0.3)
    assert s["elapsed_s"] > 2 * s["window_s"] and s["achieved_rate"] == pytest.approx(
        done / s["elapsed_s"]
    )
    # the sweep's row and plot
    assert sweep.summary().loc[4000.0, "achieved_rate"] == s["achieved_rate"]
    [model] = run.stats()["models"]
    assert model["scheduled_per_s"] == 4000 and model["achieved_per_s"] == s["achieved_rate"]
    assert panel_model(run.stats())["rows"][0]["rate"].startswith(
        f"achieved {s['achieved_rate']:.1f} req/s of 4000/s scheduled"
    )


def test_warmup_and_cooldown_are_recorded_but_left_out_of_the_summary_with_goodput() -> None:
    run = nito_nb.run(
        ["a"],
        model="sim/chat",
        rate=10,
        duration=2.0,
        warmup=0.5,
        cooldown=0.5,
        slo={"ttft": 60.0},
        progress=False,
        **_sim(),
    )
    run.wait(timeout=60)
    r = run.results()
    assert len(r) == 20
    assert r.groupby("phase").size().to_dict() == {"warmup": 5, "measure": 10, "cooldown": 5}
    s = run.summary().loc["sim/chat"]
    assert s["n"] == 10 and s["window_s"] == pytest.approx(1.0)
    # Kept up with: the rate asked, but for the jitter of the ends (their spread is the measure,
    # _results.elapsed_time; 0.03-0.5% in six runs here)
    assert (
        s["achieved_rate"] == pytest.approx(10.0, rel=0.02) and s["goodput"] == s["achieved_rate"]
    )
    assert (
        s["elapsed_s"] == pytest.approx(s["window_s"], rel=0.02) and s["elapsed_s"] >= s["window_s"]
    )
    # over the measured window, as every percentile
    measured = r[r["phase"] == "measure"]["connect"]
    assert (
        s["connect_p50"] == pytest.approx(measured.median())
        and 0 < s["connect_p99"] < s["ttft_p99"]
    )
    info = run.load_info()
    assert info is not None
    tight = _results.summary(r, dataclasses.replace(info, slo={"ttft": 1e-9}))
    assert tight.loc["sim/chat", "goodput"] == 0.0


def test_the_run_stops_sending_at_an_error_rate(capsys: pytest.CaptureFixture[str]) -> None:
    run = nito_nb.run(
        [f"p{i}" for i in range(40)],
        model="sim/chat",
        rate=40,
        duration=3.0,
        stop_on_error_rate=0.5,
        max_retries=0,
        progress=False,
        **_sim(fail_rate=1.0, fail_status=500),
    )
    run.wait(timeout=60)
    r = run.results()
    assert run.stop_reason is not None and "stop_on_error_rate=0.5" in run.stop_reason
    assert 10 <= len(r) < 120 and (r["status"] == "failed").all()
    assert capsys.readouterr().err.count("nito: the run stopped sending") == 1


def test_a_closed_loop_run_also_stops_sending_at_an_error_rate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # It was taken and ignored without rate=: every request was sent, and the message said none was.
    run = nito_nb.run(
        [f"c{i}" for i in range(80)],
        model="sim/chat",
        concurrency=2,
        stop_on_error_rate=0.5,
        max_retries=0,
        progress=False,
        **_sim(fail_rate=1.0, fail_status=500),
    )
    run.wait(timeout=60)
    r = run.results()
    assert run.stop_reason is not None and "stop_on_error_rate=0.5" in run.stop_reason
    # at most the two in flight after it
    assert 10 <= len(r) <= 10 + 2 and (r["status"] == "failed").all()
    assert capsys.readouterr().err.count("nito: the run stopped sending") == 1


@pytest.mark.spawns
@pytest.mark.parametrize("engine", ["asyncio", "processes"])
def test_a_retried_request_waited_from_its_schedule_through_its_failed_attempt(engine: str) -> None:
    # ttft and e2e are the last attempt's; the *_from_schedule columns must count from the schedule
    # through the first attempt's 429 and its 0.4 s Retry-After, not just add the first send's delay.
    options = {"engine": "processes", "workers": 1} if engine == "processes" else {}
    # (a prompt of its own: the simulator counts a request's attempts across runs, by its body)
    run = nito_nb.run(
        [f"r {engine}"],
        model="sim/chat",
        rate=5,
        max_requests=1,
        progress=False,
        **options,
        **_sim(fail_rate=1.0, fail_status=429, fail_attempts=1, retry_after=0.4),
    )
    row = run.wait(timeout=120).results().iloc[0]
    assert row["status"] == "done" and row["attempts"] == 2
    assert row["send_delay"] < 0.3  # the first attempt left on time
    assert row["ttft_from_schedule"] - row["ttft"] >= 0.4  # the second left after the Retry-After
    assert row["e2e_from_schedule"] - row["e2e"] == pytest.approx(
        row["ttft_from_schedule"] - row["ttft"]
    )


def test_every_request_of_an_open_loop_is_made_ready_ahead_of_its_time_the_first_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The schedule's origin is SEND_LEAD ahead: the first request, due at 0, was sent at once, late
    # by its hand-over to a worker (2.8-4.8 ms), while every other one was made ready ahead.
    import asyncio

    from nito_nb._stream_source import AsyncStreamSource

    lead: list[float] = []
    real = AsyncStreamSource.send_at

    def spy(self: AsyncStreamSource, when: float) -> None:
        lead.append(when - asyncio.get_running_loop().time())
        real(self, when)

    monkeypatch.setattr(AsyncStreamSource, "send_at", spy)
    run = nito_nb.run(
        [f"f{i}" for i in range(4)],
        model="sim/echo",
        rate=20,
        max_requests=4,
        progress=False,
        sim={"tps": 0},
    )
    r = run.wait(timeout=60).results()
    assert (r["status"] == "done").all() and r["scheduled_at"].min() == 0
    assert len(lead) == 4 and min(lead) > 0, lead  # the first was at or past its time: <= 0


def test_the_client_monitor_samples_the_loop_and_sees_a_blocked_loop() -> None:
    import asyncio
    import time

    monitor = _client_load.ClientMonitor()

    async def main() -> None:
        task = asyncio.ensure_future(monitor.sample())
        await asyncio.sleep(0.2)
        time.sleep(0.1)  # the loop is blocked: the next sample is ~100 ms late
        await asyncio.sleep(0.6)
        task.cancel()

    asyncio.run(main())
    report = monitor.report()
    assert len(monitor.lags) > 10 and len(monitor.cpu) >= 1
    assert (
        report["client_lag_max"] >= 0.09
        and report["client_lag_max"] > 10 * report["client_lag_p50"]
    )


def _sample_for(seconds: float, blocked: float = 0.0, nice: bool = False) -> dict[str, Any]:
    """A ClientMonitor's report after sampling a loop in a thread of its own for ``seconds``:
    its loop blocked once by ``blocked`` s of sleep, or (``nice``) the thread at the lowest CPU
    priority, pinned to one CPU beside a process that spins there, and kept busy by its own
    1 ms callbacks (a thread that mostly sleeps is let back on its CPU within a tick)."""
    import asyncio
    import os
    import subprocess
    import sys
    import threading

    monitor = _client_load.ClientMonitor()
    spinner = None

    async def busy() -> None:
        while True:
            end = time.perf_counter() + 0.001
            while time.perf_counter() < end:
                pass
            await asyncio.sleep(0)

    async def main() -> None:
        task = asyncio.ensure_future(monitor.sample())
        work = asyncio.ensure_future(busy()) if nice else None
        await asyncio.sleep(0.1)
        if blocked:
            time.sleep(blocked)
        await asyncio.sleep(seconds)
        task.cancel()
        if work is not None:
            work.cancel()

    def thread() -> None:
        nonlocal spinner
        if nice:
            cpu = min(os.sched_getaffinity(0))
            os.sched_setaffinity(0, {cpu})  # this thread only
            spinner = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass",
                ]
            )
            # after: a child inherits it
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        try:
            asyncio.run(main())
        finally:
            if spinner is not None:
                spinner.kill()
                spinner.wait()

    t = threading.Thread(target=thread)
    t.start()
    t.join()
    return monitor.report(ttft_p50=0.010)  # beside a 10 ms TTFT, any lag past 5 ms is judged


def _kernel_gives_run_queue_wait() -> bool:
    clock = _client_load.RunQueueClock.open()
    if clock is None:
        return False
    clock.close()
    return True


@pytest.mark.spawns
@pytest.mark.skipif(
    not _kernel_gives_run_queue_wait(), reason="the kernel gives no run-queue wait (Linux only)"
)
def test_the_client_monitor_tells_a_busy_machine_from_a_busy_loop() -> None:
    # A loop whose thread had no CPU (lowest priority, one CPU shared with a spinning process)
    # lagged waiting in the run queue; a loop blocked by its own call (here a sleep) did not.
    starved = _sample_for(1.0, nice=True)
    assert starved["client_lag_p99"] > 0.005, starved
    assert starved["client_lag_waiting_cpu"] > 0.8, starved
    assert "waiting for a CPU other processes held" in starved["client_note"]
    blocked = _sample_for(0.5, blocked=0.1)
    assert blocked["client_lag_max"] >= 0.09
    assert blocked["client_lag_waiting_cpu"] < 0.2, blocked
    assert "waiting for a CPU" not in blocked["client_note"]


def test_a_load_runs_summary_reports_the_client() -> None:
    run = nito_nb.run(["a"], model="sim/chat", rate=20, duration=0.5, progress=False, **_sim())
    run.wait(timeout=60)
    s = run.summary().loc["sim/chat"]
    for name in (
        "client_lag_p50",
        "client_lag_p99",
        "client_lag_max",
        "client_cpu_max",
        "client_lag_waiting_cpu",
        "client_bound",
        "send_delay_p99",
        "tpot_p99",
        "ttft_from_schedule_p99",
    ):
        assert name in s.index
    assert s["client_lag_p99"] >= 0


def test_units_are_explicit_chunks_and_tokens() -> None:
    # With usage, tpot is per token (usage's N) and itl per chunk (K); without usage the token
    # columns of a load run's results and summary are NA instead of chunk counts.
    for usage in (True, False):
        run = nito_nb.run(
            ["a"],
            model="sim/chat",
            max_requests=1,
            rate=1,
            progress=False,
            stream_options={"include_usage": usage},
            **_sim(tps=1000),
        )
        run.wait(timeout=60)
        row = run.results().iloc[0]
        summary = run.summary().loc["sim/chat"]
        k = int(row["n_token_chunks"])
        assert k >= 2 and row["itl"] > 0 and row["output_chunks_per_s"] > 0
        if usage:
            n = int(row["n_output_tokens"])
            assert n == row["completion_tokens"]
            assert row["tpot"] == pytest.approx(row["itl"] * (k - 1) / (n - 1))
            assert summary["output_tokens_per_s"] == pytest.approx(n / summary["elapsed_s"])
        else:
            assert (
                pd.isna(row["n_output_tokens"])
                and pd.isna(row["tpot"])
                and pd.isna(row["output_tps"])
            )
            assert math.isnan(summary["output_tokens_per_s"]) and math.isnan(summary["tpot_p50"])


@pytest.mark.spawns
def test_a_sweep_runs_each_rate_in_turn_and_summarises_and_plots_one_row_per_rate(
    tmp_path: Any,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    sweep = nito_nb.sweep(
        ["a", "b"],
        model="sim/chat",
        rates=[5, 20],
        duration=0.6,
        store=str(tmp_path / "s"),
        slo={"ttft": 60.0},
        progress=False,
        **_sim(),
    )
    assert sweep.rates == [5, 20] and all(run.done for run in sweep.runs)
    s = sweep.summary()
    assert s.index.tolist() == [5.0, 20.0]
    assert s["n"].tolist() == [3, 12] and (s["ok"] == s["n"]).all()
    assert s.loc[20.0, "achieved_rate"] > s.loc[5.0, "achieved_rate"]
    assert {
        "goodput",
        "ttft_p99",
        "itl_p99",
        "tpot_p99",
        "e2e_p99",
        "error_rate",
        "send_delay_p99",
    } <= set(s.columns)
    fig = sweep.plot()
    assert len(fig.axes) == 3 and fig.axes[0].get_xlabel() == "achieved rate (requests/s)"
    fig = sweep.plot("send_delay")  # one name (it was read letter by letter: KeyError 's_p50')
    assert [ax.get_title() for ax in fig.axes] == ["send_delay"]
    with pytest.raises(
        nito_nb.ConfigurationError, match=r"plot takes metrics among ttft, itl, .* not 'latency'"
    ):
        sweep.plot(["ttft", "latency"])
    # both rates share the store, each under its own run id, no row replaced by the other
    with nito_nb.open_store(tmp_path / "s") as store:
        counts = store.sql("select run_id, count(*) n from requests group by run_id order by n")
    assert counts["n"].tolist() == [3, 12]
    assert nito_nb.last() is sweep.runs[-1]


@pytest.mark.parametrize(
    ("values", "scale"),
    [
        ([0.402, 0.423, 0.403, 0.404, 0.404, 0.408], "linear"),  # a gateway far from saturation
        ([0.05, 0.08, 0.1, 0.5, 1.2, 9.0], "log"),  # past it: decades apart
    ],
)
def test_a_sweep_plot_labels_latencies_as_plain_seconds(values: list[float], scale: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from nito_nb._runs.sweep import _latency_axis

    fig, ax = plt.subplots()
    ax.plot(range(len(values)), values)
    _latency_axis(ax, np.array(values))
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert ax.get_yscale() == scale and len(labels) >= 3
    # was "4.075 × 10^-1" (log over a narrow span) or an offset "+4.02e-1"
    assert all(label.replace(".", "", 1).replace("\u2212", "").isdigit() for label in labels), (
        labels
    )
    assert ax.yaxis.get_offset_text().get_text() == ""
    plt.close(fig)


@pytest.mark.spawns
@pytest.mark.parametrize("stored", [False, True])
def test_a_sweep_gives_every_chunk_of_every_rate_in_one_frame(tmp_path: Any, stored: bool) -> None:
    store = {"store": str(tmp_path / "s")} if stored else {}
    sweep = nito_nb.sweep(
        ["a", "b"],
        model="sim/chat",
        rates=[5, 20],
        duration=0.6,
        progress=False,
        max_tokens=6,
        **store,
        **_sim(),
    )
    results = sweep.results()
    df = sweep.frame()
    assert set(df["stream"].astype(str)) == set(results["key"]) and len(results) == 15
    assert df.columns[:2].tolist() == ["stream", "rate"]
    assert dict(df.groupby("stream", observed=True)["rate"].first()) == dict(
        zip(results["key"], results["rate"], strict=True)
    )
    # Exact per-chunk times for every request, and the frame's metrics agree with the results.
    metrics = df.nito.metrics()
    by_key = results.set_index("key")
    assert np.allclose(metrics.loc[by_key.index, "ttft"], by_key["ttft"])
    assert np.allclose(metrics.loc[by_key.index, "connect"], by_key["connect"], equal_nan=True)
    assert df.groupby("stream", observed=True)["t"].count().min() >= 6
    # What df.attrs says of each stream, from the store as from the Streams themselves.
    described = df.attrs["nito"][results["key"].iloc[0]]
    assert described["status"] == "done" and described["request"]["model"] == "sim/chat"
    assert described["connect_ns"] > 0 and described["status_code"] == 200


def test_sweep_needs_rates() -> None:
    with pytest.raises(nito_nb.ConfigurationError, match="sweep needs rates"):
        nito_nb.sweep(["a"], model="sim/chat", rates=[], duration=1)
    # Every rate is checked before the first is sent: a bad last one ended the sweep at its turn,
    # its Sweep never returned, and the rates before it were lost.
    t = time.perf_counter()
    for bad in (-1, None, "x", float("inf")):
        with pytest.raises(
            nito_nb.ConfigurationError,
            match=f"rate is requests per second, a number > 0, not {bad!r}",
        ):
            nito_nb.sweep(
                ["a"], model="sim/chat", rates=[2, 4, bad], duration=2, progress=False, **_sim()
            )
    assert time.perf_counter() - t < 5
    # was a TypeError
    with pytest.raises(nito_nb.ConfigurationError, match=r"sweep takes rates=\[...\].* not 5"):
        nito_nb.sweep(["a"], model="sim/chat", rates=5, duration=1)


def test_the_panel_says_when_the_client_is_the_bottleneck() -> None:
    from nito_nb._runs.progress import panel_model

    stats = {
        "state": "running",
        "finished": 1,
        "total": 2,
        "elapsed": 1.0,
        "eta": None,
        "skipped": 0,
        "retries": 0,
        "rate_limited": 0,
        "limit": 16,
        "error": None,
        "models": [],
        "stop_reason": None,
    }
    calm = {"client_lag_p99": 0.001, "client_cpu_max": 0.2}
    busy = {"client_lag_p99": 0.030, "client_cpu_max": 0.97}
    for client in (calm, busy):
        client["client_bound"], client["client_note"] = _client_load.verdict(client, 0.1)
    assert "client loop lag p99 1.0 ms, CPU 20%" in panel_model({**stats, "client": calm})["head"]
    assert "⚠" not in panel_model({**stats, "client": calm})["head"]
    head = panel_model({**stats, "client": busy})["head"]
    assert (
        "⚠ the client skewed the timings: its event loop lagged 30.0 ms at p99" in head
        and "97% of a core" in head
    )


def test_a_runs_live_stats_carry_the_clients_recent_health() -> None:
    run = nito_nb.run(["a"], model="sim/chat", rate=20, duration=0.5, progress=False, **_sim())
    run.wait(timeout=60)
    client = run.stats()["client"]
    assert client["client_lag_p99"] >= 0 and isinstance(client["client_bound"], bool)


def test_a_schedule_too_large_to_compute_up_front_is_refused() -> None:
    with pytest.raises(nito_nb.ConfigurationError, match="more than 1,000,000 requests"):
        Schedule(rate=1e6, duration=60)
    assert len(Schedule(rate=1e9, duration=60, max_requests=3).offsets()) == 3


@pytest.mark.spawns
def test_a_store_written_before_the_load_columns_gains_them(tmp_path: Any) -> None:
    from nito_nb._runs.store_writer import StoreWriter

    path = tmp_path / "old"
    writer = StoreWriter(path)
    for name in ("scheduled_at", "send_delay", "phase", "worker", "node", "n_output_tokens"):
        writer.con.execute(f'ALTER TABLE requests DROP COLUMN "{name}"')
    writer.close()
    run = nito_nb.run(
        ["a"], model="sim/chat", rate=5, max_requests=2, store=str(path), progress=False, **_sim()
    )
    run.wait(timeout=60)
    assert run.error is None
    with nito_nb.open_store(path) as store:
        r = store.results()
    assert len(r) == 2 and r["send_delay"].notna().all() and set(r["worker"]) == {"local"}


@pytest.mark.spawns
def test_a_store_failing_on_the_last_batch_ends_the_run_with_its_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from nito_nb._runs.store_writer import StoreWriter

    def broken(self: Any, *args: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(StoreWriter, "write", broken)
    run = nito_nb.run(["a"], model="sim/echo", store=str(tmp_path / "s"), progress=False, **_sim())
    run.wait(timeout=30)  # hung forever when the failure came after the loop thread had ended
    # the store's failures: tests/test_runs_store_failures.py
    assert isinstance(run.error, nito_nb.StoreError)
    assert "nito: the run stopped: the run store " in capsys.readouterr().err
    assert "failed (OSError: disk full)" in str(run.error)
    assert run.results()["status"].tolist() == ["done"]  # kept in memory: the store took nothing


def test_a_sweep_outside_a_kernel_raises_a_bad_option_of_any_rate() -> None:
    # Two requests make a 2 s schedule at 1/s but a 0.5 s one at 4/s: warmup=1 leaves nothing to
    # measure at the second rate only, which raises in the caller (it was kept in a background thread).
    with pytest.raises(nito_nb.ConfigurationError, match="leave no time to measure"):
        nito_nb.sweep(
            ["a"],
            model="sim/chat",
            rates=[1, 4],
            max_requests=2,
            warmup=1,
            progress=False,
            **_sim(),
        )


def _stop_once_sent(run: nito_nb.Run, n: int) -> None:
    """Stop ``run`` shortly after its first ``n`` requests have ended."""
    deadline = time.monotonic() + 60
    while run._stats.n_ended < n and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    run.stop()
    run.wait(timeout=60)


def test_an_open_loop_request_made_ready_ahead_is_sent_at_its_time_and_left_out_if_stopped_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each request is made ready a second ahead (SEND_LEAD, 25 ms in earnest): it is still sent at
    # its time, and one stopped while it waits for it was not sent, so it is not a result.
    monkeypatch.setattr(_dispatch, "SEND_LEAD", 1.0)
    run = nito_nb.run(["a"], model="sim/chat", rate=1, duration=5.0, progress=False, **_sim())
    _stop_once_sent(run, 2)  # at about 1.3 s: the request due at 2 s waits for its time
    r = run.results().sort_values("scheduled_at")
    assert r["scheduled_at"].tolist() == [0.0, 1.0] and (r["status"] == "done").all()
    assert (r["send_delay"] >= 0).all()


def test_requests_waiting_for_a_slot_get_one_each_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # rate=1e9: every request is due at once and waits for one of 3 slots. Each freed slot goes to
    # the next waiter only (an Event woke every waiter on every release: 409,063 wake-ups for
    # 1,000 requests behind 64 slots).
    handed: list[int] = []
    real = Gate._hand_over

    def hand_over(self: Gate) -> None:
        before = len(self.waiting)
        real(self)
        handed.append(before - len(self.waiting))

    monkeypatch.setattr(Gate, "_hand_over", hand_over)
    run = nito_nb.run(
        [f"p{i}" for i in range(30)],
        model="sim/echo",
        rate=1e9,
        max_requests=30,
        concurrency=3,
        progress=False,
        sim={"tps": 0},
    )
    run.wait(timeout=60)
    r = run.results().sort_values("scheduled_at")
    assert len(r) == 30 and (r["status"] == "done").all()
    assert sum(handed) == 27 and max(handed) == 1  # each waiter woken once, one per freed slot
    assert r["sent_at"].is_monotonic_increasing  # first come, first served
    assert run._dispatcher.gate.sending == 0 and not run._dispatcher.gate.waiting


def test_the_achieved_rate_takes_an_on_time_latency_from_each_requests_own_e2e() -> None:
    # Ten requests due over 1 s, each paused 2 s by a 429 before its last attempt took 0.1 s: they
    # ended from 2.1 to 3.0 s. What was ended per second is 10 / (3.0 - 0.0 - 0.1) s, not 10 over
    # the 0.9 s left once the schedule's 2.1 s latencies are taken for on-time ones (11/s).
    from nito_nb._runs.results import elapsed_time

    scheduled = [i / 10 for i in range(10)]
    ended = [s + 2.1 for s in scheduled]
    assert elapsed_time(scheduled, ended, [0.1] * 10, window=1.0) == pytest.approx(2.9)
    # A client that keeps up reads the window: the last request ends one latency after it was due.
    assert elapsed_time(scheduled, [s + 0.1 for s in scheduled], [0.1] * 10, window=1.0) == 1.0
    # A client overloaded from its first request: all waited for a CPU, even the fastest 5% took
    # 8 s, but the first ended 0.1 s after it was due. They ended from 0.1 to 20 s: 20 over 19.9 s,
    # not over the 12 s left once 8 s is taken for an on-time latency (read 1.7x too high).
    scheduled = [i / 10 for i in range(20)]
    ended = [0.1] + [8.0 + i * 12.0 / 18 for i in range(19)]
    latencies = [0.1] + [e - s for s, e in zip(scheduled[1:], ended[1:], strict=True)]
    assert elapsed_time(scheduled, ended, latencies, window=2.0) == pytest.approx(19.9)


# -- the client's warning: only when it changed a result (issue 30) ------------------------------


def test_a_closed_loop_batch_warns_of_the_client_only_past_a_share_of_its_ttft() -> None:
    from nito_nb._runs.progress import panel_model

    run = nito_nb.run(
        [f"q{i}" for i in range(4)],
        model="sim/chat",
        progress=False,
        max_tokens=4,
        sim={"ttft_ms": 200, "tps": 0},
    ).wait(timeout=60)
    assert set(run.results()["status"]) == {"done"}
    # A lag of 8 ms at p99 and a busy core (what a shared machine gives any batch) beside answers
    # whose first token took 200 ms: the timings are 4% off, nothing to warn of (it warned).
    run.client.add([0.008] * 1000, [0.95] * 10)
    head = panel_model(run.stats())["head"]
    assert "client loop lag p99 8.0 ms, CPU 95%" in head and "⚠" not in head
    # 40 ms is 20% of those 200 ms: one line says so.
    run.client.add([0.040] * 1000, [0.95] * 10)
    head = panel_model(run.stats())["head"]
    assert "(⚠ the client skewed the timings: its event loop lagged 40.0 ms at p99 (bound 2" in head
    assert "10% of the median TTFT" in head and "\n" not in head


def test_a_load_run_paused_by_429s_does_not_blame_the_client() -> None:
    # Past a gateway's capacity its 429s pause every send for their Retry-After: the requests
    # leave late, but by the gateway's doing. The summary called the client the bottleneck.
    run = nito_nb.run(
        [f"p{i}" for i in range(10)],
        model="sim/chat",
        rate=10,
        duration=1,
        progress=False,
        max_tokens=4,
        sim={
            "ttft_ms": 200,
            "tps": 0,
            "fail_rate": 0.5,
            "fail_status": 429,
            "retry_after": 1,
            "seed": 30006,
        },
    ).wait(timeout=120)
    s = run.summary().loc["sim/chat"]
    assert run.backoff.n_rate_limited >= 1 and s["send_delay_p99"] > 0.5  # the pauses
    assert not s["client_bound"] and s["client_note"] == "", s["client_note"]
    assert s["client_send_late_p99"] < 0.02, s["client_send_late_p99"]  # the client's own part
