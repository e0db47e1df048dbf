"""Structured output (issue 33): ``schema=`` on ``nito_nb.stream``/``astream`` and ``%%nito
--schema``, over HTTP on the simulator, which answers ``response_format`` ``json_schema`` with
JSON that conforms (``sim/json-invalid`` and ``sim/json-cut`` break it as models do).

The request carries ``response_format: {"type": "json_schema", "json_schema": {"name", "schema",
"strict": true}}``; ``s.parsed`` is the pydantic model's instance (a dict for a dict schema),
validated once the stream ended, and ``s.parse_error`` says what failed and where.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
import pytest
from conftest import execute_cells
from test_sim import QUICK

import nito_nb
from nito_nb._core.partial_json import open_path, path_text
from nito_nb._core.strict_schema import strict_form
from nito_nb._structured import ParseError, schema_in, schema_of

PROMPT = "Classify: you have won a prize, click here."


class Reason(pydantic.BaseModel):
    text: Annotated[str, pydantic.Field(min_length=3, max_length=40)]
    weight: Annotated[int, pydantic.Field(ge=1, le=5)]


class Verdict(pydantic.BaseModel):
    label: Literal["spam", "ham"]
    confidence: Annotated[float, pydantic.Field(ge=0, le=1)]
    reasons: Annotated[list[Reason], pydantic.Field(min_length=1, max_length=3)]


SCHEMA = Verdict.model_json_schema()


def ask(model: str = "sim/chat", schema: Any = Verdict, **kwargs: Any) -> nito_nb.Stream:
    s = nito_nb.stream(PROMPT, model=model, schema=schema, sim={**QUICK, **kwargs.pop("sim", {})},
                       raise_errors=False, **kwargs)  # fmt: skip
    s.wait()
    return s


# -- what is sent, what is read ----------------------------------------------------------------


def test_a_pydantic_schema_sends_json_schema_strict_and_parses_to_the_model() -> None:
    s = ask()
    assert s.request["params"]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Verdict", "schema": strict_form(SCHEMA), "strict": True},
    }
    assert s.status == "done"
    assert isinstance(s.parsed, Verdict) and s.parse_error is None
    assert s.parsed == Verdict.model_validate_json(s.content)


def test_a_dict_schema_parses_to_a_dict_checked_by_jsonschema() -> None:
    s = ask(schema=SCHEMA)
    assert s.request["params"]["response_format"]["json_schema"]["name"] == "Verdict"  # its title
    assert (
        isinstance(s.parsed, dict)
        and s.parsed["label"] in ("spam", "ham")
        and s.parse_error is None
    )


def test_astream_takes_a_schema_too() -> None:
    async def main() -> Any:
        s = nito_nb.astream(PROMPT, model="sim/chat", schema=Verdict, sim=QUICK)
        await s
        return s

    s = asyncio.run(main())
    assert isinstance(s.parsed, Verdict) and s.parse_error is None


@pytest.mark.parametrize("schema", [Verdict, SCHEMA])
def test_json_that_breaks_the_schema_names_the_field(schema: Any) -> None:
    s = ask("sim/json-invalid", schema)
    assert s.status == "done" and s.parsed is None
    error = s.parse_error
    assert isinstance(error, ParseError) and error.errors
    # The simulator breaks one value; the error names a field path inside the object, not the root.
    assert all(e.path != "(root)" for e in error.errors), error
    assert str(error).startswith(error.errors[0].path + ": ")
    assert s.content.startswith("{")  # the raw text is kept


def test_json_cut_mid_object_says_so_and_keeps_the_text() -> None:
    s = ask("sim/json-cut")
    assert s.parsed is None
    (error,) = s.parse_error.errors
    assert error.path == "(root)" and "stops mid-document" in error.message
    assert s.content and s.content.lstrip().startswith("{")


def test_no_schema_no_parsed() -> None:
    s = nito_nb.stream(PROMPT, model="sim/chat", sim=QUICK)
    assert s.parsed is None and s.parse_error is None


def test_a_recorded_stream_is_read_with_the_schema_of_its_request(tmp_path: Path) -> None:
    s = ask()
    s.save(tmp_path / "s.jsonl")
    loaded = nito_nb.load(tmp_path / "s.jsonl")
    assert loaded.parsed == s.parsed.model_dump()  # a dict: no model class travels in a log


def test_reply_keeps_the_pydantic_schema() -> None:
    s = ask()
    again = s.reply("And this one: lunch at noon?")
    again.wait()
    assert isinstance(again.parsed, Verdict)


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        (42, "schema= takes a pydantic model class or a JSON-schema dict, not int"),
        (Reason(text="abc", weight=1), "not Reason"),  # an instance, not the class
    ],
)
def test_a_wrong_schema_is_one_line(schema: Any, says: str) -> None:
    with pytest.raises(nito_nb.ConfigurationError, match="schema= takes") as caught:
        nito_nb.stream(PROMPT, model="sim/chat", schema=schema)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_schema_and_response_format_together_are_refused() -> None:
    with pytest.raises(nito_nb.ConfigurationError, match="schema= or response_format=, not both"):
        nito_nb.stream(
            PROMPT, model="sim/chat", schema=Verdict, response_format={"type": "json_object"}
        )


def test_openais_own_wrapper_is_taken_as_it_is() -> None:
    wrapper = {"name": "my verdict!", "schema": SCHEMA, "strict": True}
    assert schema_of(wrapper).response_format()["json_schema"] == {
        "name": "my_verdict_",
        "schema": SCHEMA,
        "strict": True,
    }
    assert schema_in({"params": {"response_format": {"type": "json_object"}}}) is None


# -- the partial parse --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("", None),
        ('{"a": 1', ("a",)),  # a number may go on
        ('{"a": 1,', ()),
        ('{"a": "x"', ()),
        ('{"a": ', ("a",)),
        ('{"lab', ()),  # a key being typed: no field yet
        ('{"a": 1, "b": "he', ("b",)),
        ('{"r": ["x", "y', ("r", 1)),
        ('{"r": {"q": "x"', ("r",)),
        ('{"a": "\\"}', ("a",)),  # an escaped quote does not end the string
        ('{"a": 1}', None),
    ],
)
def test_open_path(text: str, path: Any) -> None:
    assert open_path(text) == path


def test_partial_keeps_the_string_being_written() -> None:
    partial = schema_of(SCHEMA).partial('{"label": "spam", "reasons": [{"text": "cli')
    assert partial.value == {"label": "spam", "reasons": [{"text": "cli"}]}
    assert partial.writing == ("reasons", 0, "text")
    assert path_text(partial.writing) == "reasons[0].text"


# -- the magic, in a real kernel ------------------------------------------------------------------


@pytest.mark.spawns
def test_magic_schema_in_a_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NITO_SIM_TPS", "0")
    monkeypatch.setenv("NITO_SIM_TTFT_MS", "0")
    nb = execute_cells(
        [
            "%load_ext nito_nb\nimport pydantic\nfrom typing import Literal\n"
            "class Verdict(pydantic.BaseModel):\n    label: Literal['spam', 'ham']\n    confidence: float\n",
            "%%nito -m sim/chat --schema Verdict\nClassify: buy now, cheap pills",
            "print(type(_nito.parsed).__name__, _nito.parse_error, _nito.request['params']['response_format']['type'])",
            "%%nito -m sim/chat --schema Nothing\nhi",
            "%%nito -m sim/chat --schema Verdict --json\nhi",
            "not_a_schema = 3",
            "%%nito -m sim/chat --schema not_a_schema\nhi",
            "rows = ['win money', 'lunch?']",
            "%%nito -m sim/chat --schema Verdict --over rows\nClassify: {value}",
            "print(_nito.results()['valid'].tolist(), type(_nito.results()['parsed'][0]).__name__)",
            "%%nito -m sim/chat,sim/json-invalid --schema Verdict\nClassify: buy now",
        ],
        tmp_path,
    )
    (printed,) = nb.cells[2].outputs
    assert printed["text"].strip() == "Verdict None json_schema"
    # The cell showed the object (live, then checked), not the raw text as an answer.
    shown = [o.get("data", {}) for o in nb.cells[1].outputs]
    final = [d for d in shown if "nito-structured" in str(d.get("text/html", ""))]
    assert final and str(final[-1]["text/plain"]).startswith("✓ Verdict\nlabel: ")
    assert '<details class="nito-raw">' in final[-1]["text/html"]

    def said(cell: int) -> str:
        return "".join(
            str(o.get("text", "")) + str(o.get("evalue", "")) for o in nb.cells[cell].outputs
        )

    assert "--schema Nothing: no such name in the namespace" in said(3)
    assert "--json asks for any JSON object, --schema for one schema's" in said(4)
    assert "schema= takes a pydantic model class or a JSON-schema dict, not int" in said(6)
    assert "Traceback" not in said(3) + said(4) + said(6)
    assert said(9).strip() == "[True, True] Verdict"  # --over: a run with the schema
    # -m a,b: each column shows its object, checked
    grid = " ".join(str(o.get("data", {}).get("text/plain", "")) for o in nb.cells[10].outputs)
    assert "✓ Verdict" in grid and "✗ not a valid Verdict" in grid


# -- the live view ------------------------------------------------------------------------------

HOSTILE_SCHEMA: dict[str, Any] = {
    "title": "Hostile",
    "type": "object",
    "properties": {
        "<img src=x onerror=alert(1)>": {"type": "string", "enum": ["<script>alert(1)</script>"]},
        "label": {
            "type": "string",
            "enum": ['"><svg onload=alert(1)>', "[x](javascript:alert(1))"],
        },
        "items": {
            "type": "array",
            "minItems": 2,
            "maxItems": 2,
            "items": {"type": "string", "const": "<iframe src=javascript:alert(1)>"},
        },
    },
    "required": ["<img src=x onerror=alert(1)>", "label", "items"],
}


class Page:
    """What a notebook shows: every bundle each output was given, in order (``LiveDisplay``'s
    ``display=``)."""

    def __init__(self) -> None:
        self.bundles: list[dict[str, str]] = []

    def __call__(self, bundle: dict[str, str], *, raw: bool, display_id: bool) -> Any:
        self.bundles.append(bundle)
        page = self

        class Handle:
            def update(self, bundle: dict[str, str], *, raw: bool) -> None:
                page.bundles.append(bundle)

        return Handle()


def shown_live(model: str, schema: Any, **sim: Any) -> tuple[nito_nb.Stream, list[dict[str, str]]]:
    from nito_nb._display import LiveDisplay

    page = Page()
    s = nito_nb.stream(
        PROMPT, model=model, schema=schema, sim={**QUICK, "tps": 40, **sim}, raise_errors=False
    )
    display = LiveDisplay(s, max_rate=1000, display=page)
    for _ in s:
        display.update()
    display.finish()
    return s, page.bundles


def test_the_live_view_shows_the_object_growing_with_the_field_being_written_marked() -> None:
    s, bundles = shown_live("sim/chat", Verdict)
    structured = [b for b in bundles if "nito-structured" in b["text/html"]]
    writing = [b["text/plain"] for b in structured if b["text/plain"].startswith("✎ Verdict")]
    assert writing, "no live frame of the object"
    # Fields as they complete: label shown before reasons arrived; the one being written marked.
    assert any('label: "' in t and re.search(r"^reasons( ✎)?: …$", t, re.M) for t in writing), (
        writing
    )
    assert any("✎:" in t or "✎: " in t for t in writing)
    assert all(
        " nito-writing" in b["text/html"]
        for b in structured
        if b["text/plain"].startswith("✎ Verdict: writing")
    )
    # While streaming the raw JSON's tail shows; at the end it is one click away.
    last = structured[-1]
    assert (
        last["text/plain"].startswith("✓ Verdict")
        and '<details class="nito-raw">' in last["text/html"]
    )
    assert f"raw JSON ({len(s.content):,} characters)" in last["text/plain"]
    assert "<details" not in structured[0]["text/html"]


def test_the_end_of_an_invalid_answer_lists_errors_by_field_and_keeps_the_raw_text() -> None:
    s, bundles = shown_live("sim/json-invalid", Verdict)
    final = [b for b in bundles if "nito-structured" in b["text/html"]][-1]
    assert final["text/plain"].startswith("✗ not a valid Verdict: ")
    path = s.parse_error.errors[0].path
    assert f"{path}: " in final["text/plain"] and '<ul class="nito-errors"' in final["text/html"]
    assert (
        '<details class="nito-raw" open>' in final["text/html"] and s.content in final["text/plain"]
    )
    whole = s._repr_mimebundle_()  # the saved output: the same view
    assert (
        "✗ not a valid Verdict" in whole["text/plain"] and "nito-structured" in whole["text/html"]
    )


def test_hostile_strings_in_field_names_and_values_stay_inert_live_and_at_the_end() -> None:
    from test_render import markup_problems

    s, bundles = shown_live("sim/chat", HOSTILE_SCHEMA)
    assert s.parse_error is None and "<script>alert(1)</script>" in s.parsed.values()
    htmls = [b["text/html"] for b in bundles] + [s._repr_mimebundle_()["text/html"]]
    assert any("&lt;script&gt;alert(1)&lt;/script&gt;" in h for h in htmls)  # shown, as text
    for markup in htmls:
        assert markup_problems(markup) == [], markup
    # An invalid answer's messages quote the values: escaped too.
    bad, bundles = shown_live("sim/json-invalid", HOSTILE_SCHEMA)
    assert bad.parse_error is not None
    for markup in [b["text/html"] for b in bundles]:
        assert markup_problems(markup) == [], markup


def test_a_free_answer_is_shown_as_before() -> None:
    s = nito_nb.stream(PROMPT, model="sim/chat", sim=QUICK)
    assert "nito-structured" not in s._repr_mimebundle_()["text/html"]


# -- runs -------------------------------------------------------------------------------------------


def test_a_run_with_a_schema_gains_parsed_valid_parse_error_and_a_column_per_field() -> None:
    import pandas as pd

    emails = pd.DataFrame({"email": ["win money now", "lunch at noon?", "cheap pills"]})
    run = nito_nb.run(
        emails,
        template="Classify: {email}",
        model=["sim/chat", "sim/json-invalid"],
        schema=Verdict,
        sim=QUICK,
        progress=False,
    )
    run.wait()
    results = run.results()
    assert list(results.columns[-6:]) == [
        "parsed",
        "valid",
        "parse_error",
        "out.label",
        "out.confidence",
        "out.reasons",
    ]
    good = results[results["model"] == "sim/chat"]
    bad = results[results["model"] == "sim/json-invalid"]
    assert good["valid"].tolist() == [True] * 3 and good["parse_error"].isna().all()
    assert all(isinstance(v, Verdict) for v in good["parsed"])
    assert set(good["out.label"]) <= {"spam", "ham"} and str(good["out.label"].dtype) == "string"
    assert str(good["out.confidence"].dtype) == "Float64"
    # nested: as dicts
    assert all(isinstance(r, list) and isinstance(r[0], dict) for r in good["out.reasons"])
    assert (
        bad["valid"].tolist() == [False] * 3
        and bad["parsed"].isna().all()
        and bad["out.label"].isna().all()
    )
    # a field path, not the whole
    assert all(not e.startswith("(root)") for e in bad["parse_error"])
    summary = run.summary()
    assert (
        summary.loc["sim/chat", "valid_share"] == 1.0
        and summary.loc["sim/json-invalid", "valid_share"] == 0.0
    )
    # The requests carried the schema's response_format (JSON: any engine's worker and the store's key take it).
    assert all(
        r.params["response_format"]["json_schema"]
        == {
            "name": "Verdict",
            "schema": strict_form(SCHEMA),  # OpenAI's strict mode takes only closed objects
            "strict": True,
        }
        for r in run.plan.requests
    )


def test_a_run_without_a_schema_keeps_its_columns() -> None:
    run = nito_nb.run(["hi"], model="sim/chat", sim=QUICK, progress=False)
    run.wait()
    assert "valid" not in run.results().columns and "valid_share" not in run.summary().columns


@pytest.mark.spawns  # the store's events helper
def test_map_with_a_schema_returns_the_objects_also_from_a_store(tmp_path: Path) -> None:
    import pandas as pd

    emails = pd.Series(["win money now", "lunch at noon?"], index=["a", "b"])
    first = nito_nb.map(
        emails,
        model="sim/chat",
        schema=Verdict,
        store=str(tmp_path / "store"),
        sim=QUICK,
        progress=False,
    )
    assert first.dtype == object and list(first.index) == ["a", "b"]
    assert all(isinstance(v, Verdict) for v in first)
    again = nito_nb.map(
        emails,
        model="sim/chat",
        schema=Verdict,
        store=str(tmp_path / "store"),
        sim=QUICK,
        progress=False,
    )
    # read back from the store, checked again
    assert nito_nb.last().skipped and list(again) == list(first)
    invalid = nito_nb.map(
        emails, model="sim/json-invalid", schema=SCHEMA, sim=QUICK, progress=False
    )
    assert invalid.isna().all()
