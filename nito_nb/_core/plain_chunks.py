"""The plain chunks: the tests that let a chunk take a shortcut past :func:`~.chunk.read_chunk`.

Most chunks of a stream are one fragment of text and nothing else: a content fragment, a plain
reasoning string (DeepSeek, vLLM), tool-call arguments (OpenAI), or OpenRouter's reasoning, one
fragment sent twice (``reasoning`` and its one ``reasoning_details`` entry). The accumulator folds them without
reading the whole chunk, and the parser's layout cache (``layout.py``) parses them by their layout;
each test here says when a chunk is such a chunk, and what it reads as, exactly as ``read_chunk``
would read it (``tests/test_varying_layout.py`` checks that both paths agree). Apart from the
reader, which reads any chunk whole: these only say when that reading may be skipped.
"""

from __future__ import annotations

from typing import Any

from .chunk import PAYLOAD_KEY, READABLE, ReasoningPiece, ToolFragment

__all__ = [
    "WITH_DETAIL",
    "plain_choice",
    "plain_content",
    "plain_detailed",
    "plain_reasoning",
    "plain_tool_fragments",
]

#: The slot of a chunk :func:`plain_detailed` reads: the parser's and the accumulator's name for it.
WITH_DETAIL = "reasoning+detail"

#: Keys whose mere presence means something: a chunk with one of them is never "plain content".
MEANINGFUL = frozenset({"error", "usage", "web_search", "free_tier", "x_groq"})
#: Those of them whose null says nothing (``read_chunk`` reads it as absent).
_NULL_IS_ABSENT = frozenset({"error", "usage", "x_groq"})


def plain_choice(chunk: Any) -> dict[str, Any] | None:
    """Choice 0 of a chunk that has that one choice, unfinished and without a usage of its own,
    and no key that means something beside it (a null ``usage``, ``error`` or ``x_groq`` says
    nothing: :func:`read_chunk` reads it as absent, and OpenAI sends ``"usage":null`` in every
    chunk); else None. The first half of every plain-chunk test below."""
    if type(chunk) is not dict:
        return None
    if not MEANINGFUL.isdisjoint(chunk):
        for key in MEANINGFUL.intersection(chunk):
            if key not in _NULL_IS_ABSENT or chunk[key] is not None:
                return None
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict:
        return None
    choice = choices[0]
    if choice.get("finish_reason") is not None or choice.get("index", 0) != 0 or "usage" in choice:
        return None  # usage inside the choice (Moonshot): read_chunk reads it
    if choice.get("logprobs") is not None:
        # Its tokens spell the same text again: a text of their own, which the redactor reads
        # only on the full path (a shortcut let a key echoed in them through).
        return None
    return choice


def plain_content(chunk: Any) -> str | None:
    """The content of a chunk that is nothing but one content fragment of choice 0 (not finished,
    no meaningful key, every other value a scalar); else None. The one test behind both
    shortcuts (the accumulator's and the parser's layout cache): such a chunk reads as its text."""
    choice = plain_choice(chunk)
    if choice is None:
        return None
    delta = choice.get("delta")
    if type(delta) is not dict or len(delta) != 1:
        return None
    content = delta.get("content")
    return content if type(content) is str else None


def plain_reasoning(delta: dict[str, Any]) -> list[ReasoningPiece] | None:
    """The reasoning pieces of the delta of a :func:`plain_choice` that holds nothing but plain
    reasoning strings (``reasoning``, ``reasoning_content``) beside a null or empty content, as
    :func:`read_chunk` reads them (in the same order); else None. DeepSeek's and vLLM's reasoning
    chunks: the accumulator folds them without reading the whole chunk."""
    pieces = []
    for name, value in delta.items():
        if name == "reasoning" or name == "reasoning_content":
            if type(value) is not str:
                if value is not None:
                    return None  # a problem to note: the full reading
                continue
        elif name != "content" or value:  # "content": null or "" beside the reasoning
            return None
    for name in ("reasoning", "reasoning_content"):
        text = delta.get(name)
        if text:
            pieces.append(ReasoningPiece(name, None, text, None))
    return pieces


def plain_detailed(delta: dict[str, Any]) -> str | None:
    """The text of the delta of a :func:`plain_choice` that is OpenRouter's reasoning chunk: a
    ``reasoning`` string and one readable ``reasoning_details`` entry (``reasoning.text`` or
    ``reasoning.summary``, an integer index) whose text is the same string, beside a null or empty
    content and a role; else None. ``read_chunk`` reads it as two pieces of that text, the detail
    and the plain string (which the answer shows only without readable details: rule 4)."""
    text = delta.get("reasoning")
    details = delta.get("reasoning_details")
    if type(text) is not str or type(details) is not list or len(details) != 1:
        return None
    for name, value in delta.items():
        if name == "content":
            if value is not None and value != "":
                return None
        elif name == "role":
            if type(value) is not str:
                return None
        elif name != "reasoning" and name != "reasoning_details":
            return None
    detail = details[0]
    if type(detail) is not dict:
        return None
    kind = detail.get("type")
    if kind not in READABLE or type(detail.get("index")) is not int:
        return None
    payload = detail.get(PAYLOAD_KEY.get(kind, "text"))
    return text if type(payload) is str and payload == text else None


def plain_tool_fragments(delta: dict[str, Any]) -> list[ToolFragment] | None:
    """The fragments of the delta of a :func:`plain_choice` that holds nothing but tool-call
    fragments with a ``function`` object and string (or absent) arguments, beside a null
    content, as :func:`read_chunk` reads them; else None. Every tool-call argument chunk of
    OpenAI's: the accumulator folds them without reading the whole chunk."""
    calls = None
    for name, value in delta.items():
        if name == "tool_calls":
            calls = value
        elif name != "content" or value is not None:
            return None
    if type(calls) is not list or not calls:
        return None
    fragments = []
    for fragment in calls:
        if type(fragment) is not dict:
            return None
        function = fragment.get("function")
        if type(function) is not dict:
            return None
        arguments = function.get("arguments")
        if arguments is not None and type(arguments) is not str:
            return None
        fragments.append(ToolFragment(fragment, function.get("name"), arguments))
    return fragments
