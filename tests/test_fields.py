"""The one declaration of fields and metrics (``nito_nb/_core/fields.py``) against everything
that lists them: ``StreamSnapshot``, what the renderers read, ``df.nito.metrics()``, a run's
results, and the column tables of docs/METRICS.md and docs/RUNS.md."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import nito_nb
from nito_nb._core import fields
from nito_nb._core.state import StreamSnapshot
from nito_nb._display.snapshots import FIELDS as RENDERER_FIELDS
from nito_nb._frame.dtypes import COLUMNS
from nito_nb._runs.results import RESULT_COLUMNS, RESULTS_ADDED

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: The columns of ``df.nito.metrics()`` that are not metrics: what the response row and the last
#: chunks said of the stream.
METRICS_TABLE_OTHERS = ("model", "status", "finish_reason", "error", "http_status", "attempts")


def _table(path: Path, header: str) -> list[tuple[list[str], str]]:
    """The rows of the markdown table of ``path`` whose header starts with ``header``: the names
    in backticks of each row's first cell, and its second cell."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        rows.append((re.findall(r"`([^`]+)`", cells[0]), cells[1] if len(cells) > 1 else ""))
    return rows


def _names(rows: list[tuple[list[str], str]]) -> list[str]:
    return [name for names, _ in rows for name in names]


def test_the_snapshot_has_exactly_the_declared_attributes() -> None:
    declared = {f.name for f in dataclasses.fields(StreamSnapshot)}
    assert declared == set(fields.SNAPSHOT), (
        f"StreamSnapshot and _core/fields.py disagree: only in the snapshot {sorted(declared - fields.SNAPSHOT)}, "
        f"only declared {sorted(fields.SNAPSHOT - declared)}"
    )


def _read_by_renderers() -> set[str]:
    """Every attribute of ``state`` the renderers read (``getattr(state, "x"...)``,
    ``optional(state, "x"...)``, ``state.x``)."""
    read = set()
    for path in (ROOT / "nito_nb" / "_render").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "optional")
                and len(node.args) >= 2
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id == "state"
                and isinstance(node.args[1], ast.Constant)
            ):
                read.add(node.args[1].value)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "state"
            ):
                read.add(node.attr)
    return read


def test_a_renderer_is_given_every_attribute_it_reads() -> None:
    # The copy of a duck-typed state (_display/snapshots.py) lacked audio_transcript and
    # n_token_chunks, which the renderers read: such a state's audio answer and speed did not show.
    given = set(RENDERER_FIELDS) | {"tool_calls", "anomalies"}
    missing = _read_by_renderers() - given
    assert not missing, (
        f"the renderers read {sorted(missing)}: declare their render part in _core/fields.py"
    )
    assert set(RENDERER_FIELDS) <= set(fields.SNAPSHOT)


def test_the_metrics_table_has_the_declared_metrics() -> None:
    s = nito_nb.read_sse(
        "data: "
        + '{"choices": [{"index": 0, "delta": {"content": "hi"}}]}'
        + "\n\ndata: [DONE]\n\n"
    )
    columns = list(s.frame().nito.metrics().columns)
    assert [c for c in columns if c not in METRICS_TABLE_OTHERS] == [
        m.name for m in fields.METRICS if m.frame
    ]


def test_the_delta_keys_are_the_declared_ones() -> None:
    from nito_nb._core.chunk import DELTA_KEYS

    assert DELTA_KEYS == {key for f in fields.FIELDS for key in f.delta}


def test_metrics_md_lists_exactly_the_frame_columns_and_their_dtypes() -> None:
    rows = _table(DOCS / "METRICS.md", "| column | dtype |")
    assert _names(rows) == list(COLUMNS), (
        "docs/METRICS.md's frame table and _core/fields.py disagree"
    )
    for names, dtypes in rows:
        listed = [d.strip() for d in dtypes.split(",")]
        listed = listed * len(names) if len(listed) == 1 else listed
        assert listed == [COLUMNS[name] for name in names], (
            f"docs/METRICS.md gives {names} the dtypes {dtypes}"
        )


def test_metrics_md_lists_exactly_the_metrics() -> None:
    listed = set(_names(_table(DOCS / "METRICS.md", "| metric | definition |")))
    declared = {m.name for m in fields.METRICS if m.frame} | set(METRICS_TABLE_OTHERS)
    assert listed == declared, (
        f"docs/METRICS.md's metrics table: missing {sorted(declared - listed)}, not declared "
        f"{sorted(listed - declared)}"
    )


def test_runs_md_lists_exactly_the_result_columns() -> None:
    listed = _names(_table(DOCS / "RUNS.md", "| column | meaning |"))
    assert listed == list(RESULT_COLUMNS), (
        "docs/RUNS.md's results table and RESULT_COLUMNS disagree"
    )
    added = _names(_table(DOCS / "RUNS.md", "| added by `run.results()` |"))
    assert added == list(RESULTS_ADDED), (
        "docs/RUNS.md's table of what run.results() adds and RESULTS_ADDED disagree"
    )


def test_the_summaries_and_the_comparison_name_declared_metrics() -> None:
    declared = {m.name for m in fields.METRICS}
    named = (
        [name for name, _ in fields.SUMMARY_QUANTILES]
        + list(fields.SUMMARY_MEANS)
        + list(fields.COMPARISON)
    )
    assert set(named) <= declared
    assert {name for name, _ in fields.LOAD_QUANTILES} <= declared | set(RESULT_COLUMNS)
