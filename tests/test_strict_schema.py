"""OpenAI's strict structured outputs (``_core/strict_schema.py``): a pydantic model is sent in
the form strict mode takes, a user's dict schema is sent strict only when it already is, and the
simulator refuses what OpenAI refuses (a 400 naming the place), so tests see what a real gateway
would say. Before, every schema went with ``"strict": true`` as pydantic wrote it: OpenAI answered
400 for any model class, which never says ``additionalProperties: false``."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from test_sim import QUICK

import nito_nb
from nito_nb._core.strict_schema import strict_form, strict_problem
from nito_nb._structured import schema_of


class Address(pydantic.BaseModel):
    city: str
    zip: str | None = None


class Person(pydantic.BaseModel):
    name: str
    nickname: str | None = None  # optional: a union with null, required in strict form
    tags: list[str] = []
    home: Address = pydantic.Field(description="where they live")  # $ref beside a description


def _objects(schema: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            found.append(schema)
        for value in schema.values():
            found.extend(_objects(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(_objects(value))
    return found


def test_a_model_class_is_sent_closed_with_every_property_required() -> None:
    raw = Person.model_json_schema()
    assert strict_problem(raw) is not None  # as pydantic writes it, strict mode refuses it
    sent = schema_of(Person).response_format()["json_schema"]
    assert sent["strict"] is True and strict_problem(sent["schema"]) is None
    for obj in _objects(sent["schema"]):
        assert obj["additionalProperties"] is False
        assert sorted(obj["required"]) == sorted(obj["properties"])
    home = sent["schema"]["properties"]["home"]
    assert "$ref" not in home and home["description"] == "where they live"
    assert home["properties"]["city"] == {"title": "City", "type": "string"}
    assert "default" not in sent["schema"]["properties"]["nickname"]  # a null default dropped
    assert raw == Person.model_json_schema()  # the model's own schema is not changed


def test_what_strict_form_allows_the_model_class_accepts() -> None:
    answer = '{"name":"a","nickname":null,"tags":[],"home":{"city":"x","zip":null}}'
    assert schema_of(Person).check(answer).error is None


@pytest.mark.parametrize(
    ("schema", "strict"),
    [
        ({"type": "object", "properties": {"a": {"type": "string"}}}, False),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "required": ["a"],
                "additionalProperties": False,
            },
            True,
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "object", "properties": {}}},
                "required": ["a"],
                "additionalProperties": False,
            },
            False,  # the inner object is open
        ),
    ],
)
def test_a_dict_schema_is_sent_as_written_strict_only_when_it_is(
    schema: dict[str, Any], strict: bool
) -> None:
    sent = schema_of(schema).response_format()["json_schema"]
    assert sent["schema"] == schema and sent["strict"] is strict


def test_openai_s_own_wrapper_keeps_its_strict() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    wrapper = {"name": "mine", "schema": schema, "strict": True}
    assert schema_of(wrapper).response_format()["json_schema"] == wrapper


def test_a_map_field_cannot_be_strict_and_is_sent_without_it() -> None:
    class Counts(pydantic.BaseModel):
        by_word: dict[str, int]

    sent = schema_of(Counts).response_format()["json_schema"]
    assert sent["strict"] is False  # strict mode takes no open object: no 400 of our own making


def test_strict_form_copes_with_all_of_and_definitions() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"allOf": [{"$ref": "#/definitions/X"}]}},
        "definitions": {"X": {"type": "object", "properties": {"v": {"type": "integer"}}}},
    }
    strict = strict_form(schema)
    assert strict_problem(strict) is None
    assert strict["properties"]["x"] == {"$ref": "#/definitions/X"}


# -- over HTTP: the simulator refuses what OpenAI refuses ----------------------------------------


def test_the_simulator_refuses_an_open_schema_in_strict_mode_as_openai_does() -> None:
    open_schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    with pytest.raises(nito_nb.BadRequestError) as raised:
        nito_nb.stream(
            "hi",
            model="sim/chat",
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": open_schema, "strict": True},
            },
            sim=QUICK,
        )
    assert "'additionalProperties' is required to be supplied and to be false" in str(raised.value)


def test_a_model_class_with_optional_fields_is_answered_and_parsed() -> None:
    s = nito_nb.stream("Who?", model="sim/chat", schema=Person, sim=QUICK, raise_errors=False)
    s.wait()
    assert s.status == "done", s.exception
    assert isinstance(s.parsed, Person)
