"""Every choice of ``n > 1`` in the frame (issue 33): a ``choice`` column, each choice's chunks as
rows of their own, the tables of ``df.nito`` on choice 0 and ``metrics(by_choice=True)`` per
(stream, choice). Over HTTP on the simulator, which streams ``n`` choices interleaved as OpenAI
does (one choice per chunk); a chunk of several choices from a recorded body.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
from test_sim import QUICK

import nito_nb


def ask(**params: Any) -> nito_nb.Stream:
    s = nito_nb.stream(
        "Say something about streams.",
        model="sim/chat",
        sim=QUICK,
        stream_options={"include_usage": True},
        **params,
    )
    s.wait()
    return s


def choice_text(df: pd.DataFrame, k: int) -> str:
    rows = df[(df["choice"] == k) & ~df["ignored"] & df["content"].notna()]
    return "".join(rows["content"])


def test_each_choice_has_its_rows_and_the_tables_stay_choice_0s() -> None:
    s = ask(n=3, logprobs=True, top_logprobs=2)
    df = s.frame()
    assert str(df["choice"].dtype) == "Int64"
    assert sorted(df.loc[df["kind"] == "chunk", "choice"].unique()) == [0, 1, 2]
    assert len({c.content for c in s.choices}) > 1  # the simulator sends distinct choices
    for choice in s.choices:
        assert choice_text(df, choice.index) == choice.content
    # What existed before reads choice 0, the answer.
    assert df.nito.text().iloc[0] == s.content == s.choices[0].content
    assert df.nito.metrics()["n_token_chunks"].iloc[0] == s.snapshot().n_token_chunks
    assert "".join(df.nito.tokens()["token"]) == s.content
    # The rows of no choice (response, comments, [DONE], usage) are choice 0's.
    assert (df.loc[df["kind"] != "chunk", "choice"] == 0).all()


def test_metrics_by_choice_has_one_row_per_stream_and_choice() -> None:
    s = ask(n=3)
    df = s.frame()
    table = df.nito.metrics(by_choice=True)
    assert table.index.names == ["stream", "choice"]
    assert table.index.get_level_values("choice").tolist() == [0, 1, 2]
    whole = df.nito.metrics()
    t = df["t"].to_numpy()
    for choice in s.choices:
        row = table.xs(choice.index, level="choice").iloc[0]
        mine = (df["choice"] == choice.index).to_numpy() & df["token"].to_numpy()
        assert row["n_token_chunks"] == mine.sum()
        assert row["ttft"] == t[mine].min()
        assert row["finish_reason"] == choice.finish_reason
        assert row["e2e"] == whole["e2e"].iloc[0]  # the stream's last event, [DONE]
        # The usage counts every choice's tokens: no per-token figure for one choice of it.
        assert pd.isna(row["n_output_tokens"]) and np.isnan(row["tpot"])
    # Choice 0's figures of the answer are the default table's.
    first = table.xs(0, level="choice")
    for name in (
        "ttft",
        "ttfc",
        "itl",
        "itl_max",
        "n_token_chunks",
        "output_chunks_per_s",
        "finish_reason",
    ):
        assert first[name].iloc[0] == whole[name].iloc[0], name


def test_an_n1_stream_has_choice_0_everywhere_and_its_metrics_unchanged() -> None:
    s = ask()
    df = s.frame()
    assert (df["choice"] == 0).all()
    whole = df.nito.metrics()
    table = df.nito.metrics(by_choice=True)
    assert table.index.tolist() == [(whole.index[0], 0)]
    pd.testing.assert_frame_equal(table.droplevel("choice"), whole, check_dtype=False)


def test_a_chunk_of_several_choices_has_a_row_per_choice() -> None:
    def chunk(*choices: dict[str, Any]) -> str:
        return "data: " + json.dumps({"id": "c", "model": "m", "choices": list(choices)}) + "\n\n"

    def call(index: int, name: str | None, args: str) -> dict[str, Any]:
        fn: dict[str, Any] = {"arguments": args}
        if name:
            fn["name"] = name
        return {
            "index": index,
            "id": f"{name}-id" if name else None,
            "type": "function",
            "function": fn,
        }

    body = (
        chunk(
            {"index": 0, "delta": {"role": "assistant", "content": "Hel"}},
            {"index": 1, "delta": {"role": "assistant", "content": "Bon"}},
        )
        + chunk(
            {"index": 0, "delta": {"content": "lo"}},
            {"index": 1, "delta": {"tool_calls": [call(0, "f", '{"a"'), call(1, "g", "{}")]}},
        )
        + chunk({"index": 1, "delta": {"content": "jour", "tool_calls": [call(0, None, ": 1}")]}})
        + chunk(
            {"index": 0, "delta": {}, "finish_reason": "stop"},
            {"index": 1, "delta": {}, "finish_reason": "tool_calls"},
        )
        + "data: [DONE]\n\n"
    )
    s = nito_nb.read_sse(body.encode())
    df = s.frame()
    chunks = df[df["kind"] == "chunk"]
    assert not chunks.duplicated(["seq", "part"]).any()  # one part number per row of a chunk
    assert choice_text(df, 0) == "Hello" == df.nito.text().iloc[0]
    assert choice_text(df, 1) == "Bonjour" == s.choices[1].content
    ones = df[(df["choice"] == 1) & df["tool_index"].notna()]
    args = ones.groupby("tool_index")["tool_args"].agg("".join).to_dict()
    assert (
        args == {c.index: c.arguments for c in s.choices[1].tool_calls} == {0: '{"a": 1}', 1: "{}"}
    )
    assert df.nito.tool_calls().empty  # choice 0 called nothing
    table = df.nito.metrics(by_choice=True)
    assert table["n_token_chunks"].tolist() == [2, 3]
    assert table["finish_reason"].tolist() == ["stop", "tool_calls"]
    assert df.nito.metrics()["n_chunks"].iloc[0] == 4


def test_a_frame_saved_before_the_choice_column_reads_as_choice_0() -> None:
    df = ask().frame().drop(columns="choice")
    restored = nito_nb.frame(df)
    assert str(restored["choice"].dtype) == "Int64" and (restored["choice"] == 0).all()
    assert restored.nito.metrics(by_choice=True).index.tolist() == [(restored["stream"].iloc[0], 0)]
