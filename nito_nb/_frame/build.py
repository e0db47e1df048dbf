"""Building a frame: chunk logs as DataFrames, one row per event.

    df = s.frame()                                  # one stream
    df = nito_nb.frame([s1, s2, "runs/", "a.sse"])  # many: Streams, saved logs, folders, SSE files
    df.nito.metrics()                               # one row per stream (docs/METRICS.md)
    df.nito.plot_timeline()

Importing the package registers the ``df.nito`` accessor, so it works on every frame built here.
A frame read back from Parquet or CSV in a new kernel: pass it through ``nito_nb.frame(df)``, which
registers the accessor, checks the columns and restores the dtypes that CSV loses (``dtypes.py``).

The frame: one row per event, in arrival order, streams one after another; each stream starts
with one ``response`` row (its status, HTTP status and model), so that every metric comes from
the columns alone. The columns and their dtypes are declared once, in ``nito_nb/_core/fields.py``
(``_frame/dtypes.py`` ``COLUMNS``); what each holds: docs/METRICS.md, "The frame".

The metrics, tables and plots of ``df.nito`` are in ``accessor.py`` and ``plots.py``; every
metric's definition is in ``nito_nb._core.metrics`` (docs/METRICS.md).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._core.choices import per_choice
from .._core.chunk import as_error_event, plain_reasoning_source, read_chunk, usage_counts
from .._core.fields import FROM_READING
from .._core.http_errors import error_details
from .._core.log import CHUNK, COMMENT, DONE, HTTP_ERROR
from .._core.printable import printable
from .._core.sse import SSEDecoder
from .._core.tool_index import ToolIndexer
from .._core.units import to_seconds
from .dtypes import _SPARSE, COLUMNS, KIND_CATEGORIES, _column, restore
from .inputs import FrameSource, _expand, _stream_attrs, _unique_labels, freeze

__all__ = ["frame"]

# -- building a frame ----------------------------------------------------------------------------


def frame(source: Any, *, errors: str = "raise") -> pd.DataFrame:
    """One row per event of one or many streams; see the module docstring for the columns.

    ``source`` is a :class:`~nito_nb.Stream`; a path to a saved log (a ``.jsonl`` written by
    ``Stream.save``, read with ``nito_nb.load``), to a recorded SSE body (read with
    ``nito_nb.read_sse``) or to a folder of them (its ``*.jsonl`` and ``*.sse`` files, sorted by
    name); a list of those; or a mapping ``{label: source}`` to choose the ``stream`` labels. Labels
    are otherwise the file's stem, or ``"{model}#{i}"`` for a Stream (``i`` its position in the
    input), made unique.

    A file that cannot be read raises an error that names it (``errors="raise"``); with
    ``errors="skip"`` it is left out, and one warning lists every file skipped and why (also kept in
    ``df.attrs["nito_skipped"]``, path -> reason). A log whose last line was cut loads what is
    complete, with a ``cut-log`` anomaly on its Stream.

    A DataFrame (such as a frame read back from Parquet or CSV) is checked and returned with the
    frame's dtypes restored.
    """
    if errors not in ("raise", "skip"):
        raise ValueError(f'errors must be "raise" or "skip", not {errors!r}')
    if isinstance(source, pd.DataFrame):
        return restore(source)
    skipped: dict[str, str] = {}
    items = list(_expand(source, skipped if errors == "skip" else None))
    labels = _unique_labels([label for label, _, _ in items])
    builder = _Builder(labels)
    attrs: dict[str, Any] = {}
    for code, (label, (_, stream, origin)) in enumerate(zip(labels, items, strict=True)):
        builder.add(code, stream)
        attrs[label] = _stream_attrs(stream, origin)
    df = builder.build()
    df.attrs["nito"] = freeze(attrs)
    if skipped:
        df.attrs["nito_skipped"] = skipped
        # A file's name is anyone's choice: printed as every warning line is, printable.
        listed = printable(
            ", ".join(
                f"{Path(path).name} ({reason.partition(':')[0]})"
                for path, reason in skipped.items()
            )
        )
        warnings.warn(
            f"nito_nb.frame skipped {len(skipped)} file(s) it cannot read: {listed}; "
            "why: df.attrs['nito_skipped']",
            stacklevel=3,  # the caller of nito_nb.frame
        )
    return df


#: One encoder for every value: ``json.dumps`` with options builds a new encoder on each call,
#: which cost more than the encoding of a chunk's small extras (one per row parsed whole).
_encode = json.JSONEncoder(ensure_ascii=False, default=str).encode


def _json(value: Any) -> str:
    return _encode(value)


def _parse_chunks(datas: list[bytes]) -> list[Any]:
    """Parse many JSON texts at once: one ``json.loads`` over ``[a,b,...]`` is the fastest way with
    the standard library (faster than one call per chunk: docs/BENCHMARKS.md)."""
    if not datas:
        return []
    try:
        values = json.loads(b"[" + b",".join(datas) + b"]")
        if len(values) == len(datas):
            return values
    except ValueError:
        pass
    # Invalid UTF-8 (the decoder replaced it) or a data line the joined text misreads: one by one.
    out = []
    for data in datas:
        try:
            out.append(json.loads(data.decode("utf-8", "replace")))
        except ValueError:
            out.append(None)
    return out


# Put in place of a chunk's content string, to find chunks that differ only in it (_Builder._plan).
_PLACEHOLDER = b"\\u0000nito_nb"
_PLACEHOLDER_TEXT = "\x00nito_nb"
# OpenAI's and Azure's padding, a string of random length in every chunk: cut out of the skeleton
# too (in its place a marker of letters, as the padding is), and put back into each row's extras.
_PADDING = b'"obfuscation":"'
# The text strings of chunks without a content string, tried in turn: DeepSeek's and OpenRouter's
# reasoning, tool-call arguments. The skeleton's reading says where the string went (``slot``).
_SLOTS = (b'"reasoning_content":"', b'"reasoning":"', b'"arguments":"')
_PADDING_MARK = b"nitoNbPadding"
_PADDING_MARK_TEXT = "nitoNbPadding"


class _ChunkInfo:
    """What one chunk says, as column values: the same for every chunk with the same bytes."""

    __slots__ = (
        "carried",
        "choices",
        "content",
        "extras",
        "fragments",
        "has_zero",
        "items",
        "plain",
        "readable",
        "slot",
        "targets",
        "values",
    )

    def __init__(self) -> None:
        self.values: list[tuple[str, Any]] = []  # (column, value) of the chunk's own row
        self.content: str | None = None
        self.carried = False  # reasoning, refusal or tool-argument text (content is judged per row)
        self.fragments: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (fragment, its columns)
        self.items: list[tuple[str, int | None, str | None]] = []  # (reasoning type, index, text)
        self.readable = False  # a readable reasoning detail came
        self.plain: tuple[str, ...] = ()  # the plain reasoning strings that came
        self.targets: list[tuple[dict[int, Any], Any]] | None = None  # see _Builder._skeleton
        self.extras: tuple[str, str] | None = None  # a padded skeleton's extras, around its padding
        # A skeleton whose cut string is not the content: ("item", k), the text of reasoning item
        # k, or ("fragment", k), the arguments of tool fragment k.
        self.slot: tuple[str, int] | None = None
        # n > 1: what each other choice of the chunk says (its index, its reading), and whether
        # the chunk holds choice 0 (the chunk's own row is choice 0's, else its first choice's).
        self.choices: list[tuple[int, _ChunkInfo]] | None = None
        self.has_zero = True


def _json_string(content: bytes) -> str:
    """The text of a JSON string's bytes (without its quotes)."""
    if b"\\" in content:
        return json.loads('"' + content.decode("utf-8", "replace") + '"')
    return content.decode("utf-8", "replace")


