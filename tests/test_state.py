"""StreamState alone (``_core/state.py``), with no Stream and no HTTP: the source operations, the
callbacks handed back by end(), the owner held weakly, and reads fed in odd splits from several
threads while others take snapshots, under a thread switch every microsecond."""

from __future__ import annotations

import gc
import json
import random
import re
import threading
import weakref

import nito_nb
from nito_nb._core.errors import MidStreamError, NitoError
from nito_nb._core.state import StreamState

N_FRAGMENTS = 300
FEEDERS = 3
SNAPSHOT_TAKERS = 3


def _event(delta: dict[str, str]) -> bytes:
    body = {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()


def _fragment(i: int) -> str:
    # 2-, 3- and 4-byte UTF-8 characters, so that odd splits cut inside them.
    return f"<{i}·é€😀>"


def _body() -> tuple[bytes, str, str]:
    """A body of numbered fragments, content and reasoning in turn; the expected texts."""
    parts, content, reasoning = [], "", ""
    for i in range(N_FRAGMENTS):
        kind = ("content", "reasoning")[i % 2]
        parts.append(_event({kind: _fragment(i)}))
        if kind == "content":
            content += _fragment(i)
        else:
            reasoning += _fragment(i)
    return b"".join(parts) + b"data: [DONE]\n\n", content, reasoning


def _odd_splits(body: bytes, seed: int = 12) -> list[bytes]:
    rng = random.Random(seed)
    pieces, at = [], 0
    while at < len(body):
        size = rng.choice((1, 2, 3, 5, 7, 11, 13, 29))
        pieces.append(body[at : at + size])
        at += size
    return pieces


def stress(state: StreamState, body: bytes, content: str, reasoning: str) -> list[str]:
    """Feed ``body`` in odd splits from FEEDERS threads taking turns (so the bytes arrive in order
    but each read comes from another thread) while SNAPSHOT_TAKERS threads take snapshots and read
    the log; return what any of them saw torn or lost."""
    pieces = _odd_splits(body)
    problems: list[str] = []
    turn = [0]
    turns = threading.Condition()
    stop = threading.Event()
    pattern = re.compile(r"<(\d+)·é€😀>")

    def feed(k: int) -> None:
        for i in range(k, len(pieces), FEEDERS):
            with turns:
                turns.wait_for(lambda i=i: turn[0] == i)  # type: ignore[misc]
            state.feed(pieces[i], i + 1)
            with turns:
                turn[0] += 1
                turns.notify_all()

    def take() -> None:
        while not stop.is_set():
            snap = state.snapshot()
            text = snap.content + snap.reasoning
            numbers = sorted(int(n) for n in pattern.findall(text))
            # One moment: the fragments seen are the first m sent, whole, and the counts agree.
            if numbers != list(range(len(numbers))) or snap.n_chunks != len(numbers):
                problems.append(f"torn: fragments {numbers[-3:]}, {snap.n_chunks} chunks")
            if snap.n_token_chunks != snap.n_chunks or "\ufffd" in text:
                problems.append(
                    f"half a fragment: {text[-12:]!r}, {snap.n_token_chunks} token chunks"
                )
            if not (content.startswith(snap.content) and reasoning.startswith(snap.reasoning)):
                problems.append(
                    f"not what was sent: {snap.content[-12:]!r} / {snap.reasoning[-12:]!r}"
                )
            with state.lock:
                logged, n_events = state.log.body, len(state.log)
            if not body.startswith(logged) or n_events < snap.n_chunks:
                problems.append(
                    f"log: {len(logged)} bytes, {n_events} events, {snap.n_chunks} chunks"
                )

    takers = [threading.Thread(target=take) for _ in range(SNAPSHOT_TAKERS)]
    feeders = [threading.Thread(target=feed, args=(k,)) for k in range(FEEDERS)]
    for thread in takers + feeders:
        thread.start()
    for thread in feeders:
        thread.join()
    stop.set()
    for thread in takers:
        thread.join()
    return problems


def test_reads_in_odd_splits_from_several_threads_lose_and_tear_nothing(
    switch_every_microsecond: None,
) -> None:
    body, content, reasoning = _body()
    state = StreamState({"model": "m"})
    problems = stress(state, body, content, reasoning)
    assert not problems, problems[:5]
    assert state.end(len(body)) == []  # it ended here: no callback was waiting
    final = state.snapshot()
    assert final.status == "done" and final.done and final.anomalies == ()
    assert final.content == content and final.reasoning == reasoning
    assert final.n_chunks == N_FRAGMENTS and final.n_token_chunks == N_FRAGMENTS
    assert state.log.body == body  # every byte, in order
    times = list(state.log.times_ns())
    assert times == sorted(times) and len(times) == N_FRAGMENTS + 1


def test_end_hands_back_the_callbacks_once_and_a_second_end_does_nothing() -> None:
    state = StreamState({"model": "m"})
    state.feed(_event({"content": "Hi"}), 10)
    assert state.add_callback(print)
    state.feed(b'data: {"error": {"message": "overloaded", "code": 503}}\n\n', 20)
    callbacks = state.end(30)
    assert callbacks == [print] and state.callbacks == []
    assert state.status == "error" and isinstance(state.exception, MidStreamError)
    assert state.exception.stream is state  # no owner: the state itself
    assert "overloaded (code 503)" in str(state.exception)
    assert state.end(40, status="stopped") is None and state.status == "error"
    assert not state.add_callback(print)  # ended: the caller runs it at once
    assert state.feed_live(_event({"content": " more"}), 50) is None  # a reader stops here
    assert state.snapshot().content == "Hi"


def test_fail_http_redacts_the_key_and_new_attempt_keeps_the_clock() -> None:
    key = "sk-secret-key-123456"
    state = StreamState({"model": "m"})
    t0 = state.log.t0_ns
    state.protect(key)
    error = state.fail_http(
        429,
        {"retry-after": "2", "x-echo": key},
        f'{{"error": {{"message": "slow, {key}"}}}}'.encode(),
        t0 + 5,
    )
    assert state.status == "failed" and state.exception is error and error.retry_after == 2  # type: ignore[attr-defined]
    assert (
        key not in str(error)
        and key.encode() not in state.log.body
        and "x-echo" not in state.log.headers
    )
    state.new_attempt()
    assert state.status == "waiting" and state.exception is None and len(state.log) == 0
    assert state.log.attempts == 2 and state.log.t0_ns == t0
    failed = state.fail(NitoError(f"refused {key}"))
    assert key not in str(failed) and state.log.end["status"] == "failed"


def test_the_state_does_not_keep_its_stream_alive() -> None:
    # The reader thread of a sync Stream may hold the state; the Stream must still go when nobody
    # holds it (its collection closes it), without waiting for the cycle collector.
    stream = nito_nb.Stream({"model": "m"})
    state, ref = stream._state, weakref.ref(stream)
    state.feed(_event({"content": "Hi"}), 10)
    assert state.owner is stream
    gc.disable()
    try:
        del stream
        assert ref() is None and state.owner is None
    finally:
        gc.enable()
    assert state.snapshot().content == "Hi"
