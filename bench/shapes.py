"""The chunk shapes real gateways send, as bodies of any length, for every benchmark.

The simulator's chunks are uniform: every content chunk has the same bytes around its text, which
is the case the engine's layout cache (``_core/layout.py``) is best at. Real gateways differ:

- ``uniform``: the simulator's ``sim/chat`` shape (compact JSON, one content fragment per chunk).
- ``openai``: OpenAI's chunks as recorded in ``tests/data/real/openai-content-1.sse``: ``usage``,
  ``service_tier``, ``system_fingerprint``, and an ``obfuscation`` string of random characters and
  random length (0 to 15, as in the recordings) in every chunk, so no two chunks share a byte
  layout.
- ``reasoning``: DeepSeek's reasoning chunks (``tests/data/real/deepseek-reasoning-1.sse``):
  ``delta.reasoning_content`` beside ``"content":null``, then the answer.
- ``tools``: OpenAI's tool-call argument fragments with ``obfuscation``
  (``tests/data/real/openai-tools-parallel-1.sse``).
- ``openrouter``: OpenRouter's reasoning chunks (``tests/data/real/openrouter-reasoning-1.sse``,
  xAI's Grok through OpenRouter), the format of a Nito-like gateway: each piece twice, as
  ``delta.reasoning`` and in ``delta.reasoning_details`` (``"content":""`` and the role beside).

Each body is built from one recorded chunk of the shape, its text (and obfuscation) replaced per
chunk; the recording's first chunk opens it and its finish and usage chunks end it. The seed is
fixed, so every run sends the same bytes.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REAL = Path(__file__).resolve().parent.parent / "tests" / "data" / "real"
SHAPES = ("uniform", "openai", "reasoning", "tools", "openrouter")
WORDS = [
    "stream",
    "ing ",
    "chunk",
    "s ",
    "over ",
    "SSE",
    " with",
    " accents: é",
    ", ",
    "and more. ",
]
ARGUMENT_PIECES = ['{"a', '": ', "2", ', "', "b", '": 3', ", ", '"text": "', "hello ", 'é"}']
_ALPHABET = string.ascii_letters + string.digits


def _compact(value: Any) -> bytes:
    return (
        b"data: " + json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"
    )


def _recorded(name: str) -> list[dict[str, Any]]:
    chunks = []
    for line in (REAL / f"{name}.sse").read_text(encoding="utf-8").splitlines():
        if line.startswith("data: {"):
            chunks.append(json.loads(line[6:]))
    return chunks


def _uniform(n: int, pieces: Sequence[str] = WORDS) -> bytes:
    lines = []
    for i in range(n):
        word = pieces[i % len(pieces)]
        delta = {"role": "assistant", "content": word} if i == 0 else {"content": word}
        lines.append(
            _compact(
                {
                    "id": "gen-bench",
                    "object": "chat.completion.chunk",
                    "created": 1751299200,
                    "model": "bench/model",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                }
            )
        )
    final = {
        "id": "gen-bench",
        "object": "chat.completion.chunk",
        "created": 1751299200,
        "model": "bench/model",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }
    usage = {
        "id": "gen-bench",
        "object": "chat.completion.chunk",
        "created": 1751299200,
        "model": "bench/model",
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": n + 5},
    }
    lines += [_compact(final), _compact(usage), b"data: [DONE]\n\n"]
    return b"".join(lines)


def _from_recording(
    n: int,
    name: str,
    is_template: Callable[[dict[str, Any]], bool],
    fill: Callable[[dict[str, Any], int], None],
) -> bytes:
    """``n`` chunks of the recording's first chunk that ``is_template`` picks, ``fill`` setting
    each one's text; opened by the recording's first chunk, ended by its chunks after the last
    template (finish, usage). Any ``obfuscation`` is redrawn for every chunk."""
    rng = random.Random(32)
    recorded = _recorded(name)
    at = [i for i, chunk in enumerate(recorded) if is_template(chunk)]
    template = recorded[at[0]]
    head, tail = recorded[: at[0]][:1], recorded[at[-1] + 1 :]

    def obfuscated(chunk: dict[str, Any]) -> dict[str, Any]:
        if "obfuscation" in chunk:
            chunk["obfuscation"] = "".join(rng.choices(_ALPHABET, k=rng.randint(0, 15)))
        return chunk

    lines = [_compact(obfuscated(json.loads(json.dumps(c)))) for c in head]
    for i in range(n):
        chunk = json.loads(json.dumps(template))
        fill(chunk, i)
        lines.append(_compact(obfuscated(chunk)))
    lines += [_compact(obfuscated(c)) for c in tail]
    return b"".join(lines) + b"data: [DONE]\n\n"


def _delta(chunk: dict[str, Any]) -> dict[str, Any]:
    choices = chunk.get("choices") or [{}]
    delta = choices[0].get("delta")
    return delta if isinstance(delta, dict) else {}


def _openai(n: int, pieces: Sequence[str] = WORDS) -> bytes:
    def is_template(chunk: dict[str, Any]) -> bool:
        return set(_delta(chunk)) == {"content"}

    def fill(chunk: dict[str, Any], i: int) -> None:
        chunk["choices"][0]["delta"]["content"] = pieces[i % len(pieces)]

    return _from_recording(n, "openai-content-1", is_template, fill)


def _reasoning(n: int, pieces: Sequence[str] = WORDS) -> bytes:
    def is_template(chunk: dict[str, Any]) -> bool:
        return bool(_delta(chunk).get("reasoning_content")) and "role" not in _delta(chunk)

    def fill(chunk: dict[str, Any], i: int) -> None:
        chunk["choices"][0]["delta"]["reasoning_content"] = pieces[i % len(pieces)]

    return _from_recording(n, "deepseek-reasoning-1", is_template, fill)


def _openrouter(n: int, pieces: Sequence[str] = WORDS) -> bytes:
    def is_template(chunk: dict[str, Any]) -> bool:
        delta = _delta(chunk)
        return bool(delta.get("reasoning")) and bool(delta.get("reasoning_details"))

    def fill(chunk: dict[str, Any], i: int) -> None:
        delta = chunk["choices"][0]["delta"]
        delta["reasoning"] = delta["reasoning_details"][0]["summary"] = pieces[i % len(pieces)]

    return _from_recording(n, "openrouter-reasoning-1", is_template, fill)


def _tools(n: int, pieces: Sequence[str] = ARGUMENT_PIECES) -> bytes:
    def is_template(chunk: dict[str, Any]) -> bool:
        calls = _delta(chunk).get("tool_calls")
        return bool(calls) and calls[0].get("index") == 0 and "id" not in calls[0]

    def fill(chunk: dict[str, Any], i: int) -> None:
        chunk["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] = pieces[
            i % len(pieces)
        ]

    # The recording's first call opens the body (its name and id), its last chunks end it.
    recorded = _recorded("openai-tools-parallel-1")
    opening = next(i for i, c in enumerate(recorded) if _delta(c).get("tool_calls"))
    body = _from_recording(n, "openai-tools-parallel-1", is_template, fill)
    first_call = _compact(recorded[opening])
    first_line_end = body.index(b"\n\n") + 2
    return body[:first_line_end] + first_call + body[first_line_end:]


BUILDERS: dict[str, Callable[..., bytes]] = {
    "uniform": _uniform,
    "openai": _openai,
    "reasoning": _reasoning,
    "tools": _tools,
    "openrouter": _openrouter,
}


def build(shape: str, n: int, pieces: Sequence[str] | None = None) -> bytes:
    """A body of ``n`` chunks of ``shape`` (one of :data:`SHAPES`), then its last chunks and
    ``[DONE]``. ``pieces``: the text of the chunks, cycled (content, reasoning or tool arguments,
    as the shape streams); by default a few words (tool arguments: fragments of JSON)."""
    return BUILDERS[shape](n) if pieces is None else BUILDERS[shape](n, pieces)


def answer_of(body: bytes) -> str:
    """The text a floor client keeps of a body: every choice's content, reasoning and tool
    arguments, joined (what each shape streams)."""
    parts = []
    for line in body.split(b"\n\n"):
        if not line.startswith(b"data: {"):
            continue
        for choice in json.loads(line[6:]).get("choices") or []:
            parts.append(floor_text(choice))
    return "".join(parts)


def floor_text(choice: dict[str, Any]) -> str:
    """What a floor client keeps of one choice: its content, reasoning or tool arguments."""
    delta = choice.get("delta") or {}
    text = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning") or ""
    for call in delta.get("tool_calls") or ():
        text += (call.get("function") or {}).get("arguments") or ""
    return text
