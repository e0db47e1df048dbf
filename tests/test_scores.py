"""Scores (issue 34, docs/SCORES.md): the built-ins, and a run graded over HTTP on the simulator."""

from __future__ import annotations

from typing import Any

import pytest

import nito_nb
from nito_nb import scores
from nito_nb._core.errors import ConfigurationError

# -- the built-ins: one layer, rows as a run makes them ------------------------------------------


def _row(**values: Any) -> dict[str, Any]:
    return values


def test_equals_compares_text_after_strip_and_as_text_when_either_side_is() -> None:
    exact = scores.equals("content", column="truth")
    assert exact(_row(content=" Paris\n", **{"input.truth": "Paris"}), None) is True
    assert exact(_row(content="paris", **{"input.truth": "Paris"}), None) is False
    assert scores.equals(column="truth", case=False)(
        _row(content="paris", **{"input.truth": "Paris"}), None
    )
    assert (
        scores.equals(column="truth", strip=False)(
            _row(content=" Paris", **{"input.truth": "Paris"}), None
        )
        is False
    )
    assert exact(_row(content="3", **{"input.truth": 3}), None) is True
    # no truth: NA; no answer (a failed request): a miss
    assert exact(_row(content="x", **{"input.truth": None}), None) is None
    assert exact(_row(content=None, **{"input.truth": "x"}), None) is False
    # a schema field by its bare name, a value
    assert scores.equals("label", value="spam")(_row(**{"out.label": "spam"}), None) is True


def test_the_other_built_ins() -> None:
    row = _row(content='{"a": 1} see https://x.org', ttft=0.5, e2e=2.0, cost=0.02)
    assert scores.contains("https")(row, None) is True
    assert scores.contains("HTTPS", case=False)(row, None) is True
    assert scores.regex(r"https?://")(row, None) is True
    assert scores.json_valid()(row, None) is False
    assert scores.json_valid()(_row(content=' {"a": 1} '), None) is True
    assert scores.under("ttft", 1.0)(row, None) is True
    assert scores.under("e2e", 1.0)(row, None) is False
    assert scores.under("ttft", 1.0)(_row(ttft=None), None) is None  # no figure: NA
    assert scores.cost_under(0.01)(row, None) is False
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    assert scores.schema_valid(schema)(_row(content='{"a": 1}'), None) is True
    assert scores.schema_valid(schema)(_row(content='{"a": "x"}'), None) is False


def test_each_built_in_says_what_it_checks() -> None:
    assert repr(scores.equals("content", column="truth")) == (
        "nito_nb.scores.equals('content', column='truth')"
    )
    assert scores.regex(r"https?://").describe() == "regex('https?://')"
    assert scores.under("ttft", 1).describe() == "under('ttft', 1.0)"
    assert scores.cost_under(0.01).describe() == "cost_under(0.01)"
    assert scores.json_valid().describe() == "json_valid()"


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: scores.equals("content"), "column='truth'"),
        (lambda: scores.regex("("), "not a regular expression"),
        (lambda: scores.under("ttft", -1), ">= 0"),
        (lambda: scores.contains(), "contains('Paris')"),
    ],
)
def test_a_wrong_built_in_is_one_line(make: Any, says: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        make()
    assert says in str(info.value) and "\n" not in str(info.value)


def test_the_magic_form_is_parsed_never_evaluated() -> None:
    assert (
        scores.parse_score("exact=equals:truth")[1].describe()
        == "equals('content', column='truth')"
    )
    assert scores.parse_score("src=regex:https?://")[1].describe() == "regex('https?://')"
    assert scores.parse_score("fast=under:ttft:1.0")[1].describe() == "under('ttft', 1.0)"
    assert scores.parse_score("ok=json_valid")[1].describe() == "json_valid()"
    assert scores.parse_score("cheap=cost_under:0.01")[1].describe() == "cost_under(0.01)"
    for bad in ("exact", "x=__import__('os')", "x=under:ttft", "x=cost_under:cheap"):
        with pytest.raises(ConfigurationError) as info:
            scores.parse_score(bad)
        assert "NAME=KIND" in str(info.value) and "\n" not in str(info.value)


def test_scores_is_a_public_submodule() -> None:
    assert "scores" in dir(nito_nb) and nito_nb.scores is scores
