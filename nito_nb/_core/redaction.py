"""The key taken out of a stream's decoded text, across events: :class:`StreamRedactor`. No I/O.

``errors.redact`` takes the key out of the bytes of each event. A gateway can still echo it in a
way no byte search finds: split across two deltas (``"sk-test-SEC"``, then ``"RET123"``), or with
JSON escapes (``"sk-test-\\u0053ECRET123"``), which only decoding turns back into the key. So the
state hands every chunk to a :class:`StreamRedactor`, which reads its decoded strings:

- An event whose decoded strings hold the key (escapes) has every string redacted, and its raw
  bytes are written again from the redacted JSON.
- Each text channel (``text_slots.text_slots``: content, reasoning, refusal, each tool call's
  arguments, the audio transcript, error messages, and the tokens of each choice's ``logprobs``)
  keeps a key's worth of lookbehind: the end of its text that could still start the key, and
  which events it came from. When a later event
  completes the key, each piece of it becomes ``[redacted]`` in the event that carried it: the
  current chunk before it is folded, the earlier ones as :class:`Edit` s that the state applies
  to the log (their raw bytes) and to the accumulator (the end of the channel's text). Every
  event keeps some text where it had some, so which events carried text (ttft, the token
  counts) does not change.

What a reader sees of a stream still arriving is held back apart from this (``Secret.hold_back``,
applied by the accumulator to each text): whatever could still start the key is not shown until it
can no longer start it. The common case, a plain content chunk that cannot start the key with
nothing pending, costs the state a few tests and no call; so does a chunk of a layout the parser
keeps (content, reasoning, a tool-call fragment, ``layout.ChunkParser``) whose text is shorter
than the key, escapes or not: :meth:`StreamRedactor.new_layout` reads each layout's own strings
once (bench/bench_redaction.py measures the cost on content, reasoning and tool-call bodies;
bench/bench_stream.py --api-key the whole path).

The tokens of ``logprobs`` are such a channel (their sequence is the text), with two additions
(docs/SECURITY.md, "The tokens of logprobs"): a token's ``bytes`` follow its text when it is
redacted, and its ``top_logprobs`` alternatives, which are no sequence, are read in its place
(:meth:`StreamRedactor._alternative`, :func:`_in_place`).

A key the model transforms (reversed, spaced out, translated, base64) is not found: nothing here
can tell it from text (docs/ENGINE_API.md says what is redacted and what is not).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from .chunk import as_error_event
from .errors import REDACTED, Secret, redact
from .sse import SSEDecoder
from .text_slots import plain_content_slot, text_slots
from .tool_index import ToolIndexer

__all__ = ["Edit", "StreamRedactor", "encode", "redact_body", "rewrite_event", "with_data"]

_BOM = b"\xef\xbb\xbf"
_BACKSLASH = ord("\\")  # an int: ``in`` bytes then looks for one byte, several times faster


class Edit(NamedTuple):
    """The end ``old`` of the text at ``slot`` (its place in ``text_slots``) of event ``seq``
    becomes ``new``; ``channel`` is the text it belongs to, ``folded`` whether the accumulator
    took that event (not one after ``[DONE]``)."""

    seq: int
    slot: int
    channel: tuple[str, Any]
    old: str
    new: str
    folded: bool
    #: For a logprobs token, what its alternatives lose (:func:`_in_place`): the key's text from
    #: the piece on, a key starting in the piece, and how much of it the piece holds.
    place: tuple[str, str, int] = ("", "", 0)


class _Piece(NamedTuple):
    seq: int
    slot: int
    length: int  # characters at the end of the slot's text that belong to the lookbehind
    folded: bool


_NOTHING: tuple[bool, list[Edit]] = (False, [])
_CONTENT = ("content", None)


class StreamRedactor:
    """The key taken out of one stream's decoded text, chunk by chunk (see the module docstring).

    :meth:`take` is called with each chunk of the stream, in order, before the chunk is folded;
    it rewrites the chunk in place and says what else to rewrite.
    """

    __slots__ = ("_layouts", "_tools", "ends", "first", "layout", "pending", "secret", "shortest")

    def __init__(self, secret: Secret) -> None:
        self.secret = secret
        # The character every form starts with; when forms start differently (a key that starts
        # with "/"), "": every text holds it, so the first test of take() never decides alone.
        self.first = secret._firsts if len(secret._firsts) == 1 else ""
        #: The characters a text that could start the key can end with (those of the forms).
        self.ends = "".join(sorted({char for form in secret._forms for char in form}))
        #: channel: (the end of its text that could still start the key, the pieces it came from).
        #: Only channels with such an end are here: empty in the common case. A chunk that has
        #: content (``content`` of take()) and no backslash in its bytes matters only when this
        #: is not empty, or its content holds ``first`` and ends with one of ``ends``: the state
        #: tests that before calling, most chunks then cost it no call.
        self.pending: dict[tuple[str, Any], tuple[str, list[_Piece]]] = {}
        self._tools = ToolIndexer()  # which call a fragment continues, as the accumulator says
        #: The length of the key's shortest form: a text shorter than that cannot hold the key.
        self.shortest = min(map(len, secret._forms))
        #: The layout (``layout.ChunkParser``'s template) :meth:`new_layout` saw last, when no
        #: string of it holds the key; and every layout seen, by id: (template, that answer).
        self.layout: Any = None
        self._layouts: dict[int, tuple[Any, bool]] = {}

    def take(
        self, seq: int, value: Any, chunk: Any, raw: bytes, content: str | None, folded: bool
    ) -> tuple[bool, list[Edit]]:
        """Redact chunk ``seq`` (``value`` as parsed, ``chunk`` as read: ``as_error_event`` of
        it; ``content`` the parser's content of a plain content chunk, else None) in place, before
        it is folded (``folded``: the accumulator takes it). Returns whether it changed (its raw
        bytes are then :func:`rewrite_event`'s) and the edits of earlier events."""
        pending, first, ends = self.pending, self.first, self.ends
        if content is not None and not pending and _BACKSLASH not in raw:
            # The common case: a plain content chunk, nothing pending. Its bytes are its text, so
            # it holds no key (redact_events took it out); only its end may start one.
            if first in content and content[-1:] in ends:
                self._start(_CONTENT, content, seq, 0, folded)
            return _NOTHING
        secret = self.secret
        changed = False
        if secret.escaped_in(raw):
            dumped = json.dumps(value, ensure_ascii=False)
            # An escaped key, wherever it is in the chunk. Changed only when a string was: a form
            # found across two strings of the dump is in none of them (and a chunk of a layout
            # that the state does not hand here is rewritten only when a string was, too).
            if secret.found_in(dumped):
                _redact_strings(value, secret)
                if json.dumps(value, ensure_ascii=False) != dumped:
                    changed = True
                    content = None
        # From here no string of the chunk holds the whole key: its bytes were searched, its
        # escapes read. A key can only end in a string that continues a channel's pending end,
        # or start at the end of one.
        edits: list[Edit] = []
        slots = [plain_content_slot(chunk)] if content is not None else text_slots(chunk)
        for position, (name, sub, holder, key) in enumerate(slots):
            if name == "tool":
                channel: tuple[str, Any] = (name, self._tools.index(sub))
                if holder is None:
                    continue
            elif name == "alternative":  # read in its token's place: after the sequence before it
                channel = ("token", sub)
                if pending and channel in pending:
                    changed = self._alternative(channel, holder) or changed
                if REDACTED in holder[key]:
                    changed = _bytes_follow(holder) or changed
                continue
            else:
                channel = (name, sub)
                # a whole key taken out of raw or escapes
                if name == "token" and REDACTED in holder[key]:
                    changed = _bytes_follow(holder) or changed
            # Another choice's text (n > 1) is only in the log, which s.choices reads: no
            # accumulator holds an end of it to rewrite.
            into = folded and name != "choice"
            if pending and channel in pending:
                changed = self._slot(seq, position, channel, holder, key, into, edits) or changed
            else:
                text = holder[key]
                if first in text and text[-1:] in ends:
                    self._start(channel, text, seq, position, into)
        if edits and edits[-1].seq == seq:  # a key split across two strings of this chunk
            for edit in edits:
                if edit.seq == seq:
                    _apply(slots, edit)
            edits = [edit for edit in edits if edit.seq != seq]
        return changed, edits

    def new_layout(self, template: tuple[Any, ...]) -> bool:
        """A chunk of a kept layout (``layout.ChunkParser``'s template, not built: its text and
        padding apart), of another layout than :attr:`layout`: True when :meth:`take` must read
        it, because a string of the layout holds the key (escaped: the read's search did not find
        it). Otherwise the layout becomes :attr:`layout`, and its tool call is indexed (as take
        would: the fragments after it need that) the first time it is seen.

        Such a chunk is its template's strings, its text and its padding (letters and digits, in
        its bytes): when this says False, the text alone can hold the key, and only when it is
        escaped (the bytes are the text otherwise, searched with the read) and at least
        :attr:`shortest` long. The state tests that (and a pending key, an end that could start
        one) itself, so a chunk of :attr:`layout` costs it no call. Indexing a fragment twice
        changes nothing (``ToolIndexer``), so a layout's call is indexed once."""
        known = self._layouts.get(id(template))
        if known is None:
            clean = not _holds_key(template[1:], self.secret)
            if template[0] == "arguments":
                self._tools.index(template[4])
            if len(self._layouts) < _LAYOUTS:
                self._layouts[id(template)] = (template, clean)  # holds it: its id stays its own
        else:
            clean = known[1]
        if clean:
            self.layout = template
        return not clean

    def forget(self) -> None:
        """Let go of the layouts read (as ``ChunkParser.forget`` does, when the stream ends): an
        ended stream kept long (a run's) keeps none."""
        self.layout = None
        self._layouts = {}

    def held_token(self, choice: int = 0, channel: str = "content") -> tuple[int, int] | None:
        """Where the end of a logprobs token sequence that could still start the key begins:
        (seq, slot) of its first token, or None. What a reader sees of the tokens while the stream
        runs stops before it, as the texts hold back their end (``Secret.hold_back``)."""
        found = self.pending.get(("token", (choice, channel)))
        if found is None:
            return None
        first = found[1][0]
        return first.seq, first.slot

    def _start(
        self, channel: tuple[str, Any], text: str, seq: int, position: int, folded: bool
    ) -> None:
        """A channel with nothing pending: its end may start the key."""
        held = self.secret.partial_at_end(text)
        if held:
            self.pending[channel] = (text[-held:], [_Piece(seq, position, held, folded)])

    def _alternative(self, channel: tuple[str, Any], holder: Any) -> bool:
        """A token's top alternative, after the channel's pending end: the part of it that would
        complete the key becomes the marker (only the alternative: the sequence holds no key)."""
        before = self.pending[channel][0]
        combined = before + holder["token"]
        spans = self.secret.spans(combined)
        if not spans:
            return False
        _put(holder, "token", _marked(combined, len(before), len(combined), spans))
        return True

    def _slot(
        self,
        seq: int,
        position: int,
        channel: tuple[str, Any],
        holder: Any,
        key: Any,
        folded: bool,
        edits: list[Edit],
    ) -> bool:
        """One slot's text after the channel's pending end; True when the slot was rewritten."""
        text: str = holder[key]
        if not text:
            return False
        secret = self.secret
        before, pieces = self.pending[channel]
        combined = before + text
        piece = _Piece(seq, position, len(text), folded)
        spans = secret.spans(combined)
        if not spans:
            held = secret.partial_at_end(combined)
            if held:
                self.pending[channel] = (combined[-held:], _last_pieces([*pieces, piece], held))
            else:
                del self.pending[channel]
            return False
        # The key completed: each piece of it becomes the marker, in the event that carried it.
        start = 0
        tokens = channel[0] == "token"
        for earlier in pieces:
            end = start + earlier.length
            old, new = combined[start:end], _marked(combined, start, end, spans)
            if new != old:
                place = _place(combined, start, end, spans) if tokens else ("", "", 0)
                edits.append(
                    Edit(earlier.seq, earlier.slot, channel, old, new, earlier.folded, place)
                )
            start = end
        rewritten = _marked(combined, start, len(combined), spans)
        _put(holder, key, rewritten)
        if tokens:
            _in_place(holder, _place(combined, start, len(combined), spans))
        # What follows the last marker may start the key again.
        held = secret.partial_at_end(rewritten)
        if held:
            self.pending[channel] = (rewritten[-held:], [piece._replace(length=held)])
        else:
            del self.pending[channel]
        return True


#: Layouts remembered per stream (the parser keeps ``layout.MAX_TEMPLATES``): past this, a layout
#: is read again each time its chunk follows another layout's.
_LAYOUTS = 64


def _holds_key(value: Any, secret: Secret) -> bool:
    """Whether a string of ``value`` (containers of parsed JSON, nested ones and keys included)
    holds the key. On a template: more strings than its chunks have (the text of the chunk it was
    learnt from, in the containers that ``rebuild`` replaces), never fewer."""
    if isinstance(value, str):
        return secret.found_in(value)
    if isinstance(value, dict):
        return any(secret.found_in(k) or _holds_key(v, secret) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds_key(item, secret) for item in value)
    return False


def _last_pieces(pieces: list[_Piece], length: int) -> list[_Piece]:
    """The pieces that make up the last ``length`` characters of theirs (the first one cut)."""
    kept: list[_Piece] = []
    for piece in reversed(pieces):
        if piece.length >= length:
            kept.append(piece._replace(length=length))
            break
        kept.append(piece)
        length -= piece.length
    kept.reverse()
    return kept


def _marked(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> str:
    """``text[start:end]`` with each part of it that a span covers replaced by the marker."""
    out = []
    at = start
    for first, last in spans:
        first, last = max(first, start), min(last, end)
        if first >= last:
            continue
        out.append(text[at:first])
        out.append(REDACTED)
        at = last
    out.append(text[at:end])
    return "".join(out)


def _redact_strings(value: Any, secret: Secret) -> Any:
    """``value`` (parsed JSON) with every form of the key taken out of each string, keys of
    objects included; objects and arrays are changed in place, a string is returned redacted."""
    if isinstance(value, str):
        return redact(value, secret)
    if isinstance(value, list):
        value[:] = [_redact_strings(item, secret) for item in value]
    elif isinstance(value, dict):
        items = [(redact(k, secret), _redact_strings(v, secret)) for k, v in value.items()]
        value.clear()
        value.update(items)  # in the order they came
    return value


def encode(value: Any) -> str:
    """JSON as gateways write it (compact), non-ASCII as it is: no escape spells the key again."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def with_data(raw: bytes, data: str) -> bytes:
    """``raw`` (one event's bytes) with its ``data`` lines replaced by one line holding ``data``;
    its other lines (``event:``, ``id:``, comments) and line ends stay as they were."""
    out: list[bytes] = []
    placed = False
    for line in raw.splitlines(keepends=True):
        body = line.rstrip(b"\r\n")
        name = body[len(_BOM) :] if body.startswith(_BOM) else body
        if name == b"data" or name.startswith(b"data:"):
            if not placed:
                out.append(
                    body[: len(body) - len(name)]
                    + b"data: "
                    + data.encode("utf-8")
                    + (line[len(body) :] or b"\n")
                )
                placed = True
            continue
        out.append(line)
    return b"".join(out)


def _apply(slots: list[Any], edit: Edit) -> None:
    _, _, holder, key = slots[edit.slot]
    text = holder[key]
    if text.endswith(edit.old):  # always, unless the text was changed behind the redactor's back
        _put(holder, key, text[: len(text) - len(edit.old)] + edit.new)
    if key == "token":
        _in_place(holder, edit.place)


def _place(
    combined: str, start: int, end: int, spans: list[tuple[int, int]]
) -> tuple[str, str, int]:
    """What the alternatives of the token that holds ``combined[start:end]`` lose (``Edit.place``):
    the key's text from ``start`` on when a key reaches into it from before; the key that starts
    in it, and how many of its characters it holds."""
    rest, form, least = "", "", 0
    for first, last in spans:
        if first < start < last:
            rest = combined[start:last]
        elif start <= first < end:
            form, least = combined[first:last], min(end, last) - first
    return rest, form, least


def _in_place(entry: dict[str, Any], place: tuple[str, str, int]) -> None:
    """The alternatives of a logprobs token the key covered (in part): each stands in the token's
    place, so it loses its start that continues the key there (``rest``), and its end that would
    start the key (``form``) with at least as much of it as the token did (``least``); a shorter
    end (an ``s`` that could start ``sk-``) is any text's."""
    alternatives = entry.get("top_logprobs")
    if not isinstance(alternatives, list):
        return
    rest, form, least = place
    for alternative in alternatives:
        text = alternative.get("token") if isinstance(alternative, dict) else None
        if not isinstance(text, str) or not text:
            continue
        new = text
        if rest:
            agree = 0
            while agree < len(new) and agree < len(rest) and new[agree] == rest[agree]:
                agree += 1
            if agree:
                new = REDACTED + new[agree:]
        if form and least:
            for size in range(min(len(new), len(form) - 1), least - 1, -1):
                if form.startswith(new[len(new) - size :]):
                    new = new[: len(new) - size] + REDACTED
                    break
        if new != text:
            _put(alternative, "token", new)


def _put(holder: Any, key: Any, text: str) -> None:
    """``holder[key] = text``; a logprobs token's ``bytes`` follow it (its UTF-8 bytes)."""
    holder[key] = text
    if key == "token":
        _bytes_follow(holder)


def _bytes_follow(entry: dict[str, Any]) -> bool:
    """A logprobs entry whose token was redacted: its ``bytes`` (a list of byte values, which
    would spell the key again) become the UTF-8 bytes of the token as it now is. True if changed."""
    sent = entry.get("bytes")
    if not isinstance(sent, list):
        return False  # null, or absent: nothing spells anything
    now = list(entry["token"].encode("utf-8"))
    if sent == now:
        return False
    entry["bytes"] = now
    return True


def rewrite_event(raw: bytes, edits: list[Edit]) -> bytes:
    """The raw bytes of a logged chunk event with ``edits`` (all of this event) applied."""
    decoder = SSEDecoder()
    event = (decoder.decode(raw) + decoder.flush())[-1]
    value = json.loads(event.data)
    slots = text_slots(as_error_event(value, event.event))
    for edit in edits:
        _apply(slots, edit)
    return with_data(raw, encode(value))


def redact_body(body: bytes, secret: Secret) -> bytes:
    """An HTTP error body (already redacted as bytes) without the key escaped in its JSON."""
    if not secret.escaped_in(body):
        return body
    try:
        value = json.loads(body)
    except ValueError:  # UnicodeDecodeError included: not JSON, no escape to decode
        return body
    if not secret.found_in(json.dumps(value, ensure_ascii=False)):
        return body
    return encode(_redact_strings(value, secret)).encode("utf-8")
