"""Issue 30, the Python API's side: say what happened. A stream that broke is never half an answer
in silence, a misspelt keyword is never sent as a body field, and a mistake is one line that says
what to do. On the embedded simulator and small loopback servers of the tests' own.
"""

from __future__ import annotations

from typing import Any

import pytest

import nito_nb

# -- 1. the result of a broken stream that nobody iterated or waited for ------------------------------

RESULTS = ("content", "reasoning", "reasoning_details", "refusal", "audio", "audio_transcript", "tool_calls",
           "finish_reason", "usage", "message", "messages")


@pytest.mark.parametrize("name", RESULTS)
@pytest.mark.parametrize(("model", "error"), [("sim/error-midstream", nito_nb.MidStreamError),
                                              ("sim/drop", nito_nb.StreamError)])
def test_a_result_of_a_broken_stream_raises_what_wait_raises(model: str, error: type, name: str) -> None:
    s = nito_nb.stream("hi", model=model, sim={"seed": 1})
    with pytest.raises(error) as raised:
        getattr(s, name)
    assert raised.value is s.exception and raised.value.stream is s
    # Told once, as after wait(): the partial answer is then read as it is, on the Stream and the error.
    assert len(s.content) > 100 and raised.value.stream.content == s.content
    assert s.status in ("error", "truncated")


def test_how_the_call_went_never_raises_and_does_not_count_as_reading_the_answer() -> None:
    s = nito_nb.stream("hi", model="sim/error-midstream")
    assert s.error is not None and isinstance(s.anomalies, list) and s.status == "error"
    assert "text/plain" in s._repr_mimebundle_()  # shown, not read: the display says "error"
    with pytest.raises(nito_nb.MidStreamError):
        _ = s.content


def test_raise_errors_false_and_a_whole_answer_read_as_they_are() -> None:
    assert len(nito_nb.stream("hi", model="sim/drop", raise_errors=False).content) > 100
    assert nito_nb.stream("hi", model="sim/echo").content == "hi"


def test_an_on_done_callback_reads_the_partial_answer_and_the_caller_is_still_told() -> None:
    seen: list[int] = []
    s = nito_nb.stream("hi", model="sim/error-midstream").on_done(lambda st: seen.append(len(st.content)))
    with pytest.raises(nito_nb.MidStreamError):
        s.wait()
    assert seen and seen[0] == len(s.content) > 100


def test_the_magic_and_a_run_read_broken_streams_without_raising(ip: Any) -> None:
    ip.run_cell_magic("nito", "-m sim/error-midstream", "hi")
    assert nito_nb.last().status == "error" and len(nito_nb.last().content) > 100
    results = nito_nb.run(["a", "b"], model="sim/drop", progress=False).wait().results()
    assert list(results["status"]) == ["truncated"] * 2 and all(results["content"].str.len() > 100)
