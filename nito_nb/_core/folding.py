"""Folding one read's events into a stream: :class:`EventFolding`, the base of
:class:`~nito_nb._core.state.StreamState` that classifies, logs and accumulates the events of a
read (the hot path, one pass per network read), and :class:`Chunks`, the chunks a read completed,
each built only when read. When the redactor finds the key across events, the earlier events'
text becomes the marker here too, in the log and in the accumulator (``_rewrite_earlier``).

Apart from ``state.py`` because it is the one concern that runs per chunk: the state's lifecycle
(feeding under the lock, ending, HTTP errors, attempts, pickling) calls :meth:`EventFolding._take`
once per piece of the body and owns the objects it folds into (declared below for the checker).
Pure: standard library only, no I/O, no thread; the caller holds the state's lock.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .accumulate import Accumulator
from .chunk import as_error_event
from .errors import redact_events
from .layout import CONTENT, ChunkParser, rebuild
from .log import BAD_DATA, CHUNK, COMMENT, COMMENT_RUN, DONE, EMPTY, OTHER, ChunkLog
from .plain_chunks import WITH_DETAIL
from .redaction import Edit, StreamRedactor, encode, rewrite_event, with_data
from .sse import ServerSentEvent

__all__ = ["Chunks", "EventFolding"]


class Chunks(Sequence[dict[str, Any]]):
    """The chunks one read completed, in order (what :meth:`StreamState.feed` returns).

    A chunk of a layout the parser keeps (``_core/layout.py``) is held as its template, text and
    padding, and built when read: a run that only waits for its streams never builds one, and a
    chunk that a loop reads and drops dies young. Built on the reader's side, every read's chunk
    dicts were alive when the collector's young passes ran and were promoted, which made a full
    pass every ~25,000 chunks (docs/BENCHMARKS.md). Each reading builds a new, equal dict.
    """

    __slots__ = ("_made", "_pads", "_texts")

    def __init__(self, made: list[Any], texts: list[str | None], pads: list[str | None]) -> None:
        self._made, self._texts, self._pads = made, texts, pads  # a dict, or a template

    def __len__(self) -> int:
        return len(self._made)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        made = self._made[i]
        return made if type(made) is dict else rebuild(made, self._texts[i], self._pads[i])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for made, text, padding in zip(self._made, self._texts, self._pads, strict=True):
            yield made if type(made) is dict else rebuild(made, text, padding)  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Chunks):
            other = list(other)
        return list(self) == other if isinstance(other, list) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Chunks({list(self)!r})"

    def extend(self, other: Chunks) -> None:
        self._made += other._made
        self._texts += other._texts
        self._pads += other._pads


class EventFolding:
    """The events of one read, folded: :class:`~nito_nb._core.state.StreamState` is one, and
    owns (and sets up, in its ``__init__``) everything declared here."""

    log: ChunkLog
    acc: Accumulator
    parser: ChunkParser
    redactor: StreamRedactor | None
    _run: int
    n_token_chunks: int
    first_token_ns: int | None
    last_token_ns: int | None

    def _take(self, events: list[ServerSentEvent], t_ns: int) -> Chunks:
        # The hot path (one pass per network read): every event is classified, logged and folded.
        redactor = self.redactor
        if redactor is not None:  # the one door of the body: the gateway may echo the key
            events = redact_events(events, redactor.secret)
            rewritten: dict[int, bytes] = {}  # new raw bytes of this read's events, by their seq
            first, ends, pending = redactor.first, redactor.ends, redactor.pending
            shortest = redactor.shortest
        # The chunks of this read: each one built, or its layout's template with its text and
        # padding (Chunks builds it when read).
        made: list[Any] = []
        texts: list[str | None] = []
        pads: list[str | None] = []
        acc, parse = self.acc, self.parser.parse_lazy
        first_seq = len(self.log)
        kinds = bytearray()
        skipped: set[int] | None = None
        # the chunks of this read that carried tokens: counted here, told the state once (below)
        tokens = 0
        for i, (data, name, _, _, comment, raw) in enumerate(events):
            if comment is not None:
                # The same comment again, in the same read: a run past COMMENT_RUN is counted on
                # its last event logged instead of logged again (log.py says why).
                if self._again(events, i, raw, t_ns):
                    self._run += 1
                    if self._run > COMMENT_RUN:
                        self.log.count_again(first_seq + i - 1)  # the last event logged
                        first_seq -= 1  # the events after it are logged one place earlier
                        if skipped is None:
                            skipped = set()
                        skipped.add(i)
                        continue
                else:
                    self._run = 1
                kinds.append(COMMENT)
                continue
            if data == "[DONE]":
                kinds.append(DONE)
                if acc.done:
                    acc.note("after-done", "[DONE] was sent more than once", first_seq + i)
                acc.finish()
                continue
            if not data:
                kinds.append(EMPTY)
                continue
            try:
                chunk, content, slot, template, padding = parse(data)
            except ValueError:
                kinds.append(BAD_DATA)
                acc.note("bad-data", f"a data line is not JSON: {data[:80]!r}", first_seq + i)
                continue
            if template is not None:
                # A kept layout: the chunk is built only if something needs it whole (below, or
                # whoever reads the chunks returned); the accumulator takes its text alone. The
                # redactor needs it for every chunk that can matter to it: a key's start pending,
                # a text whose end could start one, an escape. Otherwise its bytes are its one
                # text and hold no key (the whole read was searched): what redactor.take's first
                # test says of content. Escapes (tool arguments are JSON, full of escaped quotes)
                # matter only in a text as long as the key, or in a layout whose own strings hold
                # it: the redactor reads each layout once (new_layout, which indexes its call).
                if (
                    name == "error"
                    or acc.done
                    or (
                        redactor is not None
                        and (
                            pending
                            or (first in content and content[-1:] in ends)  # type: ignore[operator,index]
                            or (template is not redactor.layout and redactor.new_layout(template))
                            or (len(content) >= shortest and "\\" in data)  # type: ignore[arg-type]
                        )
                    )
                ):
                    chunk = rebuild(template, content, padding)  # type: ignore[arg-type]
                    template = None
                else:
                    kinds.append(CHUNK)
                    carried = acc.add_text(
                        template[1].get("id"),
                        slot,  # type: ignore[arg-type]
                        content,  # type: ignore[arg-type]
                        template[4]
                        if slot == "arguments"
                        else template[3]  # OpenRouter's reasoning: its delta
                        if slot is WITH_DETAIL
                        else None,
                    )
                    if carried is None:  # something to note: the full rules, on the chunk built
                        chunk = rebuild(template, content, padding)  # type: ignore[arg-type]
                        carried = (
                            acc.add_content(chunk, content, first_seq + i)  # type: ignore[arg-type]
                            if slot is CONTENT
                            else acc.add_slot(chunk, slot, content, first_seq + i)  # type: ignore[arg-type]
                        )
                        made.append(chunk)
                    else:
                        made.append(template)
                    texts.append(content)
                    pads.append(padding)
                    if carried:
                        tokens += 1
                    continue
            if type(chunk) is not dict:
                kinds.append(OTHER)
                acc.note(
                    "not-an-object",
                    f"a data line is JSON but not an object: {data[:80]!r}",
                    first_seq + i,
                )
                continue
            kinds.append(CHUNK)
            value = chunk
            text = None
            if slot is not CONTENT and slot is not None:  # one reasoning string, or tool arguments
                text, content = content, None
            if name == "error":
                chunk = as_error_event(value, name)
                if chunk is not value:
                    content = text = None
            # Most chunks cannot matter to the redactor (its own first test, without the call).
            if redactor is not None and (
                content is None
                or pending
                or (first in content and content[-1:] in ends)
                or "\\" in data
            ):
                changed, edits = redactor.take(
                    first_seq + i, value, chunk, raw, content, not acc.done
                )
                if changed:  # the chunk was rewritten in place: so are its bytes
                    rewritten[first_seq + i] = with_data(raw, encode(value))
                    content = text = None  # read from the rewritten chunk
                if edits:
                    self._rewrite_earlier(edits, events, skipped, rewritten)
            if acc.done:
                acc.add(chunk, first_seq + i)  # notes and ignores it (rule 9)
                continue
            if (
                acc.add_content(chunk, content, first_seq + i)
                if content is not None
                else acc.add(chunk, first_seq + i)
                if text is None
                else acc.add_slot(chunk, slot, text, first_seq + i)  # type: ignore[arg-type]
            ):
                tokens += 1
            made.append(chunk)
            texts.append(None)
            pads.append(None)
        if tokens:  # all of this read's time
            self.n_token_chunks += tokens
            self.last_token_ns = t_ns
            if self.first_token_ns is None:
                self.first_token_ns = t_ns
        if skipped is not None:
            events = [event for i, event in enumerate(events) if i not in skipped]
        if events:
            if redactor is not None and rewritten:
                logged = len(self.log)  # the seq of this read's first event kept
                raws = [rewritten.get(logged + j, event.raw) for j, event in enumerate(events)]
            else:
                raws = [event.raw for event in events]
            self.log.extend(t_ns, kinds, raws)
        return Chunks(made, texts, pads)

    def _rewrite_earlier(
        self,
        edits: list[Edit],
        events: list[ServerSentEvent],
        skipped: set[int] | None,
        rewritten: dict[int, bytes],
    ) -> None:
        """A chunk completed a key that earlier chunks started: their text becomes the marker, in
        the log (their raw bytes; this read's own events before they are logged, ``rewritten`` by
        seq) and in the accumulator (the end of each channel's text). ``skipped``: the positions of
        this read's repeated comments that are counted rather than logged, so that seqs and
        positions in ``events`` differ past them."""
        by_seq: dict[int, list[Edit]] = {}
        for edit in edits:
            by_seq.setdefault(edit.seq, []).append(edit)
        log = self.log
        logged = len(log)  # this read's events are not logged yet: seqs from here are theirs
        kept = events if not skipped else [e for k, e in enumerate(events) if k not in skipped]
        for seq, of_event in by_seq.items():
            if seq >= logged:
                rewritten[seq] = rewrite_event(rewritten.get(seq, kept[seq - logged].raw), of_event)
            else:
                log.rewrite(seq, rewrite_event(log[seq].raw, of_event))
        # Per channel, the pieces in order: together they are the end of the channel's text.
        by_channel: dict[Any, tuple[list[str], list[str]]] = {}
        for edit in edits:
            if edit.folded:
                old, new = by_channel.setdefault(edit.channel, ([], []))
                old.append(edit.old)
                new.append(edit.new)
        for channel, (old, new) in by_channel.items():
            self.acc.replace_tail(channel, "".join(old), "".join(new))

    def _again(self, events: list[ServerSentEvent], i: int, raw: bytes, t_ns: int) -> bool:
        """Whether comment ``i`` of a read repeats the event just before it, at the same time."""
        if i:
            before = events[i - 1]
            return before.comment is not None and before.raw == raw
        return self.log.last_is(COMMENT, t_ns, raw)