def _chunk_data(raw: bytes) -> tuple[bytes, str | None]:
    """The data of a chunk event (its JSON text) and its event name."""
    line = raw.strip(b"\r\n")
    if line.startswith(b"data: ") and b"\n" not in line and b"\r" not in line:
        return line[6:], None  # the one-line form every gateway sends
    # Otherwise the SSE decoder reads it (multi-line data, event: fields, a byte-order mark).
    decoder = SSEDecoder()
    event = (decoder.decode(raw) + decoder.flush())[-1]
    return event.data.encode("utf-8"), event.event


def _read_chunk(chunk: Any, event_name: str | None) -> _ChunkInfo | None:
    """One parsed chunk as column values: the engine's one reader (``_core.chunk.read_chunk``,
    which the accumulator folds too) says what it holds; this only names the columns."""
    chunk = as_error_event(chunk, event_name)
    if not isinstance(chunk, dict):
        return None
    reading = read_chunk(chunk)
    info = _ChunkInfo()
    values = info.values
    if reading.id is not None:
        values.append(("id", reading.id if isinstance(reading.id, str) else str(reading.id)))
    if isinstance(reading.model, str):
        values.append(("model", reading.model))
    error = reading.error
    if error is not None:
        message, code = error.get("message"), error.get("code")
        values.append(("error_message", None if message is None else str(message)))
        values.append(("error_code", None if code is None else str(code)))
    if reading.usage is not None:
        values.append(("usage", _json(reading.usage)))
        values.extend(usage_counts(reading.usage).items())
    for attribute, column, as_json in FROM_READING:  # refusal, audio (without its base64 data)...
        value = getattr(reading, attribute)
        if value is not None:
            values.append((column, _json(value) if as_json else value))
    if reading.has_web_search:
        values.append(("web_search", _json(reading.web_search)))
    if reading.has_free_tier:
        values.append(("free_tier", _json(reading.free_tier)))
    for finish in reading.finishes:
        values.append(("finish_reason", finish))
    if reading.role is not None:
        values.append(("role", str(reading.role)))
    info.content = reading.content
    for fragment in reading.tools:
        part: dict[str, Any] = {}
        if fragment.id:
            part["tool_id"] = str(fragment.id)
        if fragment.name:
            part["tool_name"] = str(fragment.name)
        if fragment.type:  # "custom": its arguments are free text, not JSON (df.nito.tool_calls)
            part["tool_type"] = str(fragment.type)
        if fragment.arguments is not None:
            part["tool_args"] = fragment.arguments
        info.fragments.append((fragment.raw, part))
    plain = []
    for piece in reading.reasoning:
        info.items.append((piece.type, piece.index, piece.text))
        if piece.index is None:
            plain.append(piece.type)
        elif piece.readable:
            info.readable = True
    info.plain = tuple(plain)
    info.carried = reading.carried_besides_content
    if reading.extras:
        values.append(("extras", _json(reading.extras)))
    if reading.other_choices:
        # The other choices, each read as if it were choice 0 of a chunk of its own (the rule of
        # Stream.choices, _core/choices.py): the choices only, the chunk's own fields stay on its row.
        info.choices = []
        info.has_zero = False
        for index, one in per_choice({"choices": chunk["choices"]}):
            if index == 0:
                info.has_zero = True
            else:
                read = _read_chunk(one, None)
                if read is not None:
                    info.choices.append((index, read))
    return info


