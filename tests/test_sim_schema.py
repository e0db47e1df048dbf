"""The simulator's JSON-schema answers (`nito_nb/sim/_schema.py`), checked by independent validators.

For random schemas of the subset the module honours, the value it makes validates with
`jsonschema` (Draft 2020-12, formats checked), and the value it breaks does not; pydantic models
(their `model_json_schema()` and the openai SDK's strict form of it) validate what it makes and
refuse what it breaks.
"""

from __future__ import annotations

import datetime
import enum
import json
import random
import uuid
from typing import Annotated, Any, Literal

import jsonschema
import pydantic
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from openai.lib._pydantic import to_strict_json_schema

from nito_nb.sim import _schema


def validator(schema: Any) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


NAMES = st.sampled_from(["city", "name", "label", "score", "items", "note", "when", "a", "b", "é"])
SCALAR = st.none() | st.booleans() | st.integers(-50, 50) | st.text(max_size=6)


@st.composite
def strings(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if draw(st.booleans()):
        schema["format"] = draw(st.sampled_from(
            ["date-time", "date", "time", "duration", "email", "uri", "uuid", "ipv4", "ipv6", "hostname"]
        ))  # fmt: skip
        return schema
    low = draw(st.none() | st.integers(0, 30))
    high = draw(st.none() | st.integers(low or 0, 40))
    if low is not None:
        schema["minLength"] = low
    if high is not None:
        schema["maxLength"] = high
    return schema


@st.composite
def numbers(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["integer", "number"]))
    schema: dict[str, Any] = {"type": kind}
    low = draw(st.integers(-1000, 1000) | st.floats(-1e9, 1e9) | st.sampled_from([1e20, -1e300]))
    # wider than a float's step
    span = max(draw(st.integers(4, 2000) | st.floats(4, 1e6)), abs(low) / 1000)
    if draw(st.booleans()):
        schema["exclusiveMinimum" if draw(st.booleans()) else "minimum"] = low
    if draw(st.booleans()):
        schema["exclusiveMaximum" if draw(st.booleans()) else "maximum"] = low + span
    if draw(st.booleans()):
        steps = [1, 2, 5] if kind == "integer" else [0.5, 0.25, 2, 0.1]
        schema["multipleOf"] = draw(st.sampled_from(steps))
        if (
            "multipleOf" in schema
            and schema.get("maximum", schema.get("exclusiveMaximum")) is not None
        ):
            # a range wide enough to hold a multiple
            for key in ("maximum", "exclusiveMaximum"):
                if key in schema:
                    schema[key] = low + max(span, 20)
    return schema


LEAVES = (
    strings()
    | numbers()
    | st.just({"type": "boolean"})
    | st.just({"type": "null"})
    | st.lists(SCALAR, min_size=1, max_size=4, unique_by=lambda v: json.dumps(v)).map(
        lambda v: {"enum": v}
    )
    | SCALAR.map(lambda v: {"const": v})
    | st.just({})
)


