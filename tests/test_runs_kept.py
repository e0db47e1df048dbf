"""What a run without a store keeps of each ended request (issue 32): its Stream frozen
(``_recordings.freeze_ended``: the state pickled and compressed against the batch's first one),
a few KiB where a live ended Stream was some hundred small objects; and every Stream the run
gives back (``run.frame()``, ``run.rescore()``'s scores) reads exactly as the one that ended."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest
from pandas.testing import assert_frame_equal
from test_log import same

import nito_nb
from nito_nb._recordings import FREEZE_BELOW, Frozen
from nito_nb._stream_results import listen_to_ends

SIM = {"tps": 0, "ttft_ms": 0}


def _run(prompts: list[str], model: Any, **params: Any) -> nito_nb.Run:
    run = nito_nb.run(prompts, model=model, concurrency=8, progress=False, sim=SIM, **params)
    run.wait(timeout=120)
    return run


def reads(stream: Any) -> dict[str, Any]:
    """What a user reads of an ended Stream, beyond ``test_log.same``."""
    return {
        "type": type(stream),
        "message": stream.message,
        "messages": stream.messages,
        "tool_calls": stream.tool_calls,
        "logprobs": stream.logprobs,
        "choices": [(c.content, c.finish_reason, c.logprobs) for c in stream.choices],
        "snapshot": stream.snapshot(),
        "headers": stream.log.headers,
        "t0_wall": stream.t0_wall,
        "attempts": stream.attempts,
        "connect": stream.connect,
        "role": stream.role,
        "id": stream.id,
        "anomalies": [(a.kind, a.message, a.seq, a.count) for a in stream.anomalies],
        "exception": repr(stream.exception),
        "parsed": stream.parsed,
        "parse_error": str(stream.parse_error),
        "refusal": stream.refusal,
        "audio": stream.audio,
        "unread_parts": stream._state.acc.unread_parts,
        "repr": repr(stream),
        "raise_errors": stream.raise_errors,
        "route": stream._route,
        "saved": list(stream.log.to_lines()),
    }


@pytest.mark.parametrize(
    ("model", "params"),
    [
        # answers of a few KiB: frozen (a longer one is kept as it is: below)
        ("sim/tools", {}),
        ("sim/chat", {"logprobs": True, "top_logprobs": 2, "max_tokens": 40}),
        ("sim/reasoning", {"max_tokens": 40}),
        ("sim/mistral", {"max_tokens": 40}),
        ("sim/websearch", {"max_tokens": 40}),
        ("sim/error-midstream", {}),  # ended with an exception: kept as it is
        (
            "sim/chat",
            {"schema": {"type": "object", "properties": {"a": {"type": "integer"}}}},
        ),
    ],
)
def test_every_stream_a_run_gives_back_reads_as_the_one_that_ended(
    model: str, params: dict[str, Any]
) -> None:
    ended: list[Any] = []
    stop = listen_to_ends(ended.append)  # the Streams themselves, as they end
    try:
        run = _run([f"question {i}" for i in range(6)], model, **params)
    finally:
        stop()
    originals = {stream.request["messages"][0]["content"]: stream for stream in ended}
    assert len(originals) == 6
    kept = run._writer.kept_streams()
    assert len(kept) == 6
    for stream in kept.values():
        original = originals[stream.request["messages"][0]["content"]]
        # kept as it is only when it ended with an exception (whose .stream it is)
        assert (stream is original) == (original.exception is not None)
        same(original, stream)
        assert reads(stream) == reads(original)
        assert_frame_equal(stream.frame(), original.frame())
    # the run's frame (of the logs thawed alone) is the frame of the Streams that ended
    by_key = {key: originals[s.request["messages"][0]["content"]] for key, s in kept.items()}
    assert_frame_equal(run.frame(), nito_nb.frame(by_key))
    # Read twice, each time new Streams: the run keeps them frozen, never thawed for good.
    again = run._writer.kept_streams()
    portable = [key for key, stream in kept.items() if stream.exception is None]
    assert all(again[key] is not kept[key] for key in portable)
    frozen = [one for one in run._writer._streams.values() if isinstance(one, Frozen)]
    assert len(frozen) == len(portable)


def test_a_long_answer_is_kept_as_it_is_with_its_log_packed() -> None:
    # Its Stream's objects weigh a fifth of its body: freezing would cost the writer more than
    # the memory it gives back (FREEZE_BELOW).
    run = _run(["a long answer"], "sim/chat")
    kept = run._writer.kept_streams()
    (stream,) = kept.values()
    assert len(stream.log.body) >= FREEZE_BELOW and stream.log.packed
    assert run._writer.kept_streams() == kept  # the same Stream each time
    assert not any(isinstance(one, Frozen) for one in run._writer._streams.values())


def test_a_rescore_reads_the_kept_streams_as_they_ended() -> None:
    ended: list[Any] = []
    stop = listen_to_ends(ended.append)
    try:
        run = _run([f"question {i}" for i in range(5)], "sim/tools")
    finally:
        stop()
    seen: dict[str, Any] = {}

    def calls(row: dict[str, Any], stream: Any) -> float:
        seen[stream.request["messages"][0]["content"]] = reads(stream)
        return float(len(stream.tool_calls))

    run.rescore({"calls": calls})
    assert len(seen) == 5
    for original in ended:
        assert seen[original.request["messages"][0]["content"]] == reads(original)
    assert run.results()["score.calls"].tolist() == [2.0] * 5


def test_a_run_without_a_store_keeps_a_few_kib_per_tools_request() -> None:
    # A live ended sim/tools Stream was some hundred small objects: 11.8 KB traced per request
    # (13 KiB of RSS: bench/bench_runs_floor.py), twice its 6 KB body. Frozen: about 3.1 KB,
    # the plan's request and the result row included.
    _run(["warm"] * 20, "sim/tools")  # the imports, the client, the layouts' caches
    gc.collect()
    n = 300
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        run = _run([f"request {i} of many" for i in range(n)], "sim/tools")
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    kept = sum(stat.size_diff for stat in after.compare_to(before, "filename")) / n
    assert len(run.results()) == n
    assert kept < 5_000, f"{kept:,.0f} bytes kept per request"
    # Each one is a Frozen Stream: one bytes object of its log and state, about 0.8 KB.
    frozen = list(run._writer._streams.values())
    assert all(isinstance(one, Frozen) for one in frozen)
    assert max(len(one._pickled) for one in frozen) < 1_500
