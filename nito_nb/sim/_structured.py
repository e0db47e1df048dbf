"""Answers in JSON: what a scenario says when the request's `response_format` asks for JSON, and
the two scenarios that break it, `sim/json-invalid` and `sim/json-cut`.

- `json_schema`: a value that conforms to the schema (`_schema.instance`), the same for the same
  seed (each of `n` choices has its own).
- `json_object` (or `json_schema` without a schema): an answer object,
  `{"answer": <the scenario's text>, "confidence": ..., "topics": [...]}` (`ANSWER_SCHEMA`).

The JSON text is streamed as any answer is, one token-ish piece per chunk at the request's pace
(`ChunkWriter.contents`), so that a client sees a partial object grow.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

from ._reply import Event
from ._request import SimRequest
from ._schema import breaking, instance
from ._texts import CHAT_ANSWERS
from ._writer import ChunkWriter, Generate, tokenize

#: The answer object of `json_object`: the scenario's own text under "answer".
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "topics": {
            "type": "array",
            "items": {"type": "string", "maxLength": 24},
            "minItems": 1,
            "maxItems": 3,
        },
    },
    "required": ["answer", "confidence", "topics"],
    "additionalProperties": False,
}


def _value(request: SimRequest, text: str) -> Any:
    """The JSON value of the answer (a JSON answer is asked for, or a json-* scenario runs)."""
    rng = random.Random(request.options.seed)
    wanted = request.response_format
    if wanted is not None and wanted.schema is not None:
        return instance(wanted.schema, rng)  # parse_request tried this seed: it does not fail
    value = instance(ANSWER_SCHEMA, rng)
    value["answer"] = text
    return value


def _dumps(value: Any) -> str:
    # As models write it: non-ASCII as is, a space after each separator.
    return json.dumps(value, ensure_ascii=False)


def answer_text(request: SimRequest, text: str) -> str:
    """What a scenario answers: its `text`, or the JSON the request's `response_format` asks for."""
    if request.response_format is None:
        return text
    return _dumps(_value(request, text))


def _with_syntax_error(text: str) -> str:
    """JSON text made invalid as models slip: a comma before the closing brace or bracket."""
    if text.endswith(("}", "]")):
        return f"{text[:-1]},{text[-1]}" if len(text) > 2 else f"{text[0]},{text[-1]}"
    return text + ","


def _json_invalid(w: ChunkWriter) -> Iterator[Event]:
    request = w.request
    value = _value(request, CHAT_ANSWERS[request.options.seed % len(CHAT_ANSWERS)])
    wanted = request.response_format
    text = None
    if wanted is not None and wanted.schema is not None:
        broken, bad = breaking(wanted.schema, value, random.Random(request.options.seed))
        text = _dumps(bad) if broken else None
    # No schema, or one that every JSON value meets: what breaks it is text that is not JSON.
    yield from w.contents(text if text is not None else _with_syntax_error(_dumps(value)))
    yield from w.finish("stop")


def _json_cut(w: ChunkWriter) -> Iterator[Event]:
    request = w.request
    text = _dumps(_value(request, CHAT_ANSWERS[request.options.seed % len(CHAT_ANSWERS)]))
    pieces = tokenize(text)
    # About two thirds of the pieces: inside the object, never the whole of it.
    head = "".join(pieces[: len(pieces) * 2 // 3]) or text[: len(text) // 2]
    yield from w.contents(head)
    yield from w.finish("length")  # as a model that ran out of tokens


STRUCTURED: dict[str, Generate] = {
    "sim/json-invalid": _json_invalid,
    "sim/json-cut": _json_cut,
}