def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    @st.composite
    def objects(draw: st.DrawFn) -> dict[str, Any]:
        properties = draw(st.dictionaries(NAMES, children, max_size=4))
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        schema["required"] = (
            draw(st.lists(st.sampled_from(sorted(properties)), unique=True)) if properties else []
        )
        extra = draw(st.sampled_from(["absent", "false", "schema"]))
        if extra == "false":
            schema["additionalProperties"] = False
        elif extra == "schema" and not properties:
            schema["additionalProperties"] = draw(children)
            low = draw(st.integers(0, 3))
            schema["minProperties"], schema["maxProperties"] = low, low + draw(st.integers(0, 3))
        return schema

    @st.composite
    def arrays(draw: st.DrawFn) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "array", "items": draw(children)}
        low = draw(st.integers(0, 3))
        schema["minItems"] = low
        if draw(st.booleans()):
            schema["maxItems"] = low + draw(st.integers(0, 3))
        return schema

    @st.composite
    def tuples(draw: st.DrawFn) -> dict[str, Any]:
        prefix = draw(st.lists(children, min_size=1, max_size=3))
        return {
            "type": "array",
            "prefixItems": prefix,
            "minItems": len(prefix),
            "maxItems": len(prefix),
        }

    unions = st.lists(children, min_size=1, max_size=3).map(lambda branches: {"anyOf": branches})
    nullable = children.map(lambda s: {"anyOf": [s, {"type": "null"}]})
    one_of_objects = st.lists(
        st.sampled_from(["cat", "dog", "fish"]), min_size=1, max_size=3, unique=True
    ).map(
        lambda kinds: {
            "oneOf": [
                {"type": "object", "properties": {"kind": {"const": k}}, "required": ["kind"]}
                for k in kinds
            ]
        }  # a discriminated union, as pydantic emits one
    )

    @st.composite
    def merged(draw: st.DrawFn) -> dict[str, Any]:
        # Parts that do not contradict each other (the module does not reconcile two parts that
        # bound the same value): distinct property names, and at most one part closed.
        names = draw(st.lists(NAMES, unique=True, max_size=5))
        cut = draw(st.integers(0, len(names)))
        parts = []
        for own in (names[:cut], names[cut:]):
            properties = {name: draw(children) for name in own}
            parts.append({"type": "object", "properties": properties,
                          "required": draw(st.lists(st.sampled_from(own), unique=True)) if own else []})  # fmt: skip
        if draw(st.booleans()):  # one closed part that allows every name of the others
            parts.append({"type": "object", "properties": {name: {} for name in names},
                          "additionalProperties": False})  # fmt: skip
        return {"allOf": parts}

    return objects() | arrays() | tuples() | unions | nullable | one_of_objects | merged()


SCHEMAS = st.recursive(LEAVES, containers, max_leaves=12)


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """A root object whose properties may refer to definitions (`$defs`, `$ref`), as pydantic's
    schemas do, sometimes to a recursive one."""
    definitions = draw(st.dictionaries(st.sampled_from(["A", "B", "C"]), SCHEMAS, max_size=3))
    definitions["Tree"] = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
        },
        "required": ["name", "children"],
    }
    refs = st.sampled_from(sorted(definitions)).map(lambda n: {"$ref": f"#/$defs/{n}"})
    properties = draw(st.dictionaries(NAMES, SCHEMAS | refs, min_size=1, max_size=5))
    root = {
        "type": "object",
        "properties": properties,
        "required": draw(st.lists(st.sampled_from(sorted(properties)), unique=True)),
        "$defs": definitions,
    }
    if draw(st.booleans()):
        root["additionalProperties"] = False
    return root


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SCHEMAS | documents(), st.integers(0, 2**32))
# Unions that leave out no type but boolean: the first as hypothesis found it (4.5 breaks it, no
# value of its enum), `true` breaks the second, a string none of the enum's values the third.
@example(
    {
        "anyOf": [
            {
                "anyOf": [
                    {
                        "anyOf": [
                            {"type": "object", "properties": {}, "required": []},
                            {"type": "array", "items": {"type": "string"}, "minItems": 0},
                            {"anyOf": [{"type": "string"}, {"enum": [0]}]},
                        ]
                    },
                    {"type": "null"},
                ]
            },
            {"type": "null"},
        ]
    },
    0,
)
@example(
    {
        "anyOf": [
            {"anyOf": [{"type": "null"}, {"type": "string"}]},
            {"anyOf": [{"type": "array", "items": {}}, {"type": "object", "properties": {}}]},
            {"type": "number"},
        ]
    },
    0,
)
@example(
    {"anyOf": [{"enum": [None, "a", 1.5]}, {"type": "array", "items": {}}, {"type": "object"}]}, 0
)
def test_the_value_made_validates_and_the_value_broken_does_not(
    schema: dict[str, Any], seed: int
) -> None:
    _schema.check(schema)
    value = _schema.instance(schema, random.Random(seed))
    json.dumps(value, allow_nan=False)  # JSON, no NaN nor infinity
    validator(schema).validate(value)
    assert value == _schema.instance(schema, random.Random(seed))  # deterministic
    broken, bad = _schema.breaking(schema, value, random.Random(seed))
    if broken:
        assert list(validator(schema).iter_errors(bad)), bad
    else:  # only when the schema takes a value of any type
        for probe in (
            None,
            True,
            4.5,
            42,
            "not what the schema asks for",
            ["not", "this"],
            {"not": "this"},
        ):
            assert validator(schema).is_valid(probe)


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"$ref": "#/$defs/Nope"}, "names nothing"),
        ({"$ref": "https://example.com/schema.json"}, "points outside"),
        ({"type": "object", "properties": {"me": {"$ref": "#"}}, "required": ["me"]}, "no finite"),
        ({"enum": []}, "no finite"),
        ({"type": "integer", "minimum": 5, "maximum": 4}, "no finite"),
        ({"type": "string", "minLength": 5, "maxLength": 4}, "no finite"),
        ({"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}}, "itself"),
        ("not a schema", "a schema is an object"),
    ],
)
def test_a_schema_that_cannot_be_answered_says_why(schema: Any, says: str) -> None:
    with pytest.raises(_schema.SchemaError, match=says):
        _schema.check(schema)


