"""A JSON value that conforms to a JSON schema, and one that does not: what the simulator answers
to `response_format` (`_structured.py`) and sends as tool-call arguments (`_tool_calls.py`).

Pure (standard library only), deterministic for a given `random.Random`. The subset honoured is
what pydantic's `model_json_schema()` and the openai SDK's strict schemas use:

- `type` (one or a list; `number` takes integers), `enum`, `const`, `anyOf`, `oneOf` (one branch
  is taken), `allOf` (merged into one object: the properties and required names of its parts, the
  names a part with `additionalProperties: false` allows; two parts that bound the same keyword
  of one value are not reconciled), `$ref` to `#/$defs/...`, `#/definitions/...` or any pointer
  into the same document (a recursive model too);
- objects: `properties`, `required`, `additionalProperties` (`false`: no other key; a schema: a
  map, its keys made up, `minProperties`/`maxProperties` of such a map);
- arrays: `items`, `prefixItems` (tuples), `minItems`, `maxItems`, `uniqueItems`;
- strings: `minLength`, `maxLength`, `format` (`date-time`, `date`, `time`, `duration`, `email`,
  `uri`, `uuid`, `ipv4`, `ipv6`, `hostname`);
- numbers: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`.

Any other keyword (`pattern`, `not`, `if`, `patternProperties`, ...) is ignored: the value made
may then break it. Every property of an object is filled, not only the required ones, until the
value is deep or large (`DEPTH`, `BUDGET`); past that, each choice takes the way to the smallest
value (its `rank`: how deep the smallest value of a schema goes), so that a recursive schema ends.
A schema with no finite value (an object that requires itself) is a `SchemaError`.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

__all__ = ["SchemaError", "breaking", "check", "instance"]

#: Containers deeper than this, or values past this many nodes, are made as small as they may be.
DEPTH = 4
BUDGET = 400

TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
_SCALARS = ("string", "number", "integer", "boolean", "null")

_WORDS = (
    "stream", "chunk", "token", "gateway", "latency", "answer", "model", "event", "notebook",
    "schema", "field", "value", "café", "naïve", "Zürich", "東京", "quick", "steady", "partial",
)  # fmt: skip
#: Strings for a property of a known name (as models answer them), when no length rules them out.
_BY_NAME = {
    "city": ("Paris", "São Paulo", "Tokyo", "Zürich"),
    "location": ("Paris, France", "Kraków, Poland", "Osaka, Japan"),
    "timezone": ("Europe/Paris", "Asia/Tokyo", "America/New_York"),
    "query": ("streaming chat completions", "server-sent events"),
    "name": ("Ada Lovelace", "Grace Hopper", "Alan Turing"),
    "country": ("France", "Japan", "Brazil"),
    "language": ("French", "Japanese", "Portuguese"),
}
_FORMATS: dict[str, Callable[[random.Random], str]] = {
    "date-time": lambda r: (
        f"2025-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:"
        f"{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z"
    ),
    "date": lambda r: f"2025-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
    "time": lambda r: f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z",
    "duration": lambda r: f"PT{r.randint(1, 9)}H{r.randint(0, 59)}M",
    "email": lambda r: f"{r.choice(('ada', 'grace', 'alan'))}@example.com",
    "uri": lambda r: (
        f"https://example.com/{r.choice(('streams', 'docs', 'runs'))}/{r.randint(1, 99)}"
    ),
    "uuid": lambda r: str(uuid.UUID(int=r.getrandbits(128), version=4)),
    "ipv4": lambda r: f"192.0.2.{r.randint(1, 254)}",
    "ipv6": lambda r: f"2001:db8::{r.randint(1, 0xFFFF):x}",
    "hostname": lambda r: f"{r.choice(('api', 'gateway', 'edge'))}.example.com",
}


class SchemaError(ValueError):
    """A schema the simulator cannot answer (a broken `$ref`, a contradiction, no finite value)."""


class _Schema:
    """One schema document: its `$ref`s resolved, its `allOf`s merged, the rank of each part."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self._merged: dict[int, Any] = {}
        self._ranks: dict[int, int] = {}
        self._keep: list[Any] = []  # the merged views, alive while their ids are keys
        nodes: list[Any] = []
        seen: set[int] = set()
        pending = [root]
        while pending:
            node = self.view(pending.pop())
            if not isinstance(node, dict) or id(node) in seen:
                continue
            seen.add(id(node))
            nodes.append(node)
            pending.extend(_children(node))
            if "$ref" in node:
                pending.append(self.resolve(node["$ref"]))
        # The least fixed point: a part gets a rank once the parts it needs have one, so a
        # recursive part ranks only through a way out of its recursion.
        changed = True
        while changed:
            changed = False
            for node in nodes:
                if id(node) not in self._ranks:
                    rank = self._rank_now(node)
                    if rank is not None:
                        self._ranks[id(node)] = rank
                        changed = True

    def resolve(self, ref: Any) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaError(f"$ref {ref!r} points outside the schema: only '#/...' is followed")
        node = self.root
        for raw in ref[1:].split("/")[1:] if ref != "#" else []:
            key = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                raise SchemaError(f"$ref {ref!r} names nothing in the schema")
        return node

    def follow(self, node: Any) -> Any:
        """The node a chain of `$ref`s ends at."""
        for _ in range(64):
            if not isinstance(node, dict) or "$ref" not in node:
                return node
            node = self.resolve(node["$ref"])
        raise SchemaError("a $ref that leads to itself")

    def view(self, node: Any) -> Any:
        """The node, or for one with `allOf` the merge of its parts (kept, one per node)."""
        if not isinstance(node, dict) or not isinstance(node.get("allOf"), list):
            return node
        merged = self._merged.get(id(node))
        if merged is None:
            merged = {}
            closed: set[str] | None = (
                None  # the only names a part with additionalProperties false allows
            )
            parts = [{k: v for k, v in node.items() if k != "allOf"}, *node["allOf"]]
            for part in parts:
                part = self.view(self.follow(part))
                if not isinstance(part, dict):
                    continue
                for key, value in part.items():
                    if key == "properties" and isinstance(value, dict):
                        known = merged.setdefault("properties", {})
                        for name, sub in value.items():  # one property in two parts: both apply
                            known[name] = {"allOf": [known[name], sub]} if name in known else sub
                    elif key == "required" and isinstance(value, list):
                        merged["required"] = list(
                            dict.fromkeys([*(merged.get("required") or []), *value])
                        )
                    elif key != "additionalProperties":
                        merged.setdefault(key, value)
                extra = part.get("additionalProperties")
                if extra is False:
                    names = set(_properties(part))
                    closed = names if closed is None else closed & names
                elif isinstance(extra, dict):
                    merged.setdefault("additionalProperties", extra)
            if closed is not None:
                merged["properties"] = {k: v for k, v in _properties(merged).items() if k in closed}
                merged["additionalProperties"] = False
            self._merged[id(node)] = merged
            self._keep.append(merged)
        return merged

    def rank(self, node: Any) -> int | None:
        """How deep the smallest value of the node goes; None when it has none."""
        node = self.view(node)
        if node is True or node == {} or not isinstance(node, dict):
            return None if node is False else 0
        return self._ranks.get(id(node))

    def _rank_now(self, node: dict[str, Any]) -> int | None:
        if "$ref" in node:
            target = self.rank(self.resolve(node["$ref"]))
            return None if target is None else target + 1
        if "const" in node:
            return 0
        if "enum" in node:
            return 0 if isinstance(node["enum"], list) and node["enum"] else None
        branches = _branches(node)
        if branches is not None:
            known = [r for r in (self.rank(b) for b in branches) if r is not None]
            return min(known) + 1 if known else None
        known = [
            r for r in (self._type_rank(node, kind) for kind in types_of(node)) if r is not None
        ]
        return min(known) if known else None

    def _type_rank(self, node: dict[str, Any], kind: str) -> int | None:
        if kind == "string":
            return None if _lengths(node, "minLength", "maxLength") is None else 0
        if kind in ("number", "integer"):
            return None if _bounds(node, kind == "integer") is None else 0
        if kind in _SCALARS:
            return 0
        if kind == "object":
            parts = [_property(node, name) for name in _required(node)]
        elif _lengths(node, "minItems", "maxItems") is None:
            return None
        else:
            parts = [_item(node, i) for i in range(min(_count(node.get("minItems")) or 0, 64))]
        deepest = 0
        for part in parts:
            rank = self.rank(part)
            if rank is None:
                return None
            deepest = max(deepest, rank)
        return deepest + 1


