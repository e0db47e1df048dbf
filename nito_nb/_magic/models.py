"""``%nito models``: the models a cell can use, as a DataFrame whose descriptions show whole.

pandas cuts a cell's text at ``display.max_colwidth`` (50 characters), which left the simulator's
descriptions (up to 180) and the gateway's names mid-sentence, with no way to read them but
``pd.set_option``. The table stays a DataFrame (``models = %nito models`` then
``models["id"]``); only how it shows changes: in a notebook every cell whole (the browser wraps
it), in a terminal the description wrapped under its own column.
"""

from __future__ import annotations

import functools
import textwrap
from typing import Any

from .._core.printable import printable

__all__ = ["DESCRIPTION_WIDTH", "models_table"]

#: Characters of a description per line in the text view.
DESCRIPTION_WIDTH = 60


def models_table(rows: list[dict[str, Any]]) -> Any:
    """The ``id``, ``source`` and ``description`` rows as a DataFrame that shows descriptions whole."""
    return _table_type()(rows, columns=["id", "source", "description"])


@functools.cache
def _table_type() -> type:
    # Made on first use: pandas is imported only when a table is asked for.
    import pandas as pd

    class ModelTable(pd.DataFrame):
        """A DataFrame of models; its views show each description whole."""

        @property
        def _constructor(self) -> type:
            return pd.DataFrame  # a slice or a computed frame is a plain one

        def _repr_html_(self) -> str | None:
            with pd.option_context("display.max_colwidth", None):
                html = pd.DataFrame(self).to_html(escape=True)
            # Left-aligned, wrapped text: a long description reads as a paragraph, not one line.
            return (
                '<div class="nito-models"><style>.nito-models td{text-align:left;white-space:normal;'
                "vertical-align:top}</style>" + html + "</div>"
            )

        def __repr__(self) -> str:
            return _text(self)

    return ModelTable


def _text(frame: Any) -> str:
    """A plain table: ``id`` and ``source`` padded, the description wrapped in its own column."""
    # A gateway's ids and descriptions are its words: printable, as every line nito_nb prints.
    ids = [printable(str(v)) for v in frame["id"]]
    sources = [printable(str(v)) for v in frame["source"]]
    id_width = max([len("id"), *map(len, ids)])
    source_width = max([len("source"), *map(len, sources)])
    indent = " " * (id_width + source_width + 4)
    lines = [f"{'id':<{id_width}}  {'source':<{source_width}}  description"]
    for id_, source, description in zip(ids, sources, frame["description"], strict=True):
        wrapped = textwrap.wrap(printable(str(description or "")), DESCRIPTION_WIDTH) or [""]
        lines.append(f"{id_:<{id_width}}  {source:<{source_width}}  {wrapped[0]}".rstrip())
        lines.extend(indent + more for more in wrapped[1:])
    return "\n".join(lines)
