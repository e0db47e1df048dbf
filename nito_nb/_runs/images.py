"""A run's ``images=``: the column of a DataFrame whose cells are the images of their row (a path or
an http(s) URL, a list of them, or nothing), read, checked and hashed before anything is sent.

Every row is checked before the first request goes: a missing file or a file of the wrong type in
row 9,000 would otherwise end as an error row after 8,999 answers were paid for. The rule of one
image is ``_client/attachments.py``'s (type from the bytes, the size limit, ``detail``); what the
plan keeps of each is a :class:`~nito_nb._core.attachments.PlannedImage` (where it is, and the
descriptor of the bytes its request's key hashes), never the data.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from .._client.attachments import plan_images, read_images
from .._core.attachments import DEFAULT_MAX_IMAGE_SIZE, Attachment, PlannedImage
from .._core.errors import ConfigurationError

__all__ = ["read_again", "row_images"]


def row_images(
    prompts: Any, column: Any, detail: Any, max_size: Any
) -> list[tuple[PlannedImage, ...]]:
    """The planned images of each row of the DataFrame ``prompts`` (in its order), from ``column``.
    Raises ConfigurationError, one line naming the first row that cannot be sent and its file, and
    how many others cannot."""
    import pandas as pd

    if not isinstance(prompts, pd.DataFrame):
        raise ConfigurationError(
            f"images= names a column of the DataFrame of prompts (images='path'); the prompts are "
            f"a {type(prompts).__name__}: make them a DataFrame with a column of paths or URLs."
        )
    if not isinstance(column, str) or column not in prompts.columns:
        have = ", ".join(map(str, prompts.columns)) or "no columns"
        raise ConfigurationError(
            f"images= names a column of paths or URLs: {column!r:.60} is not one (the DataFrame "
            f"has {have})."
        )
    rows: list[tuple[PlannedImage, ...]] = []
    bad: list[tuple[Any, str]] = []
    for label, cell in zip(prompts.index, prompts[column].tolist(), strict=True):
        try:
            rows.append(tuple(plan_images(_items(cell), detail, max_size)))
        except ConfigurationError as exc:
            rows.append(())
            bad.append((label, str(exc)))
    if bad:
        label, why = bad[0]
        more = ""
        if len(bad) > 1:
            others = ", ".join(repr(b[0]) for b in bad[1:6]) + (", ..." if len(bad) > 6 else "")
            more = f" ({len(bad) - 1} other row(s) cannot be sent either: {others})"
        raise ConfigurationError(
            f"images={column!r}, row {label!r}: {why.rstrip('.')}{more}; nothing was sent."
        )
    return rows


def _items(cell: Any) -> list[Any]:
    """A cell's images: one, a list (or an array) of them, or none (empty, None, NA, "")."""
    import pandas as pd

    if isinstance(cell, (str, os.PathLike)):
        return [cell] if str(cell).strip() else []
    if isinstance(cell, (list, tuple)) or hasattr(cell, "tolist"):
        items = cell.tolist() if hasattr(cell, "tolist") else list(cell)
        if not isinstance(items, list):  # a numpy scalar
            items = [items]
        return [item for item in items if not _missing(item, pd)]
    if _missing(cell, pd):
        return []
    return [cell]  # refused by plan_images, with what it is


def _missing(value: Any, pd: Any) -> bool:
    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))


async def read_again(images: Sequence[PlannedImage]) -> list[Attachment]:
    """A request's planned images, read again as it is sent (and checked against the bytes its key
    was made from), in a thread: the loop's thread reads the streams' bytes and takes their
    arrival times, which reading, hashing and encoding megabytes there would delay. Raises
    ConfigurationError (one line) for one that changed or went."""
    return await asyncio.to_thread(read_images, list(images), "auto", DEFAULT_MAX_IMAGE_SIZE)
