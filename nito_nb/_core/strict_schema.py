"""OpenAI's strict structured outputs: which JSON schemas it takes, and a pydantic schema made so.

With ``"strict": true`` OpenAI answers only a schema in which every object says
``"additionalProperties": false`` and lists every property in ``required`` (an optional field is
a union with ``null``); otherwise the request is a 400 ("Invalid schema for response_format").
Pydantic's ``model_json_schema()`` does neither, so a model class is sent in strict form
(:func:`strict_form`, what the openai SDK's ``parse()`` sends too), and a dict schema the user
wrote is sent strict only when it already is (:func:`strict_problem`): nito_nb never changes what
a user's own dict schema allows. The simulator refuses what OpenAI refuses, with the same check.
Pure: standard library only.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["strict_form", "strict_problem"]


def strict_problem(schema: Any, path: tuple[str, ...] = ()) -> str | None:
    """Why OpenAI's strict mode refuses ``schema`` (where, and what it needs), or None."""
    if not isinstance(schema, dict):
        return None
    properties = schema.get("properties")
    if schema.get("type") == "object" or isinstance(properties, dict):
        if schema.get("additionalProperties") is not False:
            return f"In context={path!r}, 'additionalProperties' is required to be supplied and to be false."
        if isinstance(properties, dict):
            required = schema.get("required")
            missing = [
                name
                for name in properties
                if not isinstance(required, list) or name not in required
            ]
            if missing:
                return (
                    f"In context={path!r}, 'required' is required to be supplied and to be an "
                    f"array including every key in properties. Missing {missing[0]!r}."
                )
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            for name, sub in value.items():
                found = strict_problem(sub, (*path, key, str(name)))
                if found:
                    return found
        elif key in ("items", "additionalItems", "not") and isinstance(value, dict):
            found = strict_problem(value, (*path, key))
            if found:
                return found
        elif key in ("anyOf", "allOf", "oneOf", "prefixItems") and isinstance(value, list):
            for i, sub in enumerate(value):
                found = strict_problem(sub, (*path, key, str(i)))
                if found:
                    return found
    return None


def strict_form(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of a pydantic model's schema that OpenAI's strict mode takes: every object closed
    (``additionalProperties: false``) with every property required, a ``null`` default dropped
    (the field stays nullable), a lone ``allOf`` merged into its place, and a ``$ref`` beside
    other keys (a field's description) unfolded, which strict mode does not take. The answers it
    allows are answers the model class accepts: only fields with defaults become required."""
    root = copy.deepcopy(schema)
    return _close(root, root)


def _close(schema: Any, root: dict[str, Any]) -> Any:
    if not isinstance(schema, dict):
        return schema
    for key in ("$defs", "definitions"):
        defs = schema.get(key)
        if isinstance(defs, dict):
            for name in defs:
                defs[name] = _close(defs[name], root)
    if schema.get("type") == "object" and "additionalProperties" not in schema:
        schema["additionalProperties"] = False
    properties = schema.get("properties")
    if isinstance(properties, dict):
        schema["required"] = list(properties)
        for name in properties:
            properties[name] = _close(properties[name], root)
    if isinstance(schema.get("items"), dict):
        schema["items"] = _close(schema["items"], root)
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            schema[key] = [_close(sub, root) for sub in schema[key]]
    all_of = schema.get("allOf")
    if isinstance(all_of, list):
        if len(all_of) == 1:
            schema.pop("allOf")
            schema.update(_close(all_of[0], root))
        else:
            schema["allOf"] = [_close(sub, root) for sub in all_of]
    if "default" in schema and schema["default"] is None:
        del schema["default"]
    ref = schema.get("$ref")
    if isinstance(ref, str) and len(schema) > 1:
        target = _resolve(root, ref)
        if isinstance(target, dict):
            # the field's own keys (its description) win over the definition's
            merged = {**copy.deepcopy(target), **schema}
            merged.pop("$ref")
            return _close(merged, root)
    return schema


def _resolve(root: dict[str, Any], ref: str) -> Any:
    """The part of ``root`` a local ``$ref`` (``#/$defs/Name``) points at, or None."""
    if not ref.startswith("#/"):
        return None
    found: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(found, dict) or part not in found:
            return None
        found = found[part]
    return found
