"""Structured output: what a ``schema=`` asks of the model, and how its answer is read.

- :func:`schema_of`: a user's pydantic model class or JSON-schema dict as a :class:`Schema`
  (its name, its JSON schema, its ``response_format``). pydantic is imported only when the user
  passed a pydantic model: a dict schema never needs it.
- :func:`schema_in`: the schema a request asked for in its own ``response_format``
  (``json_schema``), so that a Stream loaded from a log, a run's stored one, or one made with
  ``response_format=`` by hand is read the same way (as dicts: no model class travels in a log).
- :meth:`Schema.partial`: the object so far, while the JSON streams, and which field is being
  written (``_core/partial_json.py``).
- :meth:`Schema.check`: the whole answer validated: the object (the model instance, or the dict),
  or a :class:`ParseError` listing each failure by field path.

Why these libraries:

- ``jiter`` (pydantic's JSON parser, in Rust; openai-python depends on it already) for the partial
  parse: ``partial_mode="trailing-strings"`` returns the object of a document cut anywhere in one
  call, keeping the string being written, so the live view shows a field grow; it is re-run at
  each refresh on the whole text, which a pure-Python partial parser (``partial-json-parser``)
  does several times slower.
- ``jsonschema`` for a dict schema: pydantic's ``TypeAdapter`` validates Python types, it does not
  read a JSON-schema document, so it cannot check a dict schema; ``jsonschema`` implements the
  JSON-schema drafts themselves and reports each error with its path.
- a pydantic model validates itself (``model_validate_json``): its own types, validators and
  ``Literal`` s, which no JSON schema says all of.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ._core.errors import ConfigurationError
from ._core.partial_json import Path, open_path, path_text
from ._core.strict_schema import strict_form, strict_problem

__all__ = [
    "FieldError",
    "ParseError",
    "Partial",
    "Schema",
    "schema_in",
    "schema_of",
    "structure_of",
]

#: OpenAI's rule for ``json_schema.name``.
_NAME = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True)
class FieldError:
    """One failure: where (``reasons[1]``, ``(root)``) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class ParseError:
    """Why an answer is not the schema's object: each failure by field path (``str()`` joins
    them on one line; the raw text stays the Stream's ``content``)."""

    errors: tuple[FieldError, ...]

    def __str__(self) -> str:
        return "; ".join(str(error) for error in self.errors)

    def __repr__(self) -> str:
        return f"ParseError({str(self)!r})"


@dataclass(frozen=True)
class Partial:
    """The object parsed so far (None before the first bracket) and the path of the value being
    written (None once the document is complete)."""

    value: Any
    writing: Path | None


@dataclass(frozen=True)
class Checked:
    value: Any  # the model instance or the dict; None when invalid
    error: ParseError | None


