"""`sim/judge`: a grader whose score a test (or a demo) sets from the prompt.

A judge asks for `{"score": ..., "reason": ...}` in a `response_format` schema; every model that
answers in words answers a value of that schema, but its score comes from the seed, the same for
every answer graded. `sim/judge` takes it from the request instead: the last `score: N` (or
`score = N`; N a number, `true` or `false`) written in any message's text is the answer's
`score`, and the rest of that line its `reason`. So a test sets each row's score through the
graded answer (`sim/echo` repeats a prompt that says `score: 4`), and the reason can carry
whatever text a test needs to see come back (markup, say).

It is a gullible judge on purpose: it follows the cue wherever it is, quoted data included, as a
model persuaded by an answer would (docs/SIMULATOR.md says so). The number is sent as written,
in the scale or not, for the code that checks it. Without a cue, the value of the schema that
the seed picks (as `sim/chat`); without a schema, an object of `JUDGE_SCHEMA`.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from typing import Any

from ._reply import Event
from ._request import message_text
from ._schema import instance
from ._writer import ChunkWriter

#: What sim/judge answers when the request asks for no schema.
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
        "reason": {"type": "string", "maxLength": 80},
    },
    "required": ["score", "reason"],
    "additionalProperties": False,
}

_CUE = re.compile(
    r"\bscore\s*[:=]\s*(-?\d+(?:\.\d+)?|true|false)(?![\w.])[ \t]*([^\r\n]*)", re.IGNORECASE
)


def _number(text: str) -> int | float | bool:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    return float(text) if "." in text else int(text)


def judge_value(messages: list[dict[str, Any]], schema: Any, seed: int) -> Any:
    """The JSON value sim/judge answers: the schema's (seeded), its `score` and `reason` taken
    from the last cue in the messages."""
    value = instance(JUDGE_SCHEMA if schema is None else schema, random.Random(seed))
    cues = [cue for m in messages for cue in _CUE.finditer(message_text(m))]
    if cues and isinstance(value, dict):
        number, rest = cues[-1].groups()
        value["score"] = _number(number)
        if "reason" in value:
            value["reason"] = rest.strip() or f"the prompt says score: {number}"
    return value


def judge(w: ChunkWriter) -> Iterator[Event]:
    request = w.request
    wanted = request.response_format
    schema = wanted.schema if wanted is not None and wanted.schema is not None else None
    value = judge_value(request.messages, schema, request.options.seed)
    yield from w.contents(json.dumps(value, ensure_ascii=False))
    yield from w.finish("stop")
