"""Runs (nito_nb.run / map): the plan, the runner against the simulator on loopback (a flaky one
too), the shared backoff, stop, and the results computed by the frame's own metrics."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import nito_nb
from nito_nb._runs import plan as _plan
from nito_nb._runs.backoff import Backoff


def _sim(**options: Any) -> dict[str, Any]:
    return {"sim": {"tps": 0, "ttft_ms": 0, **options}}


# -- the plan (pure) ----------------------------------------------------------------------------


def test_keys_are_stable_and_depend_on_model_messages_params_and_repeat() -> None:
    messages = [{"role": "user", "content": "hi"}]
    key = _plan.request_key("m", messages, {"temperature": 0}, 0)
    assert key == _plan.request_key("m", [{"content": "hi", "role": "user"}], {"temperature": 0}, 0)
    others = {
        _plan.request_key("n", messages, {"temperature": 0}, 0),
        _plan.request_key("m", [{"role": "user", "content": "ho"}], {"temperature": 0}, 0),
        _plan.request_key("m", messages, {"temperature": 1}, 0),
        _plan.request_key("m", messages, {"temperature": 0}, 1),
    }
    assert key not in others and len(others) == 4


def test_plan_is_rows_times_models_times_repeats_and_sends_a_duplicate_once() -> None:
    df = pd.DataFrame({"text": ["a", "b", "a"]}, index=["x", "y", "z"])
    plan = _plan.plan(df, template="Say {text}", models=["m1", "m2"], repeats=2, params={})
    assert len(plan.cells) == 3 * 2 * 2
    assert len(plan.requests) == 2 * 2 * 2  # rows x and z are the same request
    assert plan.requests[0].messages == [{"role": "user", "content": "Say a"}]
    assert [c[0] for c in plan.cells[:4]] == ["x"] * 4


def test_the_template_uses_the_safe_interpolation_not_str_format() -> None:
    df = pd.DataFrame({"text": ["hello"], "n": [1234567]})
    plan = _plan.plan(
        df,
        template='{text!r} {n:,} {{literal}} as JSON {"a": 1} {text.__class__}',
        models=["m"],
        repeats=1,
        params={},
    )
    assert (
        plan.requests[0].messages[0]["content"]
        == "'hello' 1,234,567 {literal} as JSON {\"a\": 1} {text.__class__}"
    )


def test_a_missing_column_is_one_clear_error_before_anything_is_sent() -> None:
    df = pd.DataFrame({"text": ["a"]})
    with pytest.raises(
        nito_nb.ConfigurationError, match=r"\{title\}.*no such column.*the DataFrame has text"
    ):
        nito_nb.run(df, template="{title}: {text}", model="sim/chat", progress=False)
    with pytest.raises(nito_nb.ConfigurationError, match="needs template"):
        nito_nb.run(df, model="sim/chat", progress=False)


def test_a_parameter_that_is_not_json_is_refused_before_sending() -> None:
    with pytest.raises(nito_nb.ConfigurationError, match="temperature= is not JSON"):
        nito_nb.run(["a"], model="sim/echo", temperature=object(), progress=False)


def test_an_unexpected_failure_ends_the_run_with_its_message(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:  # a bug below the runner, say
        raise RuntimeError("boom")

    monkeypatch.setattr(nito_nb.AsyncClient, "stream", broken)
    run = nito_nb.run(["a", "b"], model="sim/echo", progress=False)
    run.wait(timeout=30)
    assert isinstance(run.error, RuntimeError) and "boom" in str(run.error)
    assert capsys.readouterr().err.count("nito: the run stopped: boom") == 1


def test_inputs_strings_lists_series_and_message_lists() -> None:
    one = _plan.plan("hi", template=None, models=["m"], repeats=1, params={})
    assert [c[0] for c in one.cells] == [0]
    conversation = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert (
        _plan.plan(conversation, template=None, models=["m"], repeats=1, params={})
        .requests[0]
        .messages
        == conversation
    )
    series = pd.Series(["a", "b"], index=[10, 20], name="word")
    plan = _plan.plan(series, template="{word}/{value}", models=["m"], repeats=1, params={})
    assert [r.messages[0]["content"] for r in plan.requests] == ["a/a", "b/b"]
    assert [r.row for r in plan.requests] == [10, 20]
    with pytest.raises(nito_nb.ConfigurationError, match="repeats"):
        _plan.plan("hi", template=None, models=["m"], repeats=0, params={})


# -- the backoff (pure) -------------------------------------------------------------------------


def test_a_429_pauses_everything_for_retry_after_and_halves_the_limit_once_per_burst() -> None:
    backoff = Backoff(16)
    assert backoff.rate_limited(now=100.0, retry_after=2.0) == 2.0
    assert backoff.limit == 8 and backoff.wait(100.5) == pytest.approx(1.5)
    backoff.rate_limited(now=100.1, retry_after=2.0)  # the same burst: no second halving
    assert backoff.limit == 8
    assert backoff.wait(102.2) == 0
    backoff.rate_limited(now=103.0, retry_after=None)  # a new burst, no Retry-After: exponential
    assert backoff.limit == 4 and backoff.wait(103.0) > 0
    for _ in range(20):
        backoff.succeeded()
    assert backoff.limit == 16  # ramped back, never above the concurrency


# -- runs on the simulator ----------------------------------------------------------------------


@pytest.mark.spawns
def test_run_results_hold_one_unit_per_column_like_the_frame_and_the_snapshot(
    tmp_path: Any,
) -> None:
    # sim/replay plays a real recording whose chunks hold several tokens (K = 27, usage N = 228);
    # sim/chat is asked for no usage. Results, frame metrics and snapshots use the same names.
    recording = str(Path(__file__).parent / "data" / "real" / "openai-content-1.sse")
    run = nito_nb.run(
        ["x"],
        model=["sim/replay", "sim/chat"],
        progress=False,
        store=str(tmp_path / "s"),
        sim={"replay": recording, "tps": 400},
        stream_options={"include_usage": False},
    )
    run.wait(timeout=60)
    assert run.error is None
    results = run.results().set_index("model")
    for gone in ("output_tokens", "n_chunks", "itl_per_chunk", "itl_per_token", "tokens_source"):
        assert gone not in results.columns
    packed, bare = results.loc["sim/replay"], results.loc["sim/chat"]
    assert (packed["n_token_chunks"], packed["n_output_tokens"]) == (27, 228)
    assert packed["tpot"] == pytest.approx(packed["itl"] * 26 / 227)  # per token, not per chunk
    assert (
        pd.isna(bare["n_output_tokens"]) and pd.isna(bare["tpot"]) and pd.isna(bare["output_tps"])
    )
    assert bare["n_token_chunks"] > 2 and bare["output_chunks_per_s"] > 0 and bare["itl"] > 0
    with nito_nb.open_store(tmp_path / "s") as store:
        metrics = store.frame().nito.metrics()
        for _, row in results.iterrows():
            m = metrics.loc[row["key"]]
            for name in (
                "itl",
                "tpot",
                "output_tps",
                "output_chunks_per_s",
                "n_token_chunks",
                "n_output_tokens",
            ):
                assert (pd.isna(row[name]) and pd.isna(m[name])) or row[name] == pytest.approx(
                    m[name]
                ), name
            snap = store.streams(row["key"]).snapshot()
            assert snap.n_token_chunks == row["n_token_chunks"]
            assert snap.output_chunks_per_s == pytest.approx(row["output_chunks_per_s"])
            assert snap.n_output_tokens == (
                None if pd.isna(row["n_output_tokens"]) else row["n_output_tokens"]
            )
            assert snap.output_tps == (
                None if pd.isna(row["output_tps"]) else pytest.approx(row["output_tps"])
            )
    from nito_nb._runs.progress import panel_model

    rates = {m["model"]: m["rate"] for m in panel_model(run.stats())["rows"]}
    assert "tok/s" not in rates["sim/chat"] and "tok/s" in rates["sim/replay"]  # was "0 tok/s"
    summary = run.summary()
    assert pd.isna(summary.loc["sim/chat", "output_tps_mean"])  # no usage: no tokens per second
    assert summary.loc["sim/chat", "output_chunks_per_s_mean"] == pytest.approx(
        bare["output_chunks_per_s"]
    )
    assert summary.loc["sim/replay", "output_tps_mean"] == pytest.approx(packed["output_tps"])


def test_run_results_use_the_frames_metrics_and_keep_every_column() -> None:
    prompts = [f"prompt {i}" for i in range(12)]
    run = nito_nb.run(
        prompts, model=["sim/chat", "sim/echo"], concurrency=5, progress=False, **_sim()
    )
    assert run.wait() is run and run.done
    results = run.results()
    for column in (
        "key",
        "row",
        "model",
        "repeat",
        "status",
        "content",
        "reasoning",
        "n_tool_calls",
        "finish_reason",
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "ttfb",
        "ttft",
        "e2e",
        "itl",
        "tpot",
        "output_tps",
        "output_chunks_per_s",
        "n_token_chunks",
        "n_output_tokens",
        "error_code",
        "error_message",
        "attempts",
        "started_at",
        "run_id",
    ):
        assert column in results.columns
    assert len(results) == 24 and set(results["status"]) == {"done"}
    assert results["key"].is_unique and set(results["run_id"]) == {run.run_id}
    metrics = run.frame().nito.metrics()
    for name in ("ttft", "e2e", "itl", "output_tps", "output_chunks_per_s"):
        assert results.set_index("key")[name].astype(float).to_dict() == pytest.approx(
            metrics[name].astype(float).to_dict(), nan_ok=True
        )
    echo = results[results["model"] == "sim/echo"].sort_values("row")
    assert list(echo["content"]) == prompts
    summary = run.summary()
    assert list(summary.index) == ["sim/chat", "sim/echo"] and list(summary["ok"]) == [12, 12]
    assert nito_nb.last() is run


def test_started_at_is_the_first_attempts_send_not_the_wait_for_a_slot() -> None:
    # Open loop at 100/s with one slot, three paced streams: each request waits for the one before
    # it (the send delay). started_at was
    # taken before that wait, at the scheduled moment.
    run = nito_nb.run(
        ["a", "b", "c"],
        model="sim/chat",
        rate=100,
        max_requests=3,
        concurrency=1,
        progress=False,
        sim={"tps": 100, "ttft_ms": 0},
        max_tokens=20,
    )
    run.wait(timeout=60)
    results = run.results().sort_values("started_at")
    starts = results["started_at"].tolist()
    e2e = results["e2e"].tolist()
    for i in range(2):
        waited = (starts[i + 1] - starts[i]).total_seconds()
        assert waited >= 0.5 * e2e[i], (waited, e2e[i])  # it started after the one before it


def test_map_is_aligned_with_a_shuffled_index_and_na_where_a_request_failed() -> None:
    df = pd.DataFrame({"text": [f"row {i}" for i in range(30)]}, index=[f"r{i}" for i in range(30)])
    df = df.sample(frac=1, random_state=3)
    answers = nito_nb.map(
        df,
        template="{text}",
        model="sim/echo",
        progress=False,
        **_sim(fail_rate=0.3, fail_status="error", fail_attempts=99, seed=5),
    )
    run = nito_nb.last()
    assert list(answers.index) == list(df.index)
    results = run.results().set_index("row")
    failed = set(results.index[results["status"] != "done"])
    assert failed and len(failed) < 30
    for label, text in df["text"].items():
        if label in failed:
            assert answers[label] is pd.NA
        else:
            assert answers[label] == text


def test_a_run_can_be_awaited_in_a_running_event_loop() -> None:
    async def main() -> Any:
        run = nito_nb.run(["a", "b", "c"], model="sim/echo", progress=False, **_sim())
        return await run

    run = asyncio.run(main())
    assert len(run.results()) == 3


def test_429s_slow_the_run_and_every_request_is_accounted_for() -> None:
    prompts = [f"q{i}" for i in range(40)]
    run = nito_nb.run(
        prompts,
        model="sim/echo",
        concurrency=8,
        progress=False,
        **_sim(fail_rate=0.3, fail_status=429, retry_after=0.05, seed=21),
    )
    results = run.wait().results()
    assert len(results) == 40 and set(results["status"]) == {"done"}
    retried = results[results["attempts"] > 1]
    assert len(retried) > 0 and set(retried["attempts"]) == {2}
    assert run.n_attempts == int(results["attempts"].sum()) == 40 + len(retried)
    assert run.backoff.n_rate_limited == len(retried)


def test_retries_are_bounded_and_counted() -> None:
    run = nito_nb.run(
        ["a"],
        model="sim/echo",
        max_retries=2,
        progress=False,
        **_sim(fail_rate=1, fail_status=503, fail_attempts=99, seed=22),
    )
    row = run.wait().results().iloc[0]
    assert row["status"] == "failed" and row["attempts"] == 3 and row["error_code"] == "503"


def test_a_401_stops_the_run_at_once_with_one_message(capsys: pytest.CaptureFixture[str]) -> None:
    run = nito_nb.run(
        [f"q{i}" for i in range(200)],
        model="sim/echo",
        concurrency=4,
        progress=False,
        **_sim(fail_rate=1, fail_status=401, fail_attempts=99, seed=23),
    )
    run.wait()
    assert isinstance(run.error, nito_nb.AuthenticationError)
    assert run.n_attempts <= 8  # the requests already on their way, not 200
    assert capsys.readouterr().err.count("nito: the run stopped") == 1
    assert set(run.results()["status"]) <= {"failed", "stopped"}


@pytest.mark.parametrize(("fault", "status"), [("error", "error"), ("drop", "truncated")])
def test_mid_stream_faults_are_results_with_partial_content_never_retried(
    fault: str, status: str
) -> None:
    run = nito_nb.run(
        ["a b c d e f g h i j k l m n o p"],
        model="sim/echo",
        progress=False,
        **_sim(fail_rate=1, fail_status=fault, fail_attempts=99, seed=24),
    )
    row = run.wait().results().iloc[0]
    assert row["status"] == status and row["attempts"] == 1
    assert row["content"] and row["content"] != "a b c d e f g h i j k l m n o p"


def test_stop_ends_the_run_and_records_in_flight_requests_as_stopped() -> None:
    run = nito_nb.run(
        [f"q{i} " + "word " * 200 for i in range(20)],
        model="sim/echo",
        concurrency=4,
        progress=False,
        sim={"tps": 100, "ttft_ms": 0},
    )
    deadline = time.monotonic() + 30
    while not run._dispatcher.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    run.stop()
    run.wait(timeout=10)
    results = run.results()
    stopped = results[results["status"] == "stopped"]
    assert 0 < len(stopped) <= 4 and len(results) < 20
    assert all(len(c) > 0 for c in stopped["content"])  # what arrived is kept
    assert all(math.isfinite(t) for t in stopped["ttft"])


# -- progress ------------------------------------------------------------------------------------


def _stats(n_requests: int) -> dict[str, Any]:
    model = {
        "model": "<b>m</b>",
        "total": n_requests,
        "finished": n_requests // 2,
        "ok": n_requests // 2,
        "in_flight": 3,
        "errors": {"failed 429": 2},
        "ttft_p50": 0.2,
        "ttft_p90": 0.4,
        "itl_p50": 0.01,
        "itl_p90": 0.02,
        "requests_per_s": 5.0,
        "tokens_per_s": 100.0,
        "tokens": 10,
        "cost": 0.5,
    }
    return {
        "models": [model],
        "finished": n_requests // 2,
        "total": n_requests,
        "skipped": 0,
        "elapsed": 3.0,
        "eta": 3.0,
        "attempts": 1,
        "retries": 0,
        "rate_limited": 0,
        "limit": 16,
        "state": "running",
        "error": None,
    }


def test_the_panel_does_not_grow_with_the_number_of_requests_and_escapes_text() -> None:
    from nito_nb._runs.progress import panel_html, panel_model

    small, large = panel_html(panel_model(_stats(10))), panel_html(panel_model(_stats(1_000_000)))
    assert len(large) - len(small) < 40  # only the digits of the counts differ
    assert "<b>m</b>" not in small and "&lt;b&gt;m&lt;/b&gt;" in small
    assert "failed 429: 2" in small and "5/10" in small


def test_the_panels_stop_button_stops_the_run() -> None:
    from nito_nb._runs.progress import Panel

    run = nito_nb.run(
        [f"q{i} " + "word " * 200 for i in range(12)],
        model="sim/echo",
        concurrency=3,
        progress=False,
        sim={"tps": 100, "ttft_ms": 0},
    )
    panel = Panel(run)
    deadline = time.monotonic() + 30
    while not run._dispatcher.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    panel.button.click()
    run.wait(timeout=10)
    panel.update()
    assert run.stopped and "stopped" in set(run.results()["status"])
    assert "stopped:" in panel.html.value


def test_outside_jupyter_one_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    run = nito_nb.run(["a", "b"], model="sim/echo", **_sim())
    run.wait()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nito: done: 2/2 requests")


def test_a_slow_writer_holds_the_workers_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from nito_nb._runs import writer as _record

    real = _record.result_rows
    waiting: list[int] = []

    def slow(*args: Any, **kwargs: Any) -> Any:  # a writer slower than the network
        time.sleep(0.05)
        return real(*args, **kwargs)

    monkeypatch.setattr(_record, "result_rows", slow)
    monkeypatch.setattr(_record, "MAX_WAITING", 5)  # read as the loop thread's workers ask (full())
    monkeypatch.setattr(_record, "BATCH_SIZE", 2)
    run = nito_nb.run(
        [f"q{i}" for i in range(60)], model="sim/echo", concurrency=4, progress=False, **_sim()
    )
    while not run.done:
        waiting.append(run._writer.waiting)
        time.sleep(0.002)
    assert len(run.wait().results()) == 60
    # the limit, plus what the workers had in flight when it was reached
    assert max(waiting) <= 5 + 4


def test_every_429_slows_the_run_also_the_last_one() -> None:
    run = nito_nb.run(
        ["a"],
        model="sim/echo",
        max_retries=1,
        progress=False,
        **_sim(fail_rate=1, fail_status=429, retry_after=0.01, fail_attempts=99, seed=25),
    )
    row = run.wait().results().iloc[0]
    assert row["status"] == "failed" and row["attempts"] == 2
    assert run.backoff.n_rate_limited == 2


# -- result rows agree with the frame -------------------------------------------------------------

_RECORDINGS = sorted((Path(__file__).parent / "data" / "real").glob("*.sse"))


def _timed(path: Path) -> nito_nb.Stream:
    """The recording fed event by event, 7 ms apart, through its StreamSource."""
    source = nito_nb.StreamSource({"model": "recorded"})
    s = source.stream
    t0 = s.log.t0_ns
    events = [
        e + b"\n\n" for e in path.read_bytes().replace(b"\r\n", b"\n").split(b"\n\n") if e.strip()
    ]
    source.set_response(200, {"content-type": "text/event-stream"}, t0 + 3_000_000)
    for i, event in enumerate(events):
        source.feed(event, t0 + (i + 1) * 7_000_000)
    source.end(t0 + (len(events) + 2) * 7_000_000)
    return s


@pytest.mark.parametrize("path", _RECORDINGS, ids=[p.stem for p in _RECORDINGS])
def test_result_rows_agree_with_the_frames_metrics_on_every_recording(path: Path) -> None:
    # A run's rows come from the Stream (the frame of every batch halved a run's rate); the
    # figures must be the frame's, value for value (docs/METRICS.md's one definition each).
    from nito_nb._runs.results import stream_metrics

    s = _timed(path)
    df = nito_nb.frame({"k": s})
    expected = {**df.nito.metrics().loc["k"].to_dict(), **df.nito.usage().loc["k"].to_dict()}
    got = stream_metrics(s)
    for name, value in got.items():
        want = expected[name]
        if pd.isna(want):
            assert value is None, (name, value)
        elif isinstance(value, float):
            assert value == pytest.approx(want, rel=1e-9, abs=1e-12), name
        else:
            assert value == want, (name, value, want)


def test_sent_at_is_the_streams_own_send_as_with_the_worker_engines() -> None:
    # One definition for every engine: the first attempt's stream's own send (its t0, taken as
    # the request is built), on the run's timeline; the engine's earlier time, after the slot,
    # was a turn or two of the loop before it.
    run = nito_nb.run(
        [f"p{i}" for i in range(6)],
        model="sim/chat",
        rate=200,
        max_requests=6,
        progress=False,
        sim={"tps": 0, "ttft_ms": 0},
        max_tokens=3,
    )
    run.wait(timeout=60)
    results = run.results().set_index("key")
    for key, stream in run._writer.kept_streams().items():
        assert results.loc[key, "sent_at"] == pytest.approx(
            stream.log.t0_ns / 1e9 - run._dispatcher.t0, abs=1e-9
        )
        assert results.loc[key, "send_delay"] >= 0


# -- a resumed run's results (issue 30) ---------------------------------------------------------


@pytest.mark.spawns  # a store's events are written by a helper process
def test_a_resumed_run_holds_every_key_of_its_store_and_a_done_store_its_full_results(
    tmp_path: Path,
) -> None:
    store = str(tmp_path / "runs")
    prompts = [f"prompt {i}" for i in range(10)]
    flaky = _sim(fail_rate=0.3, fail_status="error", seed=31)
    first = nito_nb.run(prompts, model="sim/echo", store=store, progress=False, **flaky).wait(
        timeout=60
    )
    not_done = set(first.results().query("status != 'done'")["key"])
    assert 0 < len(not_done) < 10
    # Resumed: it sends the ones not done, and its results hold all ten (59 of 100 rows before).
    second = nito_nb.run(prompts, model="sim/echo", store=store, progress=False, **flaky).wait(
        timeout=60
    )
    results = second.results()
    # the plan's order
    assert len(results) == 10 and list(results["key"]) == list(first.results()["key"])
    assert set(results.loc[~results["done_before"], "key"]) == not_done
    done_before = results[results["done_before"]]
    assert set(done_before["run_id"]) == {first.run_id} and set(done_before["status"]) == {"done"}
    assert list(done_before["row"]) == [
        i for i in range(10) if first.results()["key"][i] not in not_done
    ]
    assert done_before["content"].notna().all() and done_before["ttft"].notna().all()
    assert second.summary().loc["sim/echo", "n"] == 10
    # A store with every key done: its full results, not "done: 0/0", an empty summary with no
    # columns (["ttft_p99"] raised KeyError) and a (0, 35) results().
    third = nito_nb.run(prompts, model="sim/echo", store=store, progress=False, **flaky).wait(
        timeout=60
    )
    assert third.total == 0  # nothing sent
    assert len(third.results()) == 10 and third.results()["done_before"].all()
    assert list(third.results().columns) == list(first.results().columns)
    summary = third.summary()
    assert summary.loc["sim/echo", "ok"] == 10 and summary.loc["sim/echo", "ttft_p99"] > 0
    stats = third.stats()
    assert (stats["finished"], stats["total"], stats["skipped"]) == (10, 10, 10)
    from nito_nb._runs.progress import panel_model

    assert panel_model(stats)["head"].startswith("done: 10/10 requests")
    assert "10/10" in repr(third)
    assert list(
        nito_nb.map(prompts, model="sim/echo", store=store, progress=False, **flaky)
    ) == list(results["content"])  # map takes the answers done before from the results too


def test_a_summary_has_the_same_columns_empty_or_not() -> None:
    from nito_nb._runs.results import LoadInfo, results_frame, summary

    run = nito_nb.run(["a", "b"], model="sim/echo", progress=False, **_sim()).wait(timeout=60)
    empty = summary(results_frame([]))
    assert list(empty.columns) == list(run.summary().columns) and empty.index.name == "model"
    assert dict(empty.dtypes) == dict(run.summary().dtypes)
    assert empty["ttft_p99"].empty
    load = nito_nb.run(
        ["a"], model="sim/echo", rate=20, duration=0.3, progress=False, **_sim()
    ).wait(timeout=60)
    info = LoadInfo(rate=20.0, start=0.0, end=0.3, slo={}, client=load.client.report())
    assert list(summary(results_frame([]), load=info).columns) == list(load.summary().columns)


def test_a_model_that_is_not_found_is_sent_no_more_and_says_why(
    capfd: pytest.CaptureFixture[str],
) -> None:
    prompts = [f"prompt {i}" for i in range(20)]
    run = nito_nb.run(
        prompts, model=["sim/echo", "sim/ecoh"], concurrency=2, progress=False, **_sim()
    )
    run.wait(timeout=60)
    results = run.results()
    good, bad = results[results["model"] == "sim/echo"], results[results["model"] == "sim/ecoh"]
    assert len(good) == 20 and set(good["status"]) == {"done"}  # the other model is not held back
    # Only the first few were sent (those in flight when the third 404 came back), not all 20.
    assert 3 <= len(bad) <= 3 + 1  # dispatch.NOT_FOUND_LIMIT, plus the other one in flight
    assert set(bad["status"]) == {"failed"} and set(bad["error_code"]) == {"404"}
    assert run.n_attempts == 20 + len(bad)
    assert (
        list(run.refused_models) == ["sim/ecoh"] and "not found" in run.refused_models["sim/ecoh"]
    )
    lines = [line for line in capfd.readouterr().err.splitlines() if "sim/ecoh" in line]
    assert len(lines) == 1  # one line, with the gateway's own words
    assert (
        lines[0].startswith("nito: no more requests sent to 'sim/ecoh'")
        and "Model 'sim/ecoh' not found" in lines[0]
    )
    from nito_nb._runs.progress import panel_model

    assert "not sent to 'sim/ecoh': not found (404)" in panel_model(run.stats())["head"]


def test_a_model_that_answered_before_is_not_refused_for_later_404s() -> None:
    prompts = [f"p{i}" for i in range(12)]
    # the first is done, the last four are 404s
    flaky = _sim(fail_rate=0.5, fail_status=404, seed=4)
    run = nito_nb.run(
        prompts, model="sim/echo", concurrency=1, max_retries=0, progress=False, **flaky
    ).wait(timeout=60)
    status = list(run.results()["status"])
    assert status[0] == "done" and status[-4:] == ["failed"] * 4 and len(status) == 12
    assert run.refused_models == {}
    # A model that exists but whose every answer is 404 is refused like a misspelled one.
    gone = nito_nb.run(
        prompts,
        model="sim/echo",
        concurrency=1,
        progress=False,
        **_sim(fail_rate=1, fail_status=404, fail_attempts=99),
    ).wait(timeout=60)
    assert len(gone.results()) == 3 and list(gone.refused_models) == ["sim/echo"]


def test_several_models_in_one_string_as_in_the_magic() -> None:
    run = nito_nb.run(
        ["hi"], model="sim/echo, sim/chat", progress=False, max_tokens=3, **_sim()
    ).wait(timeout=60)
    assert list(run.results()["model"]) == ["sim/echo", "sim/chat"] and set(
        run.results()["status"]
    ) == {"done"}
    with pytest.raises(nito_nb.ConfigurationError, match="map takes one model"):
        nito_nb.map(["hi"], model="sim/echo,sim/chat")


def test_the_writer_thread_is_woken_per_batch_not_per_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each finished request woke the writer's thread (a queue.SimpleQueue put): a thread switch
    # and two GIL hand-overs on the sending loop's thread, per request. Its thread goes round
    # once per wake (and settles the collector each time): count the rounds.
    from nito_nb._runs import gc as run_gc

    rounds = 0
    settle = run_gc.settle

    def counted() -> None:
        nonlocal rounds
        rounds += 1
        settle()

    monkeypatch.setattr(run_gc, "settle", counted)
    run = nito_nb.run(
        [f"q{i}" for i in range(120)],
        model="sim/chat",
        concurrency=16,
        progress=False,
        sim={"tps": 0, "ttft_ms": 0},
    )
    run.wait(timeout=120)
    results = run.results()
    assert len(results) == 120 and results["status"].eq("done").all()
    # before: one round per request (121); now one per batch or WAKE_SECONDS (below 30 s)
    assert rounds < len(results), rounds
