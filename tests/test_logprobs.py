"""Token confidence (issue 33): ``logprobs=True, top_logprobs=K`` over HTTP on the simulator,
which sends deterministic pseudo-logprobs when asked; ``s.logprobs`` accumulates OpenAI's
``choices[].logprobs.content`` across chunks, ``df.nito.tokens()`` gives one row per token.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from conftest import execute_cells
from test_sim import QUICK, with_token

import nito_nb
from nito_nb import sim

PROMPT = "Say something about streams."


def ask(model: str = "sim/chat", **params: Any) -> nito_nb.Stream:
    s = nito_nb.stream(PROMPT, model=model, sim={**QUICK, **params.pop("sim", {})}, **params)
    s.wait()
    return s


def test_logprobs_come_per_token_with_their_alternatives() -> None:
    s = ask(logprobs=True, top_logprobs=3)
    tokens = s.logprobs
    # one entry per content token
    assert tokens and "".join(t["token"] for t in tokens) == s.content
    for entry in tokens:
        assert entry["logprob"] < 0 and entry["bytes"] == list(entry["token"].encode())
        top = entry["top_logprobs"]
        assert len(top) == 3 and [a["logprob"] for a in top] == sorted(
            (a["logprob"] for a in top), reverse=True
        )
        assert entry["token"] in [a["token"] for a in top]
        assert sum(math.exp(a["logprob"]) for a in top) <= 1 + 1e-6
    probabilities = [math.exp(t["logprob"]) for t in tokens]
    # something to shade: not all near certain
    assert min(probabilities) < 0.85 < max(probabilities)


def test_the_pseudo_logprobs_are_deterministic_per_seed() -> None:
    one = ask(logprobs=True, top_logprobs=2, sim={"seed": 3}).logprobs
    assert ask(logprobs=True, top_logprobs=2, sim={"seed": 3}).logprobs == one
    assert ask(logprobs=True, top_logprobs=2, sim={"seed": 4}).logprobs != one


def test_no_logprobs_unless_asked() -> None:
    s = ask()
    assert s.logprobs == []
    assert all(
        "logprobs" not in (e.chunk or {}).get("choices", [{}])[0]
        for e in s.log
        if e.kind == "chunk" and e.chunk.get("choices")
    )
    without_top = ask(logprobs=True)
    assert without_top.logprobs and all(t["top_logprobs"] == [] for t in without_top.logprobs)


def test_astream_has_them_too() -> None:
    async def main() -> list[dict[str, Any]]:
        s = nito_nb.astream(PROMPT, model="sim/chat", logprobs=True, top_logprobs=1, sim=QUICK)
        await s
        return s.logprobs

    assert len(asyncio.run(main())[0]["top_logprobs"]) == 1


def test_top_logprobs_without_logprobs_is_refused_by_the_client_and_by_the_simulator() -> None:
    with pytest.raises(nito_nb.ConfigurationError, match="top_logprobs needs logprobs=True"):
        nito_nb.stream(PROMPT, model="sim/chat", top_logprobs=2)
    with pytest.raises(nito_nb.ConfigurationError, match="logprobs must be True or False"):
        nito_nb.stream(PROMPT, model="sim/chat", logprobs="yes")
    with httpx.Client(base_url=sim.ensure_server(), headers=with_token(), timeout=30) as http:
        body = {
            "model": "sim/chat",
            "messages": [{"role": "user", "content": "hi"}],
            "top_logprobs": 2,
        }
        answer = http.post("/chat/completions", json=body)
        assert answer.status_code == 400 and "`top_logprobs` needs `logprobs: true`" in answer.text
        answer = http.post("/chat/completions", json={**body, "logprobs": True, "top_logprobs": 21})
        assert answer.status_code == 400 and "from 0 to 20" in answer.text


def test_the_whole_answer_without_streaming_merges_the_same_logprobs() -> None:
    streamed = ask(logprobs=True, top_logprobs=2, sim={"seed": 9})
    with httpx.Client(base_url=sim.ensure_server(), headers=with_token(), timeout=30) as http:
        body = {
            "model": "sim/chat",
            "messages": [{"role": "user", "content": PROMPT}],
            "stream": False,
            "logprobs": True,
            "top_logprobs": 2,
            "sim": {**QUICK, "seed": 9},
        }
        (choice,) = http.post("/chat/completions", json=body).json()["choices"]
    assert choice["logprobs"] == {"content": streamed.logprobs, "refusal": []}


def test_the_openai_sdk_reads_the_simulators_logprobs() -> None:
    with openai.OpenAI(base_url=sim.ensure_server(), api_key=sim.token(), max_retries=0) as client:
        chunks = list(
            client.chat.completions.create(
                model="sim/chat",
                messages=[{"role": "user", "content": PROMPT}],
                stream=True,
                logprobs=True,
                top_logprobs=2,
                extra_body={"sim": QUICK},
            )
        )
    entries = [
        e
        for c in chunks
        if c.choices and c.choices[0].logprobs
        for e in c.choices[0].logprobs.content
    ]
    assert entries and all(len(e.top_logprobs) == 2 for e in entries)


def test_tokens_frame_one_row_per_token() -> None:
    s = ask(logprobs=True, top_logprobs=2)
    plain = ask()
    df = nito_nb.frame([s, plain])
    tokens = df.nito.tokens()
    assert list(tokens.columns) == [
        "stream",
        "position",
        "channel",
        "token",
        "logprob",
        "probability",
        "seq",
        "t",
        "top_logprobs",
    ]
    assert len(tokens) == len(s.logprobs)  # the stream without logprobs has no row
    assert tokens["position"].tolist() == list(range(len(s.logprobs)))
    assert tokens["token"].tolist() == [t["token"] for t in s.logprobs]
    assert (tokens["channel"] == "content").all()
    assert tokens["probability"].tolist() == pytest.approx(
        [math.exp(t["logprob"]) for t in s.logprobs]
    )
    chunks = {e.seq: e.t for e in s.log if e.kind == "chunk"}
    assert all(
        chunks[seq] == pytest.approx(t) for seq, t in zip(tokens["seq"], tokens["t"], strict=True)
    )
    assert tokens["top_logprobs"][0] == [
        {"token": a["token"], "logprob": a["logprob"]} for a in s.logprobs[0]["top_logprobs"]
    ]


def test_a_refusals_logprobs_are_in_tokens_not_in_s_logprobs() -> None:
    # OpenAI sends a refusal's token logprobs in logprobs.refusal: kept apart from the answer's.
    def chunk(delta: dict[str, Any], channel: str, token: str) -> bytes:
        entry = {"token": token, "logprob": -0.5, "bytes": list(token.encode()), "top_logprobs": []}
        body = {
            "id": "r",
            "choices": [
                {"index": 0, "delta": delta, "logprobs": {channel: [entry]}, "finish_reason": None}
            ],
        }
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    source = nito_nb.StreamSource({"model": "m"})
    source.feed(
        chunk({"content": "I "}, "content", "I ")
        + chunk({"refusal": "can't"}, "refusal", "can't")
        + b"data: [DONE]\n\n",
        1,
    )
    source.end()
    s = source.stream
    assert [t["token"] for t in s.logprobs] == ["I "]
    tokens = s.frame().nito.tokens()
    assert tokens[["channel", "token", "position"]].values.tolist() == [
        ["content", "I ", 0],
        ["refusal", "can't", 0],
    ]


@pytest.mark.spawns
def test_magic_logprobs_in_a_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NITO_SIM_TPS", "0")
    nb = execute_cells(
        [
            "%load_ext nito_nb",
            "%%nito -m sim/chat --logprobs 2\nhi",
            "print(len(_nito.logprobs[0]['top_logprobs']), len(_nito.frame().nito.tokens()) == len(_nito.logprobs))",
            "%%nito -m sim/chat --logprobs\nhi",
            "print(_nito.request['params'].get('top_logprobs'), bool(_nito.logprobs))",
        ],
        tmp_path,
    )
    assert nb.cells[2].outputs[0]["text"].strip() == "2 True"
    assert nb.cells[4].outputs[0]["text"].strip() == "None True"


# -- every choice (n > 1) ---------------------------------------------------------------------------


def test_every_choice_of_n_is_read_on_its_own_and_content_stays_choice_0() -> None:
    s = ask(n=2, logprobs=True, top_logprobs=1, sim={"seed": 4})
    one, two = s.choices
    assert (one.index, two.index) == (0, 1)
    assert one.content == s.content and one.finish_reason == s.finish_reason == "stop"
    # distinct answers, never mixed into s.content
    assert two.content and two.content != one.content
    assert one.logprobs == s.logprobs and "".join(t["token"] for t in two.logprobs) == two.content
    assert two.message == {"role": "assistant", "content": two.content}
    assert len(ask().choices) == 1


def test_each_choice_of_a_json_answer_is_its_own_object() -> None:
    from test_structured import Verdict

    s = ask(n=3, schema=Verdict)
    values = [Verdict.model_validate_json(c.content) for c in s.choices]
    assert len({v.model_dump_json() for v in values}) == 3 and s.parsed == values[0]


def test_each_choice_has_its_own_tool_calls() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
    s = ask("sim/tools", n=2, tools=[tool])
    assert all(
        c.tool_calls and c.tool_calls[0].name == "get_weather" and c.finish_reason == "tool_calls"
        for c in s.choices
    )
    assert [call.arguments for call in s.choices[0].tool_calls] == [
        call.arguments for call in s.tool_calls
    ]


def test_plot_confidence_marks_the_unsure_tokens() -> None:
    s = ask(logprobs=True, top_logprobs=1)
    tokens = s.frame().nito.tokens()
    fig = s.frame().nito.plot_confidence(low=0.5)
    (ax,) = fig.axes
    line, crosses = ax.lines[0], ax.lines[1]
    assert (
        line.get_label() == tokens["stream"][0]
        and list(line.get_xdata()) == tokens["position"].tolist()
    )
    unsure = tokens[tokens["probability"] < 0.5]["position"].tolist()
    assert unsure and list(crosses.get_xdata()) == unsure
    assert len(ax.patches) >= 1  # the spans, shaded
    with pytest.raises(nito_nb.ConfigurationError, match="low is a probability from 0 to 1"):
        s.frame().nito.plot_confidence(low=2)
    empty = ask().frame().nito.plot_confidence()
    assert "no logprobs" in empty.axes[0].texts[0].get_text()
