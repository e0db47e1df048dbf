"""How a run store keeps each request's body: compressed as it is written (``coded``), and read
back no further than its events go (``decoded``). The one rule of ``store_writer.py`` and
``store.py``; the ``requests`` table says in ``body_coding`` how each row's ``body`` is coded.

Why compressed: DuckDB writes each body twice (its log, then the table) with its own threads, on
the cores the run's sending loop and its server need. 1,000 rows of a 45 KB ``sim/chat`` body
took it 0.20-0.26 s of CPU as they arrived, 0.07 s compressed (bench/bench_runs_floor.py;
docs/BENCHMARKS.md).

Why LZ4 (its frame format, by pyarrow, a dependency already): zlib's fastest level took 60-125
µs a body on the run's writer thread, LZ4 8-13 µs, to a size a third larger at most (a
``sim/chat`` body: 45 KB to under 2 KB either way). Stores written with zlib (``body_coding``
``'zlib'``, 5 December) and before any compression (NULL) read as they did.

Why ``decoded`` takes a limit: a store may come from elsewhere, and a few hundred KB of body can
inflate to gigabytes (a compression bomb). Only what the request's events take is decompressed.
"""

from __future__ import annotations

__all__ = ["CODING", "coded", "decoded"]

#: The ``body_coding`` of what this version writes: LZ4's frame format, which
#: ``pyarrow.input_stream(pyarrow.py_buffer(body), compression="lz4").read()`` (or the ``lz4``
#: package's ``lz4.frame.decompress``) gives back.
CODING = "lz4"


def coded(body: bytes | bytearray | memoryview) -> bytes:
    """``body`` as the store keeps it (``CODING``). pyarrow lets go of the GIL meanwhile."""
    import pyarrow as pa

    return pa.compress(body, "lz4", asbytes=True)


class UnknownCoding(ValueError):
    """A body coded in a way this version does not read (a store from a newer nito_nb)."""


def decoded(body: bytes, coding: str | None, limit: int) -> bytes:
    """The first ``limit`` bytes of a stored body as it arrived; ``coding`` is its row's
    ``body_coding`` (NULL: as it arrived). Raises ``UnknownCoding``, or ``ValueError`` for a
    body that does not decompress or holds fewer than ``limit`` bytes (cut short: its events
    would be rebuilt from what is not theirs, or not at all)."""
    if limit <= 0:
        return b""
    if coding is None:
        out = body[:limit]
    elif coding == "lz4":
        import pyarrow as pa

        try:
            # a stream read to the limit: a frame that inflates further is never inflated
            out = pa.input_stream(pa.py_buffer(body), compression="lz4").read(limit)
        except OSError as exc:  # pyarrow's word for a bad frame
            raise ValueError(str(exc)) from None
    elif coding == "zlib":
        import zlib

        try:
            out = zlib.decompressobj().decompress(body, limit)
        except zlib.error as exc:
            raise ValueError(str(exc)) from None
    else:
        raise UnknownCoding(coding)
    if len(out) < limit:
        raise ValueError(f"it holds {len(out):,} bytes where its events take {limit:,}")
    return out
