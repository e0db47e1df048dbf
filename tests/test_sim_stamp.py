"""The simulator's ground truth for client benchmarks: `"sim": {"stamp": true}` adds the server's
send time (time.perf_counter_ns) to every chunk, so arrival − send is the client's timing error."""

from __future__ import annotations

import json

import pytest

import nito_nb


def _stamps(stream: nito_nb.Stream) -> list[tuple[int, int]]:
    """(arrival ns, sim_sent_ns) of every JSON data event of the stream."""
    out = []
    for t_ns, raw in zip(stream.log.times_ns(), stream.log.raw_slices(), strict=True):
        for line in raw.split(b"\n"):
            if line.startswith(b"data: {"):
                out.append((t_ns, json.loads(line[6:])["sim_sent_ns"]))
    return out


def test_every_chunk_carries_its_send_time_on_the_clients_clock() -> None:
    stream = nito_nb.stream(
        "hi",
        model="sim/chat",
        sim={"stamp": True, "tps": 200, "ttft_ms": 20},
        stream_options={"include_usage": True},
    )
    stream.wait()
    assert stream.status == "done" and not stream.anomalies  # an extra field is not an anomaly
    stamps = _stamps(stream)
    assert len(stamps) == stream.log.body.count(b"data: {") >= stream.n_chunks  # every JSON event
    sent = [s for _, s in stamps]
    assert sent == sorted(sent) and len(set(sent)) == len(sent)  # one write per chunk
    errors = [a - s for a, s in stamps]
    assert min(errors) >= 0  # nothing arrives before it was sent: one clock
    # paced at 200 tokens/s: the sender's gaps are the pacing, the client's error far below it
    span = sent[-1] - sent[0]
    assert span > 10 * (sorted(errors)[len(errors) // 2])


def test_without_stamp_nothing_is_added() -> None:
    stream = nito_nb.stream("hi", model="sim/chat", sim={"tps": 0})
    stream.wait()
    assert b"sim_sent_ns" not in stream.log.body


def test_a_bad_stamp_option_is_one_clear_error() -> None:
    with pytest.raises(nito_nb.BadRequestError, match=r"sim\.stamp must be true or false"):
        nito_nb.stream("hi", model="sim/chat", sim={"stamp": "yes"}).wait()
