"""Readings kept by the bytes of their chunk without its id, for the chunks that differ from one
read before only there (``ByChunkId``): the one mechanism of the planner's skeletons and of its
chunks read whole (``plan.py``).

Why: each stream of a run store's batch has its own chunk id, so each stream paid the reading of
every skeleton (a ``json.loads`` and two readings) and of its finish and usage chunks, a fifth of
the store's events helper (bench/bench_frame.py's many short streams; docs/BENCHMARKS.md). The id
reaches only the ``id`` column, so such a chunk's reading is the one before's with the id changed.

Only an id that comes first, is a plain JSON string (no escape, no control character, valid
UTF-8) and appears nowhere else in the bytes, and a reading that holds it once in ``id`` with no
other choices read apart, stand for others: no other value of the reading can depend on it.
"""

from __future__ import annotations

from .chunks import _ChunkInfo

__all__ = ["WHOLE", "ByChunkId", "skeleton_kind"]

#: How a chunk's event, and its JSON text, begin when its id comes first (OpenAI's, and most
#: gateways').
_ID_HEAD = b'data: {"id":"'
_JSON_ID_HEAD = b'{"id":"'
_ID_MARK = b"\x00nito_nb id\x00"  # never in a chunk's JSON text (a NUL is escaped there)

#: The kind of a chunk read whole (its JSON text); a skeleton's is ``skeleton_kind``'s.
WHOLE = b"W"


def skeleton_kind(padded: bool, echoed: bool) -> bytes:
    """The kind of a skeleton's bytes: how they were cut (its padding, its text's echo)."""
    return (b"P" if padded else b"-") + (b"E" if echoed else b"-")


class ByChunkId:
    """Readings of chunks by their kind and bytes without the chunk id (one per builder)."""

    def __init__(self) -> None:
        self._kept: dict[bytes, tuple[_ChunkInfo, str]] = {}

    @staticmethod
    def cut(key: bytes, kind: bytes) -> tuple[str, bytes] | None:
        """The chunk id of ``key`` (a skeleton's event bytes, or for ``WHOLE`` a chunk's JSON
        text) and the name its reading is kept under, or None when the id cannot be changed
        alone (the module's docstring)."""
        head = _JSON_ID_HEAD if kind == WHOLE else _ID_HEAD
        if not key.startswith(head):
            return None
        start = len(head)
        end = key.find(b'"', start)
        if end <= start:
            return None
        raw = key[start:end]
        # a control character makes the JSON invalid: such a chunk is read by its own bytes
        if b"\\" in raw or min(raw) < 0x20 or key.count(raw) != 1:
            return None
        try:
            chunk_id = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
        return chunk_id, kind + key[:start] + _ID_MARK + key[end:]

    def __contains__(self, name: bytes) -> bool:
        return name in self._kept

    def keep(self, name: bytes, chunk_id: str, info: _ChunkInfo | None) -> None:
        """Keep ``info``, the reading of a chunk with ``chunk_id``, under ``name`` (``cut``'s),
        when it can stand for the others (the first kept stays)."""
        if info is not None and info.choices is None and info.values.count(("id", chunk_id)) == 1:
            self._kept.setdefault(name, (info, chunk_id))

    def made(self, name: bytes, chunk_id: str) -> _ChunkInfo | None:
        """The reading of the chunk kept under ``name`` with ``chunk_id`` as its id (its
        ``id`` value changed, the rest shared: never changed once read), or None. ``targets``
        (which name a builder's columns) are left to the caller."""
        kept = self._kept.get(name)
        if kept is None:
            return None
        info, like_id = kept
        copy = _ChunkInfo()
        for slot in _ChunkInfo.__slots__:
            setattr(copy, slot, getattr(info, slot))
        copy.values = [
            (column, chunk_id if column == "id" and value == like_id else value)
            for column, value in info.values
        ]
        return copy