@dataclass(frozen=True, eq=False)
class Schema:
    """A structured answer's schema: ``name``, ``json_schema`` (what the request sends), and the
    pydantic ``model`` that validates it (None for a dict schema: ``jsonschema`` does)."""

    name: str
    json_schema: dict[str, Any]
    model: Any = None
    #: OpenAI's ``strict`` as the user's own ``{"name", "schema", "strict"}`` said it; None: decided
    #: from the schema (``response_format``).
    strict: bool | None = None

    def response_format(self) -> dict[str, Any]:
        """The request's ``response_format`` (OpenAI's structured outputs). A pydantic model is sent
        in strict form (``_core/strict_schema.py``: the openai SDK's ``parse()`` sends the same); a
        dict schema as written, strict only if it already is what strict mode takes, so that no
        schema of the user's is answered 400 for not being closed (docs/STRUCTURED.md)."""
        schema = self.json_schema
        if self.model is not None:
            schema = strict_form(schema)
        strict = self.strict if self.strict is not None else strict_problem(schema) is None
        return {
            "type": "json_schema",
            "json_schema": {"name": self.name, "schema": schema, "strict": strict},
        }

    @property
    def fields(self) -> list[str]:
        """The top-level fields the schema declares, in its order (a frame's ``out.<field>``)."""
        properties = self.json_schema.get("properties")
        return [str(name) for name in properties] if isinstance(properties, dict) else []

    def partial(self, text: str) -> Partial:
        """The object in ``text`` so far (a JSON document cut anywhere), and where it is written."""
        if not text.strip():
            return Partial(None, None)
        try:
            import jiter
        except ImportError:  # the live view then shows the raw text only
            return Partial(None, open_path(text))
        try:
            value = jiter.from_json(
                text.encode("utf-8", "surrogatepass"), partial_mode="trailing-strings"
            )
        except ValueError:
            value = None
        return Partial(value, open_path(text))

    def check(self, text: str, refusal: str | None = None) -> Checked:
        """The whole answer validated: the object, or the failures by field path."""
        if not text.strip():
            why = (
                f"no JSON: the model refused ({refusal})"
                if refusal
                else "no JSON: the answer is empty"
            )
            return Checked(None, ParseError((FieldError("(root)", why),)))
        try:
            data = json.loads(text)
        except ValueError as exc:
            cut = " (the answer stops mid-document)" if open_path(text) is not None else ""
            return Checked(None, ParseError((FieldError("(root)", f"not valid JSON{cut}: {exc}"),)))
        if self.model is not None:
            return self._check_model(text)
        return self._check_dict(data)

    def _check_model(self, text: str) -> Checked:
        import pydantic

        try:
            return Checked(self.model.model_validate_json(text), None)
        except pydantic.ValidationError as exc:
            errors = tuple(
                FieldError(path_text(tuple(error.get("loc", ()))), str(error.get("msg", "")))
                for error in exc.errors()
            )
            return Checked(None, ParseError(errors))

    def _check_dict(self, data: Any) -> Checked:
        try:
            import jsonschema
        except ImportError:
            raise ConfigurationError(
                "a dict schema is checked with jsonschema: pip install jsonschema "
                "(or pip install 'nito_nb[structured]')"
            ) from None
        validator_class = jsonschema.validators.validator_for(self.json_schema)
        validator = validator_class(self.json_schema)
        found = sorted(
            validator.iter_errors(data), key=lambda error: list(map(str, error.absolute_path))
        )
        if not found:
            return Checked(data, None)
        return Checked(
            None,
            ParseError(
                tuple(
                    FieldError(path_text(tuple(error.absolute_path)), error.message)
                    for error in found
                )
            ),
        )


def _name(raw: Any) -> str:
    name = _NAME.sub("_", str(raw or ""))[:64]
    return name or "answer"


def schema_of(value: Any) -> Schema:
    """A user's ``schema=``: a pydantic model class, a JSON-schema dict, or OpenAI's own
    ``{"name", "schema", "strict"}`` wrapper. Anything else: one line that says what to pass."""
    if isinstance(value, Schema):
        return value
    if isinstance(value, dict):
        if isinstance(value.get("schema"), dict) and "name" in value and "properties" not in value:
            strict = value.get("strict")
            return Schema(
                _name(value["name"]),
                value["schema"],
                strict=strict if isinstance(strict, bool) else None,
            )
        return Schema(_name(value.get("title")), value)
    if (
        isinstance(value, type)
        and callable(getattr(value, "model_json_schema", None))
        and callable(getattr(value, "model_validate_json", None))
    ):
        model: Any = value
        return Schema(_name(model.__name__), model.model_json_schema(), model)
    raise ConfigurationError(
        f"schema= takes a pydantic model class or a JSON-schema dict, not {type(value).__name__} "
        f"{str(value)[:60]!r}"
    )


def schema_in(request: Any) -> Schema | None:
    """The schema a request's ``response_format`` asked for (``json_schema``), as a dict schema."""
    params = request.get("params") if isinstance(request, dict) else None
    response_format = params.get("response_format") if isinstance(params, dict) else None
    if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
        return None
    return Schema(_name(spec.get("name")), spec["schema"])


def structure_of(stream: Any) -> Schema | None:
    """The schema a Stream's answer is read with: the one given to ``schema=`` (a pydantic model
    stays one), else the one its request's ``response_format`` asked for; None for a free answer."""
    try:  # a duck-typed state's __getattr__ may raise a LookupError for what it lacks
        given = getattr(stream, "_schema", None)
        if isinstance(given, Schema):
            return given
        request = getattr(stream, "request", None)
    except LookupError:
        return None
    return schema_in(request)
