"""Planning a frame's chunk rows: which chunks share a skeleton (the chunk without its text
string and its padding), read once, and which are parsed whole.

``_Planner`` is the part of the frame builder (``build._Builder``) that reads a log's bytes; the
builder places what it returns in the columns.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from .._core.errors import error_details
from .._core.log import CHUNK, COMMENT, HTTP_ERROR
from .chunks import (
    _PADDING,
    _PADDING_MARK,
    _PADDING_MARK_TEXT,
    _PLACEHOLDER,
    _PLACEHOLDER_TEXT,
    _SLOTS,
    _chunk_data,
    _ChunkInfo,
    _json_string,
    _parse_chunks,
    _read_chunk,
)


class _Planner:
    """Reads the chunks of each log added to a builder; the builder owns the columns."""

    cols: dict[str, dict[int, Any]]
    _infos: list[_ChunkInfo | None]
    _skeletons: dict[bytes, int]

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
