"""The simulator's fault rate (`sim.fail_rate`): which requests fail is a pure function of the
request and its seed; a picked request fails its first `sim.fail_attempts` times."""

from __future__ import annotations

from typing import Any

import pytest

import nito_nb
from nito_nb.sim import _faults, _options, _reply, _scenarios
from nito_nb.sim._request import SimRequest, parse_request


def _request(text: str, **sim: Any) -> SimRequest:
    parsed = parse_request(
        {
            "model": "sim/chat",
            "messages": [{"role": "user", "content": text}],
            "stream": True,
            "sim": sim,
        }
    )
    assert isinstance(parsed, SimRequest)
    return parsed


def test_the_picks_are_deterministic_and_near_the_rate() -> None:
    picks = [_faults.picked_to_fail(_request(f"q{i}", fail_rate=0.2)) for i in range(2000)]
    again = [_faults.picked_to_fail(_request(f"q{i}", fail_rate=0.2)) for i in range(2000)]
    assert picks == again
    assert 0.15 < sum(picks) / len(picks) < 0.25
    assert not any(_faults.picked_to_fail(_request(f"q{i}", fail_rate=0)) for i in range(200))
    assert all(_faults.picked_to_fail(_request(f"q{i}", fail_rate=1)) for i in range(200))


def test_another_seed_picks_other_requests() -> None:
    def picks(seed: int) -> list[bool]:
        return [
            _faults.picked_to_fail(_request(f"q{i}", fail_rate=0.5, seed=seed)) for i in range(200)
        ]

    assert picks(1) != picks(2)


@pytest.mark.parametrize("status", [429, 500, 401])
def test_a_status_fault_is_an_http_error_then_the_answer(status: int) -> None:
    request = _request("x", fail_rate=1, fail_status=status, retry_after=0.25)
    reply = _scenarios.scenario(request, 0, seen=0)
    assert isinstance(reply, _reply.ErrorReply) and reply.status == status
    if status == 429:
        assert reply.headers["Retry-After"] == "0.25"
    # fail_attempts = 1
    assert isinstance(_scenarios.scenario(request, 0, seen=1), _reply.StreamReply)


def test_fail_attempts_keeps_failing() -> None:
    request = _request("x", fail_rate=1, fail_attempts=3)
    assert [
        isinstance(_scenarios.scenario(request, 0, seen=n), _reply.ErrorReply) for n in range(4)
    ] == [True] * 3 + [False]


def test_options_are_validated() -> None:
    for bad in (
        {"fail_rate": 1.5},
        {"fail_status": 200},
        {"fail_status": "boom"},
        {"fail_rate": -1},
    ):
        with pytest.raises(_options.OptionError):
            _options.parse_options(bad, {})


def test_mid_stream_faults_over_loopback() -> None:
    error = nito_nb.stream(
        "x",
        model="sim/chat",
        raise_errors=False,
        sim={"fail_rate": 1, "fail_status": "error", "seed": 11},
    )
    error.wait(raise_errors=False)
    assert error.status == "error" and error.content and error.error["code"] == 502
    drop = nito_nb.stream(
        "x",
        model="sim/chat",
        raise_errors=False,
        sim={"fail_rate": 1, "fail_status": "drop", "seed": 12},
    )
    drop.wait(raise_errors=False)
    assert drop.status == "truncated" and drop.content


def test_the_server_counts_attempts_per_request() -> None:
    client = nito_nb.Client(max_retries=0)
    body = {"fail_rate": 1, "fail_status": 503, "fail_attempts": 2, "seed": 987654}
    outcomes = []
    for _ in range(3):
        try:
            s = client.stream("count me", model="sim/chat", raise_errors=False, sim=body)
            s.wait(raise_errors=False)
            outcomes.append(s.status)
        except nito_nb.ServerError:
            outcomes.append("503")
    client.close()
    assert outcomes == ["503", "503", "done"]
