"""What a file or a text holds, before it is read as a stream: SSE text, a saved log, an HTTP error
body, or none of them (and then one line that says what it looks like and what reads it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = [
    "RUN_STORE_DB",
    "first_line_is_log",
    "is_sse_text",
    "looks_like_error_body",
    "not_sse",
    "not_text",
    "run_store_folder",
]

#: The database file that makes a folder a run store (``nito_nb.run(..., store=folder)``).
RUN_STORE_DB = "runs.duckdb"


def run_store_folder(folder: str) -> str:
    """What to do with a run store given where saved logs were expected: its streams are rows of
    its database, not files (``nito_nb.frame`` of its folder was an empty frame, silently, and of
    its database file a few rows of binary read as SSE)."""
    return (
        f"{folder!r} is a run store (it holds {RUN_STORE_DB}): its streams are in that database, "
        f"not in log files; read them with nito_nb.open_store({folder!r}).frame()"
    )


#: Text that starts like an SSE body (a field name and its colon or line end, or a comment), or
#: like a recorded HTTP error body (a JSON object): no file name starts that way.
_SSE_START = re.compile(r"\ufeff?\s*(?:\{|:|(?:data|event|id|retry)(?::|$))")


def is_sse_text(text: str) -> bool:
    return not text or "\n" in text or "\r" in text or _SSE_START.match(text) is not None


#: The first bytes of files often mistaken for a log or a recorded body, and what they are.
_MAGIC = (
    (b"\x1f\x8b", "a gzip file: decompress it first (gzip -d)"),
    (b"PAR1", "a Parquet file: read it with pandas.read_parquet, then nito_nb.frame(df)"),
    (b"PK\x03\x04", "a zip file: extract it first"),
    (b"\xff\xfe", "UTF-16 text: save it again as UTF-8"),
    (b"\xfe\xff", "UTF-16 text: save it again as UTF-8"),
    (b"SQLite format 3\x00", "a SQLite database"),
)


def not_text(head: bytes, expected: str) -> str:
    """What a file that is not UTF-8 text looks like (by its first bytes), and what to do;
    ``expected`` says what the reader takes."""
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return f"it is {what}."
    return f"it is not UTF-8 text (it starts {head[:8]!r}); {expected}"


def _is_text(head: bytes) -> bool:
    if head.startswith(tuple(magic for magic, _ in _MAGIC)) or b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:  # a character cut at the end of the head is still text
        return exc.start >= len(head) - 3 and exc.reason == "unexpected end of data"
    return True


def not_sse(path: Path, body: bytes) -> str:
    """What a file that holds no server-sent event looks like, and what reads it."""
    where = repr(str(path))
    if not _is_text(body[:4096]):
        return f"{where} is not a recorded SSE body: " + not_text(
            body[:64], "a recorded SSE body is UTF-8 text ('data: {...}' lines)"
        )
    first = body.lstrip().split(b"\n", 1)[0][:200].decode("utf-8", "replace").strip()
    if first_line_is_log(body):
        return f"{where} is a log saved by Stream.save, not an SSE body: read it with nito_nb.load(path)."
    if path.suffix.lower() == ".csv" or first.startswith(("stream,", ",stream,")):
        return (
            f"{where} is a CSV file, not a recorded stream: nito_nb reads SSE bodies ('data: {{...}}' "
            "lines) and saved logs (.jsonl). A frame saved with to_csv is read back with "
            "nito_nb.frame(pandas.read_csv(path))."
        )
    return (
        f"{where} holds no server-sent event (it starts {first[:60]!r}): nito_nb reads recorded SSE "
        "bodies ('data: {...}' lines separated by blank lines) and logs saved by Stream.save (.jsonl, "
        "read with nito_nb.load)."
    )


def first_line_is_log(head: bytes) -> bool:
    try:
        header = json.loads(head.lstrip().split(b"\n", 1)[0])
    except ValueError:
        return False
    return isinstance(header, dict) and "nito_nb_log" in header


def looks_like_error_body(body: bytes) -> bool:
    """A JSON object with an "error" key and no SSE field in sight: an HTTP error body."""
    text = body.lstrip()
    if not text.startswith(b"{"):
        return False
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and "error" in value
