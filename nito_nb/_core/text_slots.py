"""The text slots of a chunk: where each text :func:`~.chunk.read_chunk` reads is in the chunk.

The redaction of a key split across chunks (``redaction.py``) follows each text channel over the
chunks and rewrites the strings where they are; ``Stream.logprobs`` finds a held-back token by
its slot. The slots say where (the holder and key of each string), in a fixed order, with the
channel each adds to, as the reader reads them. Apart from the reader: it reads what a chunk
says, this says where each text sits, for the code that edits it in place.
"""

from __future__ import annotations

from typing import Any

from .chunk import PAYLOAD_KEY
from .logprobs import CHANNELS as TOKEN_CHANNELS

__all__ = ["TextSlot", "plain_content_slot", "text_slots"]

#: A place in a chunk where answer text arrives: (channel, sub, holder, key), the text being
#: ``holder[key]``. The channel names the text it adds to (``content``, ``thinking``, ``refusal``,
#: ``transcript``, ``reasoning``, ``reasoning_content``, ``detail`` with sub ``(index, type)``,
#: ``tool`` with sub the fragment, whose call :class:`~nito_nb._core.tool_index.ToolIndexer` tells,
#: ``error`` for an error's message). Every tool-call fragment has one, its holder and key None
#: when it carries no text: the calls are told apart by the fragments in order. The tokens of
#: ``logprobs`` too: ``token`` with sub ``(choice index, "content" or "refusal")`` for each token
#: sent (their sequence adds up to that choice's text), each preceded by an ``alternative`` slot
#: of the same sub per entry of its ``top_logprobs`` (read in the token's place, not in sequence).
TextSlot = tuple[str, Any, Any, Any]


def text_slots(chunk: Any) -> list[TextSlot]:
    """Every string of a chunk (as :func:`as_error_event` gives it) that :func:`read_chunk`
    reads as text that adds up over the chunks (content, reasoning, refusal, tool-call
    arguments, audio transcript) or as an error's message, where it is in the chunk, in a fixed
    order. The redaction of a key split across chunks follows each channel and rewrites these
    strings (``_core/redaction.py``); they are read here as :func:`read_chunk` reads them."""
    if type(chunk) is not dict:
        return []
    slots: list[TextSlot] = []
    error = chunk.get("error")
    if error is None:
        pass
    elif isinstance(error, dict):
        if isinstance(error.get("message"), str):
            slots.append(("error", None, error, "message"))
    elif isinstance(error, str):
        slots.append(("error", None, chunk, "error"))
    choices = chunk.get("choices")
    if not choices or not isinstance(choices, list):
        return slots
    for position, choice in enumerate(choices):
        if not isinstance(choice, dict):
            continue
        index = choice.get("index", position)
        delta = choice.get("delta")
        if delta and isinstance(delta, dict):
            if index == 0:
                _delta_slots(delta, slots)
            else:  # n > 1: s.choices reads it, so its key is followed too, on channels of its own
                _other_choice_slots(index if type(index) is int else position, delta, slots)
        logprobs = choice.get("logprobs")
        if logprobs and isinstance(logprobs, dict):  # every choice's: s.choices shows them all
            _token_slots(index if type(index) is int else position, logprobs, slots)
    return slots


def _other_choice_slots(index: int, delta: dict[str, Any], slots: list[TextSlot]) -> None:
    """The text slots of choice ``index`` (not 0) as ``("choice", (index, name, sub), ...)``:
    a channel per choice and text, apart from choice 0's, which the accumulator folds. A tool
    call's channel is its ``index`` as sent (choice 0's go through the accumulator's own
    reckoning of which call a fragment continues; no accumulator folds the others live)."""
    own: list[TextSlot] = []
    _delta_slots(delta, own)
    for name, sub, holder, key in own:
        if name == "tool":
            if holder is None:
                continue
            call = sub.get("index")
            sub = call if type(call) is int else 0
        slots.append(("choice", (index, name, sub), holder, key))


