"""The simulator sends OpenAI's `obfuscation` padding when asked (`"sim": {"obfuscation": true}`):
a string of random letters and digits of random length last in every chunk, as real OpenAI and
Azure send it, so that clients and benchmarks meet chunks that share no byte layout."""

from __future__ import annotations

import json

import pytest

import nito_nb


def _chunks(stream: nito_nb.Stream) -> list[dict]:
    return [
        json.loads(line[6:])
        for line in stream.log.body.split(b"\n\n")
        if line.startswith(b"data: {")
    ]


@pytest.mark.parametrize("model", ["sim/chat", "sim/tools", "sim/reasoning"])
def test_every_chunk_ends_with_a_random_padding(model: str) -> None:
    padded = nito_nb.stream(
        "hi",
        model=model,
        sim={"obfuscation": True, "tps": 0},
        stream_options={"include_usage": True},
    )
    plain = nito_nb.stream(
        "hi", model=model, sim={"tps": 0}, stream_options={"include_usage": True}
    )
    padded.wait()
    plain.wait()
    assert padded.status == "done" and not padded.anomalies
    chunks = _chunks(padded)
    assert chunks and all(list(c)[-1] == "obfuscation" for c in chunks)  # last, as OpenAI sends it
    paddings = [c["obfuscation"] for c in chunks]
    assert all(p == "" or (p.isascii() and p.isalnum()) for p in paddings)
    assert max(map(len, paddings)) <= 15 and len({len(p) for p in paddings}) > 3  # random lengths
    # The answer is the same as without it.
    assert (padded.content, padded.reasoning, [c.arguments for c in padded.tool_calls]) == (
        plain.content,
        plain.reasoning,
        [c.arguments for c in plain.tool_calls],
    )
    assert len(chunks) == len(_chunks(plain))


def test_without_the_option_no_padding() -> None:
    stream = nito_nb.stream("hi", model="sim/chat", sim={"tps": 0})
    stream.wait()
    assert b"obfuscation" not in stream.log.body


def test_a_bad_obfuscation_option_is_one_clear_error() -> None:
    with pytest.raises(nito_nb.BadRequestError, match=r"sim\.obfuscation must be true or false"):
        nito_nb.stream("hi", model="sim/chat", sim={"obfuscation": 1}).wait()
