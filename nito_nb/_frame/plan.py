"""Planning a frame's chunk rows: which chunks share a skeleton (the chunk without its text
string and its padding), read once, and which are parsed whole.

``_Planner`` is the part of the frame builder (``build._Builder``) that reads a log's bytes; the
builder places what it returns in the columns.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from .._core.http_errors import error_details
from .._core.log import CHUNK, COMMENT, HTTP_ERROR
from .chunks import (
    _PADDING_MARK,
    _PADDING_MARK_TEXT,
    _PLACEHOLDER,
    _PLACEHOLDER_TEXT,
    _chunk_data,
    _ChunkInfo,
    _json_string,
    _parse_chunks,
    _read_chunk,
)
from .cuts import cut_one
from .dtypes import _arrow
from .ids import WHOLE, ByChunkId, skeleton_kind
from .pieces import _Pieces, pieces_of

# Chunks from which a log is planned in bulk (_Planner._plan_bulk): below, one by one, unless
# shorter logs of one frame have _TOGETHER_FROM between them (_Planner._plan_together).
_BULK_FROM = 1000
_TOGETHER_FROM = 1000
# Chunks of short logs planned together at most: their bodies are joined (a copy) for it.
_TOGETHER_UP_TO = 65536


def planned_alone(chunks: int) -> bool:
    """Whether a log of ``chunks`` chunks is planned on its own (in bulk), never with others."""
    return chunks >= _BULK_FROM


def planned_together(logs: int, chunks: int) -> bool:
    """Whether ``logs`` short logs of ``chunks`` chunks between them are planned together; the
    ``full`` group of :func:`group_full` is, if there are more than one."""
    return logs > 1 and chunks >= _TOGETHER_FROM


def group_full(chunks: int) -> bool:
    """Whether short logs of ``chunks`` chunks between them are as many as are planned at once."""
    return chunks >= _TOGETHER_UP_TO


class _Planner:
    """Reads the chunks of each log added to a builder; the builder owns the columns."""

    cols: dict[str, dict[int, Any]]
    # Columns filled at once: (rows, each row's value as a position in values or -1, values)
    bulk: dict[str, list[tuple[np.ndarray, np.ndarray, Any]]]
    _infos: list[_ChunkInfo | None]
    _skeletons: dict[bytes, int]
    _echo_skeletons: dict[bytes, int]  # skeletons with the text in two places (its echo's too)
    _by_id: ByChunkId  # readings made again for another chunk id (ids.py)

    def _plan(
        self,
        body: bytes | bytearray,
        kinds: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        base: int,
        first_done: int,
        token: np.ndarray,
    ) -> tuple[list[tuple[int, int, str | None]], int, list[tuple[int, np.ndarray, Any]]]:
        """Read the log's chunks (event i is ``body[starts[i]:ends[i]]``: ``inputs.event_starts``);
        return the ones left for :meth:`add` to place, in order.

        Decoding the JSON again is most of the cost of a frame. Most chunks of a stream differ
        only in their text string (``delta.content``, a reasoning string, a tool fragment's
        arguments; OpenRouter's reasoning piece in two places) and OpenAI's padding, so a chunk
        with those cut out (its "skeleton") is
        usually one already read: each skeleton is parsed and read once. A skeleton whose
        reading does not put the cut-out string back where the row's text goes (the cut was
        elsewhere) is not trusted: those chunks are parsed whole, and so is any chunk without
        such a string. The result is the same either way (tests/test_frame_bulk.py, on every
        recording).

        Nothing here loops over the chunks in Python: the cuts are found for all chunks at once
        (``cuts.py``), the chunks grouped by skeleton and their texts decoded at once
        (``pieces.py``), and the plain content chunks' columns given in bulk (``self.bulk``).
        A Python loop over 100,000 chunks cost most of a frame (docs/BENCHMARKS.md).

        Returns (seq, index into ``self._infos`` or -1, -2... for the chunks parsed whole, text
        or None) for the chunks not placed here, where the chunks parsed whole start in
        ``self._infos``, and the reasoning and tool-argument chunks whose skeleton holds only
        that piece, for add() to place in bulk: (skeleton, their seqs, their texts as
        ``(codes, values)``: ``pieces._Pieces.text_codes``).
        """
        pending: list[bytes] = []  # chunks parsed whole, all at once after the loop
        pending_names: list[str | None] = []
        chunk_seqs = np.flatnonzero(kinds == CHUNK)
        groups: list[tuple[int, np.ndarray, Any]] = []
        if len(chunk_seqs) >= _BULK_FROM:
            plans, grouped = self._plan_bulk(
                body,
                starts[chunk_seqs],
                ends[chunk_seqs],
                chunk_seqs,
                base + chunk_seqs,
                None,
                chunk_seqs <= first_done,
                token,
                base - 1,
                1,
                pending,
                pending_names,
            )
            plan, groups = plans[0], grouped[0]
        else:
            plan = self._plan_rows(
                body, starts, ends, chunk_seqs, base, first_done, token, pending, pending_names
            )
        self._plan_events(body, kinds, starts, ends, base)
        return plan, self._read_pending(pending, pending_names), groups

    def _plan_together(
        self,
        logs: list[tuple[bytes | bytearray, np.ndarray, np.ndarray, np.ndarray, int, int]],
        token: np.ndarray,
    ) -> list[tuple[list[tuple[int, int, str | None]], int, list[tuple[int, np.ndarray, Any]]]]:
        """:meth:`_plan` of many short logs at once, in bulk: ``logs`` are (body, kinds, starts,
        ends, base, first_done) each, ``token`` the token column of all their rows (the first log's
        response row first). One plan for all their chunks, over their bodies joined: planned
        one by one, each short log paid the fixed cost of a plan, 0.3 ms a stream beside 4 µs an
        event (a run store's batch of 128 streams; bench/bench_frame.py's many short streams).
        Returns what :meth:`_plan` returns, for each log; the comments and errors are placed by
        :meth:`_plan_events` (by add(), in the order of the one-by-one path)."""
        pending: list[bytes] = []
        pending_names: list[str | None] = []
        firsts, lasts, seqs, rows, streams, live = [], [], [], [], [], []
        offset = 0
        origin = logs[0][4] - 1  # the first response row: token[0]
        for number, (body, kinds, starts, ends, base, first_done) in enumerate(logs):
            chunk_seqs = np.flatnonzero(kinds == CHUNK)
            firsts.append(starts[chunk_seqs] + offset)
            lasts.append(ends[chunk_seqs] + offset)
            seqs.append(chunk_seqs)
            rows.append(base + chunk_seqs)
            streams.append(np.full(len(chunk_seqs), number, dtype=np.int64))
            live.append(chunk_seqs <= first_done)
            offset += len(body)
        joined = b"".join(body for body, *_ in logs)
        at_rows = np.concatenate(rows)
        plans, grouped = self._plan_bulk(
            joined,
            np.concatenate(firsts),
            np.concatenate(lasts),
            np.concatenate(seqs),
            at_rows,
            np.concatenate(streams),
            np.concatenate(live),
            token,
            origin,
            len(logs),
            pending,
            pending_names,
        )
        pending_base = self._read_pending(pending, pending_names)
        return [(plan, pending_base, groups) for plan, groups in zip(plans, grouped, strict=True)]

    def _plan_events(
        self,
        body: bytes | bytearray,
        kinds: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        base: int,
    ) -> None:
        """The log's comments and HTTP errors, in their columns."""
        cols = self.cols
        for seq in np.flatnonzero((kinds == COMMENT) | (kinds == HTTP_ERROR)).tolist():
            raw = body[int(starts[seq]) : int(ends[seq])]
            if kinds[seq] == COMMENT:
                text = raw.strip(b"\r\n")[1:].decode("utf-8", "replace")
                cols["comment"][base + seq] = text[1:] if text.startswith(" ") else text
            else:
                message, error_code, _ = error_details(raw.decode("utf-8", "replace"))
                cols["error_message"][base + seq] = message
                cols["error_code"][base + seq] = None if error_code is None else str(error_code)

    def _read_pending(self, pending: list[bytes], names: list[str | None]) -> int:
        """Read the chunks parsed whole (all at once); return where they start in ``_infos``.

        A chunk that differs from one read before only in its id (another stream's last chunks:
        its finish, its usage) is that one's reading with the id changed (``ids.py``): parsing
        and reading each stream's was a tenth of a run store's events helper."""
        infos = self._infos
        pending_base = len(infos)
        by_id = self._by_id
        cuts = [
            None if name is not None else by_id.cut(data, WHOLE)
            for data, name in zip(pending, names, strict=True)
        ]
        read: list[_ChunkInfo | None] = [None] * len(pending)
        missing: list[int] = []  # parsed and read
        first: dict[bytes, int] = {}  # the first chunk of this call under a name nothing holds
        later: list[int] = []  # the others: made from the reading kept, if one is
        for k, cut in enumerate(cuts):
            if cut is None:
                missing.append(k)
            elif cut[1] in first or cut[1] in by_id:
                later.append(k)
            else:
                first[cut[1]] = k
                missing.append(k)
        self._read_whole(pending, names, missing, read)
        for name, k in first.items():
            by_id.keep(name, cuts[k][0], read[k])  # type: ignore[index]
        again = []  # its first's reading cannot stand for it: read as it is
        for k in later:
            chunk_id, name = cuts[k]  # type: ignore[misc]
            read[k] = by_id.made(name, chunk_id)
            if read[k] is None:
                again.append(k)
        self._read_whole(pending, names, again, read)
        infos.extend(read)
        return pending_base

    @staticmethod
    def _read_whole(
        pending: list[bytes],
        names: list[str | None],
        which: list[int],
        read: list[_ChunkInfo | None],
    ) -> None:
        """Parse the chunks ``which`` of ``pending`` at once, and put their readings in ``read``."""
        for k, value in zip(which, _parse_chunks([pending[k] for k in which]), strict=True):
            read[k] = _read_chunk(value, names[k])

    def _plan_rows(
        self,
        body: bytes | bytearray,
        starts: np.ndarray,
        ends: np.ndarray,
        chunk_seqs: np.ndarray,
        base: int,
        first_done: int,
        token: np.ndarray,
        pending: list[bytes],
        pending_names: list[str | None],
    ) -> list[tuple[int, int, str | None]]:
        """:meth:`_plan` of a short log, one chunk at a time (each skeleton compared in place
        with the chunk before's): below ``_BULK_FROM`` chunks, cheaper than the bulk path's
        fixed cost (a frame of 1,000 streams of 100 events: bench/bench_frame.py)."""
        cols = self.cols
        infos: list[Any] = self._infos  # the skeleton entries it reads are never None
        contents = cols["content"]
        plan: list[tuple[int, int, str | None]] = []
        groups: dict[int, list[int]] = {}  # skeleton index: rows of plain content chunks
        token_rows: list[int] = []
        escaped_rows: list[int] = []
        escaped: list[bytes | bytearray] = []
        startswith = body.startswith
        prev_head: bytes | bytearray
        prev_tail: bytes | bytearray
        prev_echo_tail: bytes | bytearray
        prev_rest: bytes | bytearray
        prev_head = prev_tail = prev_echo_tail = prev_rest = (
            b"\xff"  # matches no chunk: the first one reads its skeleton
        )
        prev_plain = True
        prev_echoed = False
        prev_index = -1
        # (row, skeleton, padding) of padded chunks
        paddings: list[tuple[int, int, bytes | bytearray]] = []
        for seq, first, last in zip(
            chunk_seqs.tolist(), starts[chunk_seqs].tolist(), ends[chunk_seqs].tolist(), strict=True
        ):
            cut = cut_one(body, first, last)
            if cut is not None:
                start, end, echo_start, echo_end, pad_start, pad_end = cut
                # The padding, when it is as sent: its place in the chunk is part of the
                # skeleton, its value is the row's own.
                padding = None if pad_start == last else body[pad_start:pad_end]
                # An echo that is the text again: cut out too (else part of the skeleton).
                echoed = echo_start < pad_start and body[echo_start:echo_end] == body[start:end]
                if not echoed:
                    echo_start = echo_end = pad_start
                # Usually the same skeleton as the chunk before: compared in place, no copy.
                if (
                    start - first == len(prev_head)
                    and echo_start - end == len(prev_tail)
                    and pad_start - echo_end == len(prev_echo_tail)
                    and last - pad_end == len(prev_rest)
                    and (padding is None) is prev_plain
                    and echoed is prev_echoed
                    and startswith(prev_head, first)
                    and startswith(prev_tail, end)
                    and startswith(prev_echo_tail, echo_end)
                    and startswith(prev_rest, pad_end)
                ):
                    index = prev_index
                else:
                    prev_head, prev_tail, prev_echo_tail, prev_rest = (
                        body[first:start],
                        body[end:echo_start],
                        body[echo_end:pad_start],
                        body[pad_end:last],
                    )
                    prev_plain = padding is None
                    prev_echoed = echoed
                    index = prev_index = self._known(
                        prev_head,
                        prev_tail,
                        prev_echo_tail if echoed else None,
                        prev_rest,
                        padding is not None,
                    )
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
                    # the skeleton's own text (a refusal beside an empty content) counts too
                    if content or infos[index].carried:
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
        return plan

    def _plan_bulk(
        self,
        body: bytes | bytearray,
        firsts: np.ndarray,
        lasts: np.ndarray,
        seqs: np.ndarray,
        rows: np.ndarray,
        streams: np.ndarray | None,
        live: np.ndarray,
        token: np.ndarray,
        origin: int,
        n_streams: int,
        pending: list[bytes],
        pending_names: list[str | None],
    ) -> tuple[list[list[tuple[int, int, str | None]]], list[list[tuple[int, np.ndarray, Any]]]]:
        """:meth:`_plan` of a long log, or of many short ones (:meth:`_plan_together`), every
        chunk at once: no Python loop over the chunks. Chunk i is ``body[firsts[i]:lasts[i]]``,
        event ``seqs[i]`` of log ``streams[i]`` (None: one log), on the frame's row ``rows[i]``,
        before that log's [DONE] (``live``), its row's token at ``token[rows[i] - origin]``.
        Returns the plan and the groups of each log."""
        infos: list[Any] = self._infos  # the skeleton entries it reads are never None
        plans: list[list[tuple[int, int, str | None]]] = [[] for _ in range(n_streams)]
        grouped: list[list[tuple[int, np.ndarray, Any]]] = [[] for _ in range(n_streams)]
        cut, pieces = pieces_of(body, firsts, lasts)
        index = np.full(len(seqs), -1, dtype=np.int64)  # each chunk's skeleton, or -1
        if pieces.rows is not None:
            known = []
            for row, padded, echoed in zip(
                pieces.representatives.tolist(),
                pieces.padded.tolist(),
                pieces.echoed.tolist(),
                strict=True,
            ):
                start, end, echo_start, echo_end, pad_start, pad_end = cut[row].tolist()
                if not echoed:  # no echo, or not the text again: part of the skeleton
                    echo_start = echo_end = pad_start
                known.append(
                    self._known(
                        body[int(firsts[row]) : start],
                        body[end:echo_start],
                        body[echo_end:pad_start] if echoed else None,
                        body[pad_end : int(lasts[row])],
                        padded,
                    )
                )
            index[pieces.rows] = np.array(known, dtype=np.int64)[pieces.group]
        plain = np.zeros(len(index), dtype=bool)
        usable = np.flatnonzero(index >= 0)
        if len(usable):
            skeletons, which = np.unique(index[usable], return_inverse=True)
            targets = [infos[k].targets is not None for k in skeletons.tolist()]
            plain[usable] = np.array(targets, dtype=bool)[which]
        padded_rows = usable[cut[usable, 4] < lasts[usable]]
        if len(padded_rows):
            self._bulk_extras(pieces, padded_rows, index, rows)
        plain_rows = np.flatnonzero(plain)
        if len(plain_rows):
            # after [DONE], the answer ignores them: no token
            self._bulk_plain(pieces, plain_rows, index, rows, cut, token, origin, live)
        # Reasoning and tool-argument chunks: in bulk when their skeleton holds that one piece,
        # else one by one (add() places both).
        slots = np.flatnonzero((index >= 0) & ~plain)
        alone = np.ones(len(index), dtype=bool)
        if len(slots):
            # one group per log and skeleton: (log, skeleton) as one number
            of_log = 0 if streams is None else streams[slots]
            keys, which = np.unique(of_log * len(infos) + index[slots], return_inverse=True)
            order = np.argsort(which, kind="stable")
            bounds = np.searchsorted(which[order], np.arange(len(keys) + 1))
            for number, key in enumerate(keys.tolist()):
                stream, skeleton = divmod(key, len(infos))
                if _in_bulk(infos[skeleton]):
                    chunks = slots[order[bounds[number] : bounds[number + 1]]]
                    # every group's texts as codes into the same distinct texts (which the
                    # column joins once: dtypes._column_of)
                    grouped[stream].append((skeleton, seqs[chunks], pieces.text_codes(chunks)))
                    alone[chunks] = False
        slot_texts = iter(pieces.texts(slots[alone[slots]]))
        for at in np.flatnonzero(~plain & alone).tolist():
            seq = int(seqs[at])
            plan = plans[0 if streams is None else int(streams[at])]
            if index[at] >= 0:  # fragments or reasoning: add() places it
                plan.append((seq, int(index[at]), next(slot_texts)))
                continue
            data, event_name = _chunk_data(body[int(firsts[at]) : int(lasts[at])])
            plan.append((seq, -1 - len(pending), None))
            pending.append(data)
            pending_names.append(event_name)
        return plans, grouped

    def _bulk_plain(
        self,
        pieces: _Pieces,
        chunks: np.ndarray,
        index: np.ndarray,
        rows: np.ndarray,
        cut: np.ndarray,
        token: np.ndarray,
        origin: int,
        live: np.ndarray,
    ) -> None:
        """The plain content chunks ``chunks``: their skeleton's values and their own text, as
        columns at once (``_Builder.bulk``); ``token`` (at the row less ``origin``) where the
        text is not empty and the chunk came before its log's [DONE] (``live``)."""
        where = rows[chunks]
        skeletons, which = np.unique(index[chunks], return_inverse=True)
        columns: dict[str, tuple[np.ndarray, list[Any]]] = {}
        for number, skeleton in enumerate(skeletons.tolist()):
            info = self._infos[skeleton]
            assert info is not None
            for name, value in dict(info.values).items():
                if value is None:  # a None value is a missing one
                    continue
                if name not in columns:
                    columns[name] = (np.full(len(skeletons), -1, dtype=np.int64), [])
                codes, values = columns[name]
                codes[number] = len(values)
                values.append(value)
        for name, (codes, values) in columns.items():
            self.bulk[name].append((where, codes[which], values))
        self.bulk["content"].append((where, *pieces.text_codes(chunks)))
        # Where the text is not empty, or the skeleton itself carries text (a refusal beside an
        # empty content): the rule of the chunk read whole.
        carried = np.array([self._infos[k].carried for k in skeletons.tolist()], dtype=bool)
        has_text = (cut[chunks, 1] > cut[chunks, 0]) | carried[which]
        token[rows[chunks[has_text & live[chunks]]] - origin] = True

    def _bulk_extras(
        self, pieces: _Pieces, chunks: np.ndarray, index: np.ndarray, rows: np.ndarray
    ) -> None:
        """Each padded chunk's extras: its skeleton's, with the chunk's own padding."""
        skeletons, which = np.unique(index[chunks], return_inverse=True)
        around = [self._infos[k].extras for k in skeletons.tolist()]
        arrow = _arrow()
        if arrow is None:
            paddings = pieces.paddings(chunks)
            text = [
                around[k][0] + padding + around[k][1]
                for k, padding in zip(which.tolist(), paddings, strict=True)
            ]
            self.bulk["extras"].append((rows[chunks], np.arange(len(chunks), dtype=np.int64), text))
            return
        # One skeleton's chunks at a time, its text before and after the padding given once (a
        # scalar): spread to every chunk first, they cost as much as the extras themselves.
        string = arrow.large_string()
        for number, (before, after) in enumerate(around):
            some = chunks if len(around) == 1 else chunks[which == number]
            text = arrow.compute.binary_join_element_wise(
                arrow.scalar(before, type=string),
                pieces.paddings(some),
                arrow.scalar(after, type=string),
                arrow.scalar("", type=string),
            )
            self.bulk["extras"].append((rows[some], np.arange(len(some), dtype=np.int64), text))

    def _known(
        self,
        head: bytes | bytearray,
        tail: bytes | bytearray,
        echo_tail: bytes | bytearray | None,
        rest: bytes | bytearray,
        padded: bool,
    ) -> int:
        """The skeleton of the chunks with these bytes around their text (:meth:`_skeleton`),
        read once: ``head`` before the text, ``tail`` after it (up to its echo, when the text
        comes again), ``echo_tail`` after the echo (None: no echo), ``rest`` after the padding
        (``padded``)."""
        # bytes: the body may be the log's bytearray (build.py), unhashable
        key = bytes(head + _PLACEHOLDER + tail)
        if echo_tail is not None:
            key += _PLACEHOLDER + echo_tail
        if padded:
            key += _PADDING_MARK + rest
        # Skeletons with an echo are kept apart: the same bytes without one are a chunk whose
        # string after the text is the placeholder's own text, which its reading must keep.
        skeletons = self._skeletons if echo_tail is None else self._echo_skeletons
        found = skeletons.get(key)
        if found is None:
            kind = skeleton_kind(padded, echo_tail is not None)
            cut = self._by_id.cut(key, kind)
            info = None if cut is None else self._by_id.made(cut[1], cut[0])
            if info is not None:  # another stream's skeleton, with this chunk's id
                if info.targets is not None:
                    info.targets = [(self.cols[name], value) for name, value in info.values]
                self._infos.append(info)
                found = len(self._infos) - 1
            else:
                if echo_tail is None:
                    found = self._skeleton(key, padded)
                else:
                    found = self._skeleton(key, padded, echoed=True)
                if cut is not None and found >= 0:
                    self._by_id.keep(cut[1], cut[0], self._infos[found])
            skeletons[key] = found
        return found

    def _skeleton(self, key: bytes, padded: bool = False, echoed: bool = False) -> int:
        """Index of the skeleton's reading in ``self._infos``, or -1 when it cannot be trusted.
        ``padded``: the skeleton's padding is the marker, which must land in its extras only (a
        top-level ``obfuscation``), once; its rows' extras are then that text around their own.
        ``echoed``: the placeholder is in two places, which must be two reasoning pieces (a
        reasoning string and its detail's text: OpenRouter's)."""
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
        places = 2 if echoed else 1
        if info.content == _PLACEHOLDER_TEXT and not echoed:
            texts.append(info.content)
        elif info.content:
            return -1
        else:  # the cut string is a reasoning text (and its echo) or a tool fragment's arguments
            items = [k for k, (_, _, text) in enumerate(info.items) if text == _PLACEHOLDER_TEXT]
            fragments = [
                k
                for k, (_, part) in enumerate(info.fragments)
                if part.get("tool_args") == _PLACEHOLDER_TEXT
            ]
            if len(items) + len(fragments) != places or (echoed and fragments):
                return -1
            info.slot = ("item", tuple(items)) if items else ("fragment", (fragments[0],))
        if sum(_PLACEHOLDER_TEXT in text for text in texts) != places:
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


def _in_bulk(info: _ChunkInfo) -> bool:
    """Whether the chunks of a skeleton whose cut string is a reasoning text or tool arguments
    can be placed in bulk: reasoning pieces (the row's text in one, or in two: a string and its
    echo), or one tool fragment with its call's index (its index is then its own, whatever came
    before: ``ToolIndexer``), and one choice."""
    if info.choices is not None or info.slot is None:
        return False
    if info.slot[0] == "item":
        return not info.fragments
    return (
        len(info.fragments) == 1
        and not info.items
        and isinstance(info.fragments[0][0].get("index"), int)
    )
