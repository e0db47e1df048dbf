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

Each chunk is read in ``chunks.py`` (the engine's one reader), the chunks sharing a skeleton are
found in ``plan.py``; this module puts what they say in the columns.

The metrics, tables and plots of ``df.nito`` are in ``accessor.py`` and ``plots.py``; every
metric's definition is in ``nito_nb._core.metrics`` (docs/METRICS.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._core.chunk import plain_reasoning_source
from .._core.log import CHUNK, HTTP_ERROR
from .._core.printable import printable
from .._core.tool_index import ToolIndexer
from .._core.units import to_seconds
from .chunks import _ChunkInfo, read_chunk
from .dtypes import (
    _SPARSE,
    COLUMNS,
    KIND_CATEGORIES,
    _column,
    _column_of,
    _nulls,
    restore,
)
from .ids import ByChunkId
from .inputs import (
    EndedStream,
    FrameSource,
    _expand,
    _Snapshot,
    _stream_attrs,
    _unique_labels,
    freeze,
)
from .plan import _Planner, group_full, planned_alone, planned_together

# read_chunk: the engine's one chunk reader, which chunks.py reads every chunk with (imported here
# too: tests/test_architecture.py checks that the frame and the accumulator share it).
__all__ = ["frame", "read_chunk"]

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
    df = _rows(labels, [stream for _, stream, _ in items])
    attrs: dict[str, Any] = {}
    for label, (_, stream, origin) in zip(labels, items, strict=True):
        attrs[label] = _stream_attrs(stream, origin)
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


def events_rows(ended: Mapping[str, EndedStream]) -> pd.DataFrame:
    """The rows ``frame(ended)`` has, without its ``df.attrs``: a run store's events files keep
    none (``_runs/events.py``; the store keeps what they hold in its ``requests`` table), and
    making them was a sixteenth of its helper process's work, on the cores the run needs
    (bench/bench_runs_floor.py)."""
    return _rows([str(label) for label in ended], list(ended.values()))


def _rows(labels: list[str], streams: list[FrameSource]) -> pd.DataFrame:
    """The frame's rows of ``streams``, labelled ``labels`` (unique), one after another."""
    builder = _Builder(labels)
    builder.add_many(list(enumerate(streams)))
    return builder.build()


class _Builder(_Planner):
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
        # ... and the values placed at once (plan.py: the chunks that share a skeleton)
        self.bulk: dict[str, list[tuple[np.ndarray, np.ndarray, Any]]] = {
            name: [] for name in _SPARSE
        }
        # Further parts of chunks: (row of part 0, part, {column: value}).
        self.parts: list[tuple[int, int, dict[str, Any]]] = []
        # What each parsed chunk (or chunk skeleton) says; skeletons are shared by all streams.
        self._infos: list[_ChunkInfo | None] = []
        self._skeletons: dict[bytes, int] = {}
        self._echo_skeletons: dict[bytes, int] = {}
        self._by_id = ByChunkId()

    def add(self, code: int, stream: FrameSource) -> None:
        """The rows of one stream (``add_many``: of many)."""
        self.add_many([(code, stream)])

    def add_many(self, streams: list[tuple[int, FrameSource]]) -> None:
        """The rows of ``streams`` ((label code, stream) each), one stream after another.

        A long log is planned alone, in bulk; short ones are planned together, in bulk, when they
        have enough chunks between them (up to a bound at once: their bodies are joined for it),
        else one by one (``plan.py``: ``planned_alone``, ``planned_together``, ``group_full``)."""
        group: list[tuple[int, FrameSource, _Snapshot]] = []
        chunks = 0
        for code, stream in streams:
            snapshot = self._snapshot(stream)
            if planned_alone(snapshot.chunks):
                self._add_group(group, chunks)
                group, chunks = [], 0
                self._add_alone(code, stream, snapshot)
                continue
            group.append((code, stream, snapshot))
            chunks += snapshot.chunks
            if group_full(chunks):
                self._add_group(group, chunks)
                group, chunks = [], 0
        self._add_group(group, chunks)

    def _add_group(self, group: list[tuple[int, FrameSource, _Snapshot]], chunks: int) -> None:
        """The short logs of ``group`` (``chunks`` between them): together, or one by one."""
        if planned_together(len(group), chunks):
            token = np.zeros(sum(snapshot.rows for _, _, snapshot in group), dtype=bool)
            at = 0
            for _, _, snapshot in group:  # each stream's token column, a view of the group's
                snapshot.token = token[at : at + snapshot.rows]
                at += snapshot.rows
            planned = self._plan_together(
                [(s.body, s.kinds, s.starts, s.ends, s.base, s.first_done) for _, _, s in group],
                token,
            )
            for (code, stream, snapshot), (plan, pending_base, groups) in zip(
                group, planned, strict=True
            ):
                self._respond(stream, snapshot)
                self._plan_events(
                    snapshot.body, snapshot.kinds, snapshot.starts, snapshot.ends, snapshot.base
                )
                self._place(code, stream, snapshot, plan, pending_base, groups)
            return
        for code, stream, snapshot in group:
            self._add_alone(code, stream, snapshot)

    def _add_alone(self, code: int, stream: FrameSource, snapshot: _Snapshot) -> None:
        """One log's rows, planned on its own."""
        self._respond(stream, snapshot)
        s = snapshot
        plan, pending_base, groups = self._plan(
            s.body, s.kinds, s.starts, s.ends, s.base, s.first_done, s.token
        )
        self._place(code, stream, snapshot, plan, pending_base, groups)

    def _snapshot(self, stream: FrameSource) -> _Snapshot:
        """The rows of ``stream`` taken (``self.n``) and what they are made of."""
        snapshot = _Snapshot.of(stream, self.n + 1)  # row self.n is the response row
        self.n += snapshot.rows
        return snapshot

    def _respond(self, stream: FrameSource, snapshot: _Snapshot) -> None:
        """The stream's response row: its values."""
        cols = self.cols
        log = stream.log
        row = snapshot.base - 1
        cols["model"][row] = stream.model
        cols["status"][row] = str(stream.status)
        cols["http_status"][row] = log.status_code  # None values count as missing
        cols["attempts"][row] = stream.attempts
        if log.connect_ns is not None:  # seconds; none when no connection was opened, or unknown
            cols["connect"][row] = to_seconds(log.connect_ns)

    def _place(
        self,
        code: int,
        stream: FrameSource,
        snapshot: _Snapshot,
        plan: list[tuple[int, int, str | None]],
        pending_base: int,
        groups: list[tuple[int, np.ndarray, Any]],
    ) -> None:
        """Place the rows of ``stream`` once its log is planned (``plan.py``)."""
        log = stream.log
        n, base, rows = snapshot.n, snapshot.base, snapshot.rows
        times, kinds, ends = snapshot.times, snapshot.kinds, snapshot.ends
        first_done, token = snapshot.first_done, snapshot.token
        cols = self.cols
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
        ignored = np.zeros(rows, dtype=bool)
        ignored[first_done + 2 :] = kinds[first_done + 1 :] == CHUNK
        _unread_error_body(cols, log, kinds, ends, base)

        infos = self._infos
        contents = cols["content"]
        reasoning_items: list[tuple[int, list[tuple[str, int | None, str | None]]]] = []
        has_readable = False
        plain_sources: set[str] = set()
        tools = ToolIndexer()
        # The chunks placed in bulk count as the others do, at their first row before [DONE]:
        # their reasoning's source, and their tool fragment for the numbering of later ones.
        turns: list[tuple[int, dict[str, Any]]] = []
        for skeleton, seqs, _ in groups:
            info = infos[skeleton]
            assert info is not None
            live = seqs[seqs <= first_done]
            if len(live) and info.items:
                has_readable = has_readable or info.readable
                plain_sources.update(info.plain)
            if len(live) and info.fragments:
                turns.append((int(live[0]), info.fragments[0][0]))
        turns.sort(key=lambda turn: turn[0])
        turn = 0
        other_choices: list[tuple[int, int, bool, _ChunkInfo]] = []  # (seq, row, dropped, info)
        for seq, info_index, text in plan:
            while turn < len(turns) and turns[turn][0] < seq:
                tools.index(turns[turn][1])
                turn += 1
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
                where, places = slot
                if where == "item":
                    items = list(items)
                    for k in places:
                        items[k] = (items[k][0], items[k][1], text)
                else:
                    k = places[0]
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
        for skeleton, seqs, texts in groups:
            self._place_group(infos[skeleton], base, seqs, seqs <= first_done, texts, plain, token)
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

    def _place_group(
        self,
        info: _ChunkInfo | None,
        base: int,
        seqs: np.ndarray,
        live: np.ndarray,
        texts: Any,
        plain: str | None,
        token: np.ndarray,
    ) -> None:
        """The chunks of one skeleton whose cut string is a reasoning text (and its echo) or one
        tool fragment's arguments, in bulk: what add() does for each of them (its values,
        content, then its first piece's columns, later ones winning, and its further pieces on
        parts of their own), with each chunk's own text. ``seqs``: the chunks; ``live``: those
        before [DONE]; ``texts``: their texts as ``(codes, values)`` (``pieces.text_codes``)."""
        assert info is not None and info.slot is not None
        rows = base + seqs
        values: dict[str, Any] = dict(info.values)
        if info.content is not None:
            values["content"] = info.content
        carried = info.carried or bool(info.content)
        if info.items:
            places = info.slot[1]
            # the pieces the answer shows (add()'s rule), each with the row's text or its own
            shown = [
                (type_, number, text, k in places)
                for k, (type_, number, text) in enumerate(info.items)
                if number is not None or type_ == plain
            ]
            if shown:
                type_, number, text, own = shown[0]
                values["reasoning_type"] = type_
                values["reasoning_index"] = number
                values["reasoning"] = text
                if own:
                    values.pop("reasoning")
                    self.bulk["reasoning"].append((rows, *texts))
            if len(shown) > 1:  # rare: a string beside an unreadable detail, both shown
                codes, distinct = texts
                listed = distinct if isinstance(distinct, list) else distinct.to_pylist()
                for row, code in zip(rows.tolist(), codes.tolist(), strict=True):
                    for further, (type_, number, text, own) in enumerate(shown[1:], start=1):
                        piece = {
                            "reasoning_type": type_,
                            "reasoning_index": number,
                            "reasoning": listed[code] if own else text,
                        }
                        self.parts.append((row, further, piece))
        else:
            fragment, part = info.fragments[0]
            values.update(part)
            values.pop("tool_args", None)
            values["tool_index"] = fragment["index"]  # its own, before [DONE] and after
            self.bulk["tool_args"].append((rows, *texts))
        same = np.zeros(len(rows), dtype=np.int64)
        for name, value in values.items():
            if value is not None:  # a None value is a missing one
                self.bulk[name].append((rows, same, [value]))
        if carried:
            token[seqs[live] + 1] = True

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
            # One stream's column is its own array, not a copy; the builder lets go of its arrays
            # as they are joined, so that no column is held twice.
            if len(arrays) == 1:
                return arrays.pop()
            joined = np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)
            arrays.clear()
            return joined

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
        # one all-null array, shared by every text column without values
        nulls = _nulls(n)
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
                # taken from the builder: _column_of lets go of each piece once it is copied
                bulk = self.bulk.pop(name)
                placed = None  # the rows before parts were inserted: the order they were placed in
                if bulk and where is not None:
                    placed = np.concatenate([keys] + [rows[codes >= 0] for rows, codes, _ in bulk])
                    bulk = [(where[rows], codes, values) for rows, codes, values in bulk]
                if not bulk and COLUMNS[name] == "category" and (keys[1:] < keys[:-1]).any():
                    # In row order, as _column_of places them: a category's categories come in
                    # the order its values first appear in the rows, however the rows were
                    # filled (a short log's plain chunks were placed before the chunks parsed
                    # whole above them, and its categories differed from the bulk path's).
                    order = np.argsort(keys, kind="stable")
                    keys, present = keys[order], [present[i] for i in order.tolist()]
                if where is not None:
                    keys = where[keys]
                if bulk:
                    data[name] = _column_of(
                        n, keys, present, bulk, COLUMNS[name], name, placed, nulls
                    )
                else:
                    data[name] = _column(n, keys, present, COLUMNS[name], name, nulls)
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