def _children(node: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for key in ("properties", "$defs", "definitions"):
        if isinstance(node.get(key), dict):
            out.extend(node[key].values())
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(node.get(key), list):
            out.extend(node[key])
    for key in ("items", "additionalProperties"):
        value = node.get(key)
        out.extend(value if isinstance(value, list) else [value])
    return out


def _branches(node: dict[str, Any]) -> list[Any] | None:
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list) and node[key]:
            return node[key]
    return None


def types_of(node: Any) -> tuple[str, ...]:
    """The JSON types a schema's own keywords allow (all of them when it says nothing)."""
    if not isinstance(node, dict):
        return TYPES
    kind = node.get("type")
    if isinstance(kind, str) and kind in TYPES:
        return (kind,)
    if isinstance(kind, list) and any(k in TYPES for k in kind):
        return tuple(k for k in TYPES if k in kind)
    if any(k in node for k in ("properties", "required", "additionalProperties")):
        return ("object",)
    if any(k in node for k in ("items", "prefixItems", "minItems", "maxItems")):
        return ("array",)
    if any(k in node for k in ("minLength", "maxLength", "format")):
        return ("string",)
    if any(k in node for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
        return ("number",)
    return TYPES


def _required(node: dict[str, Any]) -> list[str]:
    required = node.get("required")
    return [n for n in required if isinstance(n, str)] if isinstance(required, list) else []


def _properties(node: dict[str, Any]) -> dict[str, Any]:
    properties = node.get("properties")
    return (
        {k: v for k, v in properties.items() if isinstance(k, str)}
        if isinstance(properties, dict)
        else {}
    )


def _property(node: dict[str, Any], name: str) -> Any:
    properties = _properties(node)
    if name in properties:
        return properties[name]
    extra = node.get("additionalProperties", True)
    return extra if isinstance(extra, dict | bool) else True


def _item(node: dict[str, Any], index: int) -> Any:
    prefix = node.get("prefixItems")
    items = node.get("items", True)
    if isinstance(items, list):  # draft 4's tuples
        prefix, items = items, node.get("additionalItems", True)
    if isinstance(prefix, list) and index < len(prefix):
        return prefix[index]
    return items if isinstance(items, dict | bool) else True


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value


def _bounds(node: dict[str, Any], integer: bool) -> tuple[float, float] | None:
    """The closed range a number may take (exclusive bounds moved inward); None when empty.
    A side without a bound: 0 (below a maximum that is not negative), else 100 (or a
    thousandth of a large bound) from the other."""

    def inward(value: float, up: bool) -> float:
        if integer:
            return math.floor(value) + 1 if up else math.ceil(value) - 1
        return math.nextafter(value, math.inf if up else -math.inf)

    low = _number(node.get("minimum"))
    high = _number(node.get("maximum"))
    exclusive_low, exclusive_high = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")
    if exclusive_low is True and low is not None:  # draft 4: a flag on minimum
        low = inward(low, True)
    elif (value := _number(exclusive_low)) is not None:
        low = max(low if low is not None else -math.inf, inward(value, True))
    if exclusive_high is True and high is not None:
        high = inward(high, False)
    elif (value := _number(exclusive_high)) is not None:
        high = min(high if high is not None else math.inf, inward(value, False))
    if low is None:  # a width that a float of that size still tells apart
        low = 0 if high is None or high >= 0 else high - max(100, abs(high) / 1000)
    if high is None:
        high = low + max(100, abs(low) / 1000)
    if integer:
        low, high = math.ceil(low), math.floor(high)
    return (low, high) if low <= high else None


def _lengths(node: dict[str, Any], low_key: str, high_key: str) -> tuple[int, int | None] | None:
    low, high = _count(node.get(low_key)) or 0, _count(node.get(high_key))
    return None if high is not None and high < low else (low, high)


class _Maker:
    """Makes one value: every property, a few items each, and past `DEPTH` or `BUDGET` the
    smallest value of each part (by rank)."""

    def __init__(self, schema: _Schema, rng: random.Random) -> None:
        self.schema = schema
        self.rng = rng
        self.left = BUDGET

    def value(self, node: Any, depth: int = 0, name: str = "") -> Any:
        self.left -= 1
        schema = self.schema
        node = schema.view(node)
        if node is False:
            raise SchemaError("the schema allows no value (false) where a value is needed")
        if not isinstance(node, dict) or node == {}:
            return self._words(name, 1, 3)
        if "$ref" in node:
            return self.value(schema.resolve(node["$ref"]), depth, name)
        if "const" in node:
            return node["const"]
        if "enum" in node:
            if not isinstance(node["enum"], list) or not node["enum"]:
                raise SchemaError("an enum with no value")
            return self.rng.choice(node["enum"])
        small = depth >= DEPTH or self.left <= 0
        branches = _branches(node)
        if branches is not None:
            return self.value(self._pick(branches, schema.rank, small), depth, name)
        if types_of(node) == TYPES:  # nothing said of the value: a few words
            return self._words(name, 1, 24)
        kinds = [k for k in types_of(node) if schema._type_rank(node, k) is not None]
        if not kinds:
            raise SchemaError(f"no value fits {json.dumps(node, ensure_ascii=False)[:80]}")
        kind = self._pick(kinds, lambda k: schema._type_rank(node, k), small)
        if kind == "object":
            return self._object(node, depth, small)
        if kind == "array":
            return self._array(node, depth, small, name)
        if kind == "string":
            return self._string(node, name)
        if kind in ("number", "integer"):
            return self._number(node, kind == "integer")
        return self.rng.random() < 0.5 if kind == "boolean" else None

    def _pick(self, options: list[Any], rank: Callable[[Any], int | None], small: bool) -> Any:
        ranked = [(r, i) for i, r in enumerate(rank(o) for o in options) if r is not None]
        if not ranked:
            raise SchemaError("no branch of an anyOf/oneOf, and no type, has a finite value")
        if small:
            return options[min(ranked)[1]]
        # Some value rather than null, when the schema allows both (an Optional field).
        useful = [i for _, i in ranked if options[i] not in ("null", {"type": "null"})] or [
            i for _, i in ranked
        ]
        return options[self.rng.choice(useful)]

    def _object(self, node: dict[str, Any], depth: int, small: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        required = _required(node)
        for key, sub in _properties(node).items():
            if key in required or (not small and self.schema.rank(sub) is not None):
                out[key] = self.value(sub, depth + 1, key)
        for key in required:
            if key not in out:
                out[key] = self.value(_property(node, key), depth + 1, key)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and not _properties(node):  # a map: make up its keys
            low = _count(node.get("minProperties")) or 0
            high = _count(node.get("maxProperties"))
            count = (
                low
                if small
                else max(low, min(self.rng.randint(1, 3), high if high is not None else 3))
            )
            words = iter(self.rng.sample(_WORDS, len(_WORDS)))
            while len(out) < count:
                key = next(words, None) or f"key_{len(out)}"
                if key not in out:
                    out[key] = self.value(extra, depth + 1, key)
        return out

    def _array(self, node: dict[str, Any], depth: int, small: bool, name: str) -> list[Any]:
        lengths = _lengths(node, "minItems", "maxItems")
        if lengths is None:
            raise SchemaError("minItems is above maxItems")
        low, high = lengths
        prefix = node.get("prefixItems")
        count = (
            low
            if small
            else max(low, len(prefix) if isinstance(prefix, list) else self.rng.randint(1, 3))
        )
        if high is not None:
            count = min(count, high)
        out: list[Any] = []
        seen: set[str] = set()
        unique = node.get("uniqueItems") is True
        tries = 0
        while len(out) < count:
            sub = _item(node, len(out))
            if len(out) >= low and self.schema.rank(sub) is None:
                break  # no further item can be made (prefixItems without items)
            item = self.value(sub, depth + 1, name)
            if unique:
                key = json.dumps(item, sort_keys=True)
                if key in seen:
                    tries += 1
                    if tries > 20:
                        if len(out) >= low:
                            break
                        raise SchemaError(f"no {low} distinct items (uniqueItems) to be found")
                    continue
                seen.add(key)
            out.append(item)
        return out

    def _string(self, node: dict[str, Any], name: str) -> str:
        lengths = _lengths(node, "minLength", "maxLength")
        if lengths is None:
            raise SchemaError("minLength is above maxLength")
        low, high = lengths
        fits = [v for v in (_FORMATS[f](self.rng) for f in [node.get("format")] if f in _FORMATS)]
        fits += list(_BY_NAME.get(name.lower(), ()))
        fits = [v for v in fits if low <= len(v) <= (high if high is not None else len(v))]
        if fits and (node.get("format") in _FORMATS or self.rng.random() < 0.8):
            return fits[0] if node.get("format") in _FORMATS else self.rng.choice(fits)
        return self._words(name, low, high if high is not None else max(low, 24))

    def _words(self, name: str, low: int, high: int) -> str:
        """Whole words, between `low` and `high` characters long (the last word cut, or a
        letter added, only where the lengths ask for it)."""
        target = self.rng.randint(low, max(low, min(high, low + 24)))
        text = ""
        while len(text) < target:
            room = target - len(text) - (1 if text else 0)
            fitting = [w for w in _WORDS if len(w) <= room]
            if fitting:
                word = self.rng.choice(fitting)
            elif len(text) >= max(low, 1):
                break
            elif room <= 0:  # one character short, with no room for a space: a plural
                text += "s"
                continue
            else:  # the lengths ask for more than whole words give: a word cut short
                word = self.rng.choice(_WORDS)[:room]
            text = f"{text} {word}" if text else word
        return text

    def _number(self, node: dict[str, Any], integer: bool) -> int | float:
        bounds = _bounds(node, integer)
        if bounds is None:
            raise SchemaError("minimum is above maximum")
        low, high = bounds
        step = _number(node.get("multipleOf"))
        if step is not None and step > 0:
            if isinstance(step, int) and isinstance(low, int) and isinstance(high, int):
                first, last = -(-low // step), high // step  # exact, however large
            else:
                first, last = math.ceil(low / step), math.floor(high / step)
            # A few multiples, at random, then the ends: one whose division by the step is
            # exact in floating point (as a validator checks it) is taken.
            for k in [
                *(self.rng.randint(first, last) for _ in range(8) if first <= last),
                first,
                last,
            ]:
                value = k * step
                if (
                    low <= value <= high
                    and (value / step).is_integer()
                    and (not integer or float(value).is_integer())
                ):
                    return int(value) if integer else value
            raise SchemaError(f"no multiple of {step} between {low} and {high}")
        if integer:
            return self.rng.randint(int(low), int(high))
        value = round(self.rng.uniform(low, high), 2)
        return value if low <= value <= high else low / 2 + high / 2


def check(schema: Any) -> None:
    """Raise SchemaError (one sentence) when the simulator cannot answer `schema`."""
    if not isinstance(schema, dict | bool):
        raise SchemaError(f"a schema is an object, got {type(schema).__name__}")
    try:
        document = _Schema(schema)
    except RecursionError:
        raise SchemaError("the schema nests too deep") from None
    if document.rank(schema) is None:
        raise SchemaError(
            "no finite JSON value conforms to it (an object that requires itself, "
            "an empty enum, a minimum above the maximum, ...)"
        )


def instance(schema: Any, rng: random.Random) -> Any:
    """A value that conforms to `schema` (within the subset in this module's docstring)."""
    check(schema)
    try:
        return _Maker(_Schema(schema), rng).value(schema)
    except RecursionError:
        raise SchemaError("the schema nests too deep") from None


#: A value of each JSON type, tried in this order on a schema: first the containers, which
#: pydantic's lax mode does not take for a scalar either (it reads a number as a date, a digit
#: string as a number, `true` as an integer); `true` last, for a schema that allows every other
#: type (then no JSON value but `true` breaks it, even where pydantic reads it as a number).
_WRONG: tuple[Any, ...] = (
    ["not", "this"],
    {"not": "this"},
    "not what the schema asks for",
    4.5,
    None,
    True,
)


def breaking(schema: Any, value: Any, rng: random.Random) -> tuple[bool, Any]:
    """`value` (made by :func:`instance`) changed so that it fails `schema`, and True; or False
    and `value` when every JSON value conforms (then only text that is not JSON breaks it).

    The change is one that fails both a JSON-schema validator and pydantic: a property of the
    top object given a value its schema refuses (`_wrong`), else one of its required properties
    (without a default) left out, else the whole value of another type. Only for a schema that
    allows every type but boolean is it `true`, which pydantic's lax mode may read as a number.
    """
    document = _Schema(schema)
    root = document.view(document.follow(schema))
    if isinstance(value, dict) and isinstance(root, dict) and _branches(root) is None:
        properties = _properties(root)
        # A value of a wrong type first: a required property left out may have a default that
        # a schema does not say (the openai SDK's strict schemas drop `default: null`).
        ways = [
            (key, wrong[0])
            for key, sub in properties.items()
            if key in value and (wrong := _wrong(document, sub))
        ]
        if ways:
            key, new = rng.choice(ways)
            return True, {**value, key: new}
        dropped = [
            k
            for k in _required(root)
            if k in value
            and not (isinstance(properties.get(k), dict) and "default" in properties[k])
        ]
        if dropped:
            key = rng.choice(dropped)
            return True, {k: v for k, v in value.items() if k != key}
    wrong = _wrong(document, schema)
    return (True, wrong[0]) if wrong else (False, value)


def _wrong(document: _Schema, node: Any) -> tuple[Any] | None:
    """A value the node certainly refuses, in a 1-tuple; None when it may take any."""
    node = document.view(document.follow(node))
    if isinstance(node, dict) and isinstance(node.get("enum"), list) and "type" not in node:
        return (_outside(node["enum"]),)
    choices = [v for v in _WRONG if _refuses(document, node, v, 0)]
    if isinstance(node, dict) and isinstance(node.get("enum"), list):
        return (choices[0] if choices else _outside(node["enum"]),)
    return (choices[0],) if choices else None


def _outside(values: list[Any]) -> str:
    """A string that is none of `values` (an enum's)."""
    text = "none of " + " | ".join(str(v) for v in values)[:40]
    return text if text not in values else text + "!"


def _refuses(document: _Schema, node: Any, value: Any, depth: int) -> bool:
    """Whether the node certainly refuses `value` (one of `_WRONG`): by its type, by an enum or
    const that does not hold it, or in every branch of an anyOf/oneOf (so a string breaks
    `anyOf: [{enum: ["a", null, 1.5]}, {type: array}, {type: object}]`, which leaves out no type
    but boolean)."""
    node = document.view(document.follow(node))
    if node is False:
        return True
    if not isinstance(node, dict) or depth > 32:
        return False
    if "const" in node or isinstance(node.get("enum"), list):
        # Python's == takes `true` for 1: then the value is kept, never wrongly called refused.
        return value not in ([node["const"]] if "const" in node else node["enum"])
    branches = _branches(node)
    if branches is not None:
        return all(_refuses(document, b, value, depth + 1) for b in branches)
    kinds = set(types_of(node))
    if "number" in kinds:
        kinds.add("integer")
    return not kinds & set(_types_of_value(value))


def _types_of_value(value: Any) -> tuple[str, ...]:
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("boolean",)
    if isinstance(value, int):
        return ("integer", "number")
    if isinstance(value, float):
        return ("number", "integer") if value.is_integer() else ("number",)
    if isinstance(value, str):
        return ("string",)
    return ("array",) if isinstance(value, list) else ("object",)