def plain_content_slot(chunk: dict[str, Any]) -> TextSlot:
    """The one text slot of a chunk :func:`plain_content` reads as content (``text_slots`` of it)."""
    return ("content", None, chunk["choices"][0]["delta"], "content")


def _delta_slots(delta: dict[str, Any], slots: list[TextSlot]) -> None:
    # One pass over the delta's own keys (one or two, on most chunks), in the order they came;
    # the deprecated function_call after the tool calls, as read_chunk reads it.
    legacy = None
    for name, value in delta.items():
        if name == "content":
            if isinstance(value, str):
                slots.append(("content", None, delta, "content"))
            elif isinstance(value, list):  # Mistral's parts, as read_content_parts reads them
                _part_slots(value, slots)
        elif name == "reasoning" or name == "reasoning_content":
            if isinstance(value, str):
                slots.append((name, None, delta, name))
        elif name == "reasoning_details":
            if value and isinstance(value, list):
                _detail_slots(value, slots)
        elif name == "tool_calls":
            if value and isinstance(value, list):
                _tool_slots(value, slots)
        elif name == "refusal":
            if isinstance(value, str):
                slots.append(("refusal", None, delta, "refusal"))
        elif name == "audio":
            if isinstance(value, dict) and isinstance(value.get("transcript"), str):
                slots.append(("transcript", None, value, "transcript"))
        elif name == "function_call":
            legacy = value
    if isinstance(legacy, dict):  # tool call 0, as read_chunk reads it
        if isinstance(legacy.get("arguments"), str):
            slots.append(("tool", {"index": 0}, legacy, "arguments"))
        else:
            slots.append(("tool", {"index": 0}, None, None))


def _token_slots(index: int, logprobs: dict[str, Any], slots: list[TextSlot]) -> None:
    # The entries logprobs.logprobs_of reads (those whose token is a string), in order.
    for name in TOKEN_CHANNELS:
        entries = logprobs.get(name)
        if not entries or not isinstance(entries, list):
            continue
        sub = (index, name)
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("token"), str):
                continue
            top = entry.get("top_logprobs")
            if top and isinstance(top, list):
                for alternative in top:
                    if isinstance(alternative, dict) and isinstance(alternative.get("token"), str):
                        slots.append(("alternative", sub, alternative, "token"))
            slots.append(("token", sub, entry, "token"))


def _part_slots(parts: list[Any], slots: list[TextSlot]) -> None:
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            slots.append(("content", None, part, "text"))
        elif kind == "thinking" and isinstance(part.get("thinking"), list):
            for piece in part["thinking"]:
                if (
                    isinstance(piece, dict)
                    and isinstance(piece.get("text"), str)
                    and piece.get("type") == "text"
                ):
                    slots.append(("thinking", None, piece, "text"))


def _tool_slots(calls: list[Any], slots: list[TextSlot]) -> None:
    for fragment in calls:
        if not isinstance(fragment, dict):
            continue
        holder = key = None  # a fragment without text has a slot too: it may start a call
        function = fragment.get("function")
        if isinstance(function, dict):
            if isinstance(function.get("arguments"), str):
                holder, key = function, "arguments"
        elif "custom" in fragment:
            custom = fragment["custom"]
            if isinstance(custom, dict) and isinstance(custom.get("input"), str):
                holder, key = custom, "input"
        slots.append(("tool", fragment, holder, key))


def _detail_slots(details: list[Any], slots: list[TextSlot]) -> None:
    for detail in details:
        if not isinstance(detail, dict):
            continue
        type_ = str(detail.get("type") or "reasoning.text")
        if type_ == "reasoning.encrypted":  # opaque data, never shown as text
            continue
        key = PAYLOAD_KEY.get(type_, "text")
        if isinstance(detail.get(key), str):
            index = detail.get("index")
            slots.append(("detail", (index if isinstance(index, int) else 0, type_), detail, key))