class Colour(str, enum.Enum):
    red = "red"
    blue = "blue"


class Address(pydantic.BaseModel):
    city: str
    postcode: Annotated[str, pydantic.Field(min_length=5, max_length=5)]


class Tree(pydantic.BaseModel):
    name: str
    children: list[Tree] = []


class Verdict(pydantic.BaseModel):
    label: Literal["spam", "ham"]
    confidence: Annotated[float, pydantic.Field(ge=0, le=1)]
    reasons: Annotated[list[str], pydantic.Field(min_length=1, max_length=3)]
    colour: Colour
    address: Address
    maybe: int | None = None
    when: datetime.datetime
    id: uuid.UUID
    pair: tuple[int, str]
    tree: Tree
    scores: dict[str, int]
    either: Address | int
    tags: set[str]
    count: Annotated[int, pydantic.Field(gt=0, lt=10, multiple_of=3)]


class Cat(pydantic.BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(pydantic.BaseModel):
    kind: Literal["dog"]
    good: bool


class Pet(pydantic.BaseModel):
    pet: Annotated[Cat | Dog, pydantic.Field(discriminator="kind")]


@pytest.mark.parametrize("model", [Verdict, Tree, Pet, Address])
@pytest.mark.parametrize("strict", [False, True])
def test_pydantic_reads_what_is_made_and_refuses_what_is_broken(
    model: type[pydantic.BaseModel], strict: bool
) -> None:
    schema = to_strict_json_schema(model) if strict else model.model_json_schema()
    for seed in range(40):
        value = _schema.instance(schema, random.Random(seed))
        model.model_validate_json(json.dumps(value))
        broken, bad = _schema.breaking(schema, value, random.Random(seed))
        assert broken
        with pytest.raises(pydantic.ValidationError):
            model.model_validate_json(json.dumps(bad))
        assert list(validator(schema).iter_errors(bad))


class Loose(pydantic.BaseModel):
    a: Literal["a", None, 1.5] | list[int] | dict[str, int] = None


def test_a_union_that_leaves_out_only_boolean_is_broken_in_its_own_property() -> None:
    schema = Loose.model_json_schema()
    value = _schema.instance(schema, random.Random(0))
    broken, bad = _schema.breaking(schema, value, random.Random(0))
    assert broken and bad == {**value, "a": "not what the schema asks for"}
    with pytest.raises(pydantic.ValidationError):
        Loose.model_validate_json(json.dumps(bad))
    assert [e.path[0] for e in validator(schema).iter_errors(bad)] == ["a"]


def test_a_recursive_schema_ends_and_strings_are_words() -> None:
    value = _schema.instance(Tree.model_json_schema(), random.Random(3))
    depth, node = 0, value
    while node.get("children"):
        depth, node = depth + 1, node["children"][0]
    assert depth <= _schema.DEPTH
    made = _schema.instance(
        {"type": "object", "properties": {"city": {"type": "string"}}}, random.Random(0)
    )
    assert (
        made["city"] in ("Paris", "São Paulo", "Tokyo", "Zürich")
        or made["city"].replace(" ", "").isalpha()
    )