class _Builder:
    """Columns of many streams, built with plain lists and turned into a DataFrame once."""

    def __init__(self, labels: list[str]) -> None:
        self.labels = labels
        self.n = 0
        self.codes: list[np.ndarray] = []
        self.seq: list[np.ndarray] = []
        self.choice: list[np.ndarray] = []
        self.t: list[np.ndarray] = []
        self.gap: list[np.ndarray] = []
        self.kind: list[np.ndarray] = []
        self.nbytes: list[np.ndarray] = []
        self.token: list[np.ndarray] = []
        self.ignored: list[np.ndarray] = []
        # Mostly-empty columns as {row: value}: most rows have no value in most of them.
        self.cols: dict[str, dict[int, Any]] = {name: {} for name in _SPARSE}
        # Further parts of chunks: (row of part 0, part, {column: value}).
        self.parts: list[tuple[int, int, dict[str, Any]]] = []
        # What each parsed chunk (or chunk skeleton) says; skeletons are shared by all streams.
        self._infos: list[_ChunkInfo | None] = []
        self._skeletons: dict[bytes, int] = {}

    def add(self, code: int, stream: FrameSource) -> None:
        log = stream.log
        n = len(log)
        base = self.n + 1  # row of event 0 (row `self.n` is the response row)
        rows = n + 1
        self.n += rows
        cols = self.cols

        # A snapshot of the first n events, copied: a live Stream appends to its log from another
        # thread, and a buffer view of its arrays would stop them from growing (BufferError).
        # Its kinds are appended last, so the first n entries of every column are complete.
        times = np.array(log.times_ns()[:n], dtype=np.int64)
        kinds = np.frombuffer(log.kind_codes()[:n], dtype=np.uint8)
        # where each event's bytes end in the body
        ends = np.array(log.offsets()[:n], dtype=np.int64)
        t = np.empty(rows)
        ttfb = stream.ttfb  # None when unknown, or for a recording without times
        t[0] = np.nan if ttfb is None else ttfb
        t[1:] = to_seconds(times - log.t0_ns) if log.timed else np.nan  # a recording without times
        gap = np.full(rows, np.nan)
        if n > 1:
            gap[2:] = np.diff(t[1:])
        nbytes = np.empty(rows, dtype=np.int64)
        nbytes[0] = 0
        nbytes[1:] = np.diff(ends, prepend=0)
        token = np.zeros(rows, dtype=bool)
        ignored = np.zeros(rows, dtype=bool)

        cols["model"][base - 1] = stream.model
        cols["status"][base - 1] = str(stream.status)
        cols["http_status"][base - 1] = log.status_code  # None values count as missing
        cols["attempts"][base - 1] = stream.attempts
        if log.connect_ns is not None:  # seconds; none when no connection was opened, or unknown
            cols["connect"][base - 1] = to_seconds(log.connect_ns)

        done_positions = np.flatnonzero(kinds == DONE)
        first_done = int(done_positions[0]) if len(done_positions) else n
        ignored[first_done + 2 :] = kinds[first_done + 1 :] == CHUNK
        plan, pending_base = self._plan(log.body, kinds, ends, base, first_done, token)
        _unread_error_body(cols, log, kinds, ends, base)

        infos = self._infos
        contents = cols["content"]
        reasoning_items: list[tuple[int, list[tuple[str, int | None, str | None]]]] = []
        has_readable = False
        plain_sources: set[str] = set()
        tools = ToolIndexer()
        other_choices: list[tuple[int, int, bool, _ChunkInfo]] = []  # (seq, row, dropped, info)
        for seq, info_index, text in plan:
            info = infos[info_index if info_index >= 0 else pending_base - 1 - info_index]
            if info is None:
                continue
            row = base + seq
            dropped = seq > first_done
            if info.choices is not None:
                other_choices.append((seq, row, dropped, info))
            for name, value in info.values:
                cols[name][row] = value
            carried = info.carried
            fragments, items = info.fragments, info.items
            slot = info.slot
            if slot is not None:  # the row's text goes where the skeleton's cut string went
                where, k = slot
                if where == "item":
                    items = list(items)
                    items[k] = (items[k][0], items[k][1], text)
                else:
                    fragments = list(fragments)
                    fragments[k] = (fragments[k][0], {**fragments[k][1], "tool_args": text})
                text = info.content
            if text is None:
                text = info.content
            if text is not None:
                contents[row] = text
                carried = carried or bool(text)
            if fragments:
                self._put_parts(
                    row,
                    [
                        {**part, "tool_index": _tool_index(tools, fragment, dropped)}
                        for fragment, part in fragments
                    ],
                )
            if items:
                reasoning_items.append((row, items))
                if not dropped:
                    has_readable = has_readable or info.readable
                    plain_sources.update(info.plain)
            if carried and not dropped:
                token[seq + 1] = True

        # Readable reasoning, as the accumulator shows it (the one rule: plain_reasoning_source):
        # details when there are readable ones, else the plain strings of one source.
        plain = plain_reasoning_source(has_readable, plain_sources)
        for row, items in reasoning_items:
            self._put_parts(
                row,
                [
                    {"reasoning_type": type_, "reasoning_index": index, "reasoning": text}
                    for type_, index, text in items
                    if index is not None or type_ == plain
                ],
            )
        choice = np.zeros(rows, dtype=np.int64)
        if other_choices:
            self._place_choices(other_choices, choice, token)

        self.codes.append(np.full(rows, code, dtype=np.int32))
        self.seq.append(np.arange(-1, n, dtype=np.int64))
        self.choice.append(choice)
        self.t.append(t)
        self.gap.append(gap)
        kind = np.empty(rows, dtype=np.int8)
        kind[0] = 0
        kind[1:] = kinds.astype(np.int8) + 1
        self.kind.append(kind)
        self.nbytes.append(nbytes)
        self.token.append(token)
        self.ignored.append(ignored)

    def _plan(
        self,
        body: bytes,
        kinds: np.ndarray,
        ends: np.ndarray,
        base: int,
        first_done: int,
        token: np.ndarray,
    ) -> tuple[list[tuple[int, int, str | None]], int]:
        """Read the log's chunks; return the ones left for :meth:`add` to place, in order.

        Decoding the JSON again is most of the cost of a frame. Most chunks of a stream differ
        only in the text of ``delta.content``, so a chunk whose content string is cut out (its
        "skeleton") is usually one already read: each skeleton is parsed and read once, and each
        chunk only decodes its own content string. A skeleton whose reading does not put the
        cut-out string back in choice 0's ``delta.content`` (the cut was elsewhere) is not
        trusted: those chunks are parsed whole, and so is any chunk without such a string. The
        result is the same either way (tested on every recording). ``str.find`` rather than a
        regex (4 us a chunk), slices of the whole body rather than one bytes object per event,
        and placing plain content chunks right here all count: see bench/bench_frame.py.

        Returns (seq, index into ``self._infos`` or -1, -2... for the chunks parsed whole, content
        text or None) for the chunks not placed here, and where the chunks parsed whole start in
        ``self._infos``.
        """
        cols = self.cols
        skeletons = self._skeletons
        infos: list[Any] = self._infos  # the skeleton entries it reads are never None
        contents = cols["content"]
        pending: list[bytes] = []  # chunks parsed whole, all at once after the loop
        pending_names: list[str | None] = []
        plan: list[tuple[int, int, str | None]] = []
        groups: dict[int, list[int]] = {}  # skeleton index: rows of plain content chunks
        token_rows: list[int] = []
        escaped_rows: list[int] = []
        escaped: list[bytes] = []
        find = body.find
        startswith = body.startswith
        prev_head = prev_tail = prev_rest = (
            b"\xff"  # matches no chunk: the first one reads its skeleton
        )
        prev_plain = True
        prev_index = -1
        paddings: list[tuple[int, int, bytes]] = []  # (row, skeleton, padding) of padded chunks
        starts = np.concatenate([np.zeros(1, np.int64), ends[:-1]])
        chunk_seqs = np.flatnonzero(kinds == CHUNK)
        for seq, first, last in zip(
            chunk_seqs.tolist(), starts[chunk_seqs].tolist(), ends[chunk_seqs].tolist(), strict=True
        ):
            found = find(b'"content":"', first, last)
            start = found + 11
            if found < 0:  # reasoning and tool-call chunks: their one text string instead
                for slot in _SLOTS:
                    found = find(slot, first, last)
                    if found >= 0:
                        start = found + len(slot)
                        # cut off, or an empty string (no piece)
                        if start >= last or body[start] == 0x22:
                            found = -1
                        break
            if found >= 0:
                end = find(b'"', start, last)
                # A quote after a backslash ends nothing, unless the backslash is itself escaped.
                while end >= 0 and body[end - 1] == 0x5C:
                    before = end - 2
                    while body[before] == 0x5C:
                        before -= 1
                    if (end - 1 - before) % 2 == 0:
                        break
                    end = find(b'"', end + 1, last)
                # The padding after the content, when it is as sent (letters and digits): its
                # place in the chunk is part of the skeleton, its value is the row's own.
                pad_start = pad_end = last
                padding = None
                if end >= 0:
                    at = find(_PADDING, end, last)
                    if at >= 0:
                        pad_start = at + len(_PADDING)
                        pad_end = find(b'"', pad_start, last)
                        padding = body[pad_start:pad_end]
                        if pad_end < 0 or (padding and not padding.isalnum()):
                            end = -1  # not as sent: parsed whole
                if end >= 0:
                    # Usually the same skeleton as the chunk before: compared in place, no copy.
                    if (
                        start - first == len(prev_head)
                        and pad_start - end == len(prev_tail)
                        and last - pad_end == len(prev_rest)
                        and (padding is None) is prev_plain
                        and startswith(prev_head, first)
                        and startswith(prev_tail, end)
                        and startswith(prev_rest, pad_end)
                    ):
                        index = prev_index
                    else:
                        prev_head, prev_tail, prev_rest = (
                            body[first:start],
                            body[end:pad_start],
                            body[pad_end:last],
                        )
                        prev_plain = padding is None
                        key = prev_head + _PLACEHOLDER + prev_tail
                        if padding is not None:
                            key += _PADDING_MARK + prev_rest
                        known = skeletons.get(key)
                        if known is None:
                            known = skeletons[key] = self._skeleton(key, padding is not None)
                        index = prev_index = known
                    if index >= 0:
                        if padding is not None:
                            paddings.append((base + seq, index, padding))
                        content = body[start:end]
                        if infos[index].targets is None:  # fragments or reasoning: add() places it
                            plan.append((seq, index, _json_string(content)))
                            continue
                        # Placed in bulk after the loop: rows grouped by skeleton, token rows,
                        # and strings with escapes decoded by one json.loads.
                        row = base + seq
                        group = groups.get(index)
                        if group is None:
                            group = groups[index] = []
                        group.append(row)
                        if b"\\" in content:
                            escaped_rows.append(row)
                            escaped.append(content)
                        else:
                            contents[row] = content.decode("utf-8", "replace")
                        if content:
                            token_rows.append(seq + 1)
                        continue
            data, event_name = _chunk_data(body[first:last])
            plan.append((seq, -1 - len(pending), None))
            pending.append(data)
            pending_names.append(event_name)
        if escaped:
            texts = json.loads('["' + b'","'.join(escaped).decode("utf-8", "replace") + '"]')
            contents.update(zip(escaped_rows, texts, strict=True))
        for index, rows in groups.items():
            for column, value in infos[index].targets:
                column.update(dict.fromkeys(rows, value))
        if paddings:  # each padded row's extras: its skeleton's, with the row's own padding
            extras = cols["extras"]
            for row, index, padding in paddings:
                before, after = infos[index].extras
                extras[row] = before + padding.decode("ascii") + after
        if token_rows:
            token[token_rows] = True
            token[first_done + 2 :] = False  # after [DONE]: the answer ignores them
        for seq in np.flatnonzero((kinds == COMMENT) | (kinds == HTTP_ERROR)).tolist():
            raw = body[int(starts[seq]) : int(ends[seq])]
            if kinds[seq] == COMMENT:
                text = raw.strip(b"\r\n")[1:].decode("utf-8", "replace")
                cols["comment"][base + seq] = text[1:] if text.startswith(" ") else text
            else:
                message, error_code, _ = error_details(raw.decode("utf-8", "replace"))
                cols["error_message"][base + seq] = message
                cols["error_code"][base + seq] = None if error_code is None else str(error_code)
        pending_base = len(infos)
        for value, event_name in zip(_parse_chunks(pending), pending_names, strict=True):
            infos.append(_read_chunk(value, event_name))
        return plan, pending_base

    def _skeleton(self, key: bytes, padded: bool = False) -> int:
        """Index of the skeleton's reading in ``self._infos``, or -1 when it cannot be trusted.
        ``padded``: the skeleton's padding is the marker, which must land in its extras only (a
        top-level ``obfuscation``), once; its rows' extras are then that text around their own."""
        data, event_name = _chunk_data(key)
        if event_name == "error":
            return -1
        try:
            value = json.loads(data)
        except ValueError:
            return -1
        info = _read_chunk(value, None)
        if info is None:
            return -1
        # Every string the reading put in a column: the placeholder (and the padding's marker)
        # must each be in the one place the rows' own strings go.
        texts = [v for _, v in info.values if isinstance(v, str)]
        texts += [v for _, part in info.fragments for v in part.values() if isinstance(v, str)]
        texts += [text for _, _, text in info.items if text is not None]
        if info.content == _PLACEHOLDER_TEXT:
            texts.append(info.content)
        elif info.content:
            return -1
        else:  # the cut string is a reasoning text or a tool fragment's arguments
            items = [k for k, (_, _, text) in enumerate(info.items) if text == _PLACEHOLDER_TEXT]
            fragments = [
                k
                for k, (_, part) in enumerate(info.fragments)
                if part.get("tool_args") == _PLACEHOLDER_TEXT
            ]
            if len(items) + len(fragments) != 1:
                return -1
            info.slot = ("item", items[0]) if items else ("fragment", fragments[0])
        if sum(_PLACEHOLDER_TEXT in text for text in texts) != 1:
            return -1
        if padded:
            marked = [
                (name, v)
                for name, v in info.values
                if isinstance(v, str) and _PADDING_MARK_TEXT in v
            ]
            if (
                value.get("obfuscation") != _PADDING_MARK_TEXT
                or sum(_PADDING_MARK_TEXT in text for text in texts) != 1
                or len(marked) != 1
                or marked[0][0] != "extras"
                or marked[0][1].count(_PADDING_MARK_TEXT) != 1
            ):
                return -1
            before, after = marked[0][1].split(_PADDING_MARK_TEXT)
            info.extras = (before, after)  # each row's extras: _plan puts its padding in between
            info.values = [(name, v) for name, v in info.values if name != "extras"]
        if not info.fragments and not info.items:
            # Plain content chunks are placed by _plan straight from these (list, value) pairs.
            info.targets = [(self.cols[name], value) for name, value in info.values]
        self._infos.append(info)
        return len(self._infos) - 1

    def _place_choices(
        self, chunks: list[tuple[int, int, bool, _ChunkInfo]], choice: np.ndarray, token: np.ndarray
    ) -> None:
        """The rows of the choices other than 0 (n > 1): each choice's reading of a chunk on rows
        of its own, as choice 0's are (its values, content, tool fragments, reasoning: each choice
        with its own tool indexer and reasoning source). A chunk of one choice k (OpenAI's way)
        puts it on the chunk's own row (``choice`` k); the choices of a chunk that holds choice 0
        go on further parts. ``token`` is True on the first row of a choice that carries text."""
        tools: dict[int, ToolIndexer] = {}
        readable: dict[int, bool] = {}
        sources: dict[int, set[str]] = {}
        for _, _, dropped, info in chunks:
            for index, one in info.choices or ():
                if one.items and not dropped:
                    readable[index] = readable.get(index, False) or one.readable
                    sources.setdefault(index, set()).update(one.plain)
        used: dict[int, int] = {}  # parts already on a row (tool fragments, reasoning details)
        rows_of = {row for _, row, _, _ in chunks}
        for row, number, _ in self.parts:
            if row in rows_of:
                used[row] = max(used.get(row, 0), number)
        cols = self.cols
        for seq, row, dropped, info in chunks:
            on_own_row = not info.has_zero
            for index, one in info.choices or ():
                values: dict[str, Any] = dict(one.values)
                carried = one.carried
                if one.content is not None:
                    values["content"] = one.content
                    carried = carried or bool(one.content)
                indexer = tools.get(index)
                if indexer is None:
                    indexer = tools[index] = ToolIndexer()
                plain = plain_reasoning_source(
                    readable.get(index, False), sources.get(index, set())
                )
                more = [
                    {**part, "tool_index": _tool_index(indexer, fragment, dropped)}
                    for fragment, part in one.fragments
                ] + [
                    {"reasoning_type": type_, "reasoning_index": number, "reasoning": text}
                    for type_, number, text in one.items
                    if number is not None or type_ == plain
                ]
                if more:
                    values.update(more.pop(0))
                if on_own_row:
                    on_own_row = False
                    for name, value in values.items():
                        cols[name][row] = value
                    choice[seq + 1] = index
                    token[seq + 1] = carried and not dropped
                    first_part = 1
                else:
                    more.insert(0, values)
                    first_part = 0
                for offset, part in enumerate(more):
                    number = used.get(row, 0) + 1
                    used[row] = number
                    flags = {
                        "choice": index,
                        "token": offset == 0 and first_part == 0 and carried and not dropped,
                    }
                    self.parts.append((row, number, {**part, **flags}))

    def _put_parts(self, row: int, parts: list[dict[str, Any]]) -> None:
        """Part j of a chunk's fragments goes on part j's row: part 0 is the chunk's own row."""
        if not parts:
            return
        cols = self.cols
        for name, value in parts[0].items():
            cols[name][row] = value
        for number, values in enumerate(parts[1:], start=1):
            self.parts.append((row, number, values))

    def build(self) -> pd.DataFrame:
        def cat(arrays: list[np.ndarray], dtype: Any) -> np.ndarray:
            return np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)

        dense: dict[str, np.ndarray] = {
            "stream": cat(self.codes, np.int32),
            "seq": cat(self.seq, np.int64),
            "part": np.zeros(self.n, dtype=np.int64),
            "choice": cat(self.choice, np.int64),
            "t": cat(self.t, np.float64),
            "gap": cat(self.gap, np.float64),
            "kind": cat(self.kind, np.int8),
            "bytes": cat(self.nbytes, np.int64),
            "token": cat(self.token, bool),
            "ignored": cat(self.ignored, bool),
        }
        sparse = self.cols
        n = self.n
        where = None  # new position of each row, when parts are inserted
        if self.parts:
            # Further parts become rows after their chunk: append them, then one stable sort by
            # (position of the chunk's row, part).
            rows = np.fromiter(
                (row for row, _, _ in self.parts), dtype=np.int64, count=len(self.parts)
            )
            numbers = np.fromiter(
                (p for _, p, _ in self.parts), dtype=np.int64, count=len(self.parts)
            )
            for name, array in dense.items():
                extra = array[rows]
                if name == "gap":
                    extra = np.full(len(rows), np.nan)
                elif name == "bytes":
                    extra = np.full(len(rows), -1, dtype=np.int64)  # NA, masked below
                elif name == "part":
                    extra = numbers
                elif name in ("choice", "token"):  # a further choice's rows (n > 1) say their own
                    extra = extra.copy()
                    for offset, (_, _, values) in enumerate(self.parts):
                        if name in values:
                            extra[offset] = values[name]
                dense[name] = np.concatenate([array, extra])
            for offset, (_, _, values) in enumerate(self.parts):
                for name, value in values.items():
                    if name not in dense:
                        sparse[name][n + offset] = value
            position = np.concatenate([np.arange(n, dtype=np.int64), rows])
            order = np.lexsort((dense["part"], position))
            dense = {name: array[order] for name, array in dense.items()}
            n += len(rows)
            where = np.empty(n, dtype=np.int64)
            where[order] = np.arange(n, dtype=np.int64)

        data: dict[str, Any] = {}
        for name in COLUMNS:
            if name == "stream":
                data[name] = pd.Categorical.from_codes(
                    dense[name], categories=pd.Index(self.labels)
                )
            elif name == "kind":
                data[name] = pd.Categorical.from_codes(
                    dense[name], categories=list(KIND_CATEGORIES)
                )
            elif name == "bytes":
                mask = (dense["kind"] == 0) | (dense["part"] > 0)
                data[name] = pd.arrays.IntegerArray(dense[name], mask)
            elif name == "choice":
                data[name] = pd.arrays.IntegerArray(dense[name], np.zeros(n, dtype=bool))
            elif name in dense:
                data[name] = dense[name]
            else:
                column = sparse[name]
                keys = np.fromiter(column.keys(), dtype=np.int64, count=len(column))
                present = list(column.values())
                if None in present:  # a None value is a missing one
                    keep = [i for i, value in enumerate(present) if value is not None]
                    keys, present = keys[keep], [present[i] for i in keep]
                if where is not None:
                    keys = where[keys]
                data[name] = _column(n, keys, present, COLUMNS[name], name)
        return pd.DataFrame(data, copy=False)


def _tool_index(tools: ToolIndexer, fragment: dict[str, Any], dropped: bool) -> int | None:
    """The call index of a fragment, as the accumulator assigns it (the one rule, ToolIndexer); a
    fragment after [DONE], which the accumulator never saw, keeps the index it was sent with."""
    if dropped:
        index = fragment.get("index")
        return index if isinstance(index, int) else None
    return tools.index(fragment)


def _unread_error_body(
    cols: dict[str, Any], log: Any, kinds: np.ndarray, ends: np.ndarray, base: int
) -> None:
    """An HTTP error whose client closed the body unread (capture: the openai SDK before a retry)
    has no body to read its message from: its message is the one its log ended with, which says
    so, not "an empty body"."""
    end = log.end if isinstance(log.end, dict) else {}
    message = end.get("message")
    if not message:
        return
    for seq in np.flatnonzero(kinds == HTTP_ERROR).tolist():
        start = int(ends[seq - 1]) if seq else 0
        if int(ends[seq]) == start:  # nothing came
            cols["error_message"][base + seq] = str(message)
