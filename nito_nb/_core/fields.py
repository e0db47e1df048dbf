"""What a stream carries and what is measured of it, declared once: one :class:`Field` per thing
a chunk (or the log) can hold, one :class:`Metric` per figure of docs/METRICS.md.

Everything that lists them is derived from these tables at import time, never per chunk: the
delta keys the chunk reader reads (``chunk.py`` ``DELTA_KEYS``), the frame's columns and dtypes
(``_frame/dtypes.py`` ``COLUMNS``), what a renderer copies of a duck-typed state
(``_display/snapshots.py`` ``FIELDS``), the metrics and result columns of a run and of its store
(``_runs/results.py``), its summary's columns, the magic's comparison table
(``_magic/history.py``) and the sweep view's columns (``_runs/sweep_view.py``).
``tests/test_fields.py`` checks ``StreamSnapshot``'s attributes, ``df.nito.metrics()``'s columns
and the column tables of docs/METRICS.md and docs/RUNS.md against them.

Adding a delta field: a :class:`Field` here (its delta key, snapshot attribute, columns, part),
its reading in ``chunk.py`` (and folding in ``accumulate.py``), its part in ``_render/parts.py``.
Adding a metric: a :class:`Metric` here, its formula in ``metrics.py`` (and, for the frame, its
column in ``_frame/accessor.py``).

Dtypes are pandas' names, as text (this layer imports no pandas): ``string`` is the frame's
nullable text dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "COMPARISON",
    "DELTA_KEYS",
    "FIELDS",
    "FRAME_COLUMNS",
    "FROM_READING",
    "LOAD_QUANTILES",
    "METRICS",
    "RENDERED",
    "RESULT_ANSWER",
    "RESULT_METRICS",
    "SLO",
    "SNAPSHOT",
    "SUMMARY_MEANS",
    "SUMMARY_QUANTILES",
    "SWEEP",
    "Field",
    "Metric",
]

Columns = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Field:
    """One thing a stream carries, and every place a user sees it.

    ``read``: where it comes from (``delta.<key>``, ``choice.<key>``, ``chunk.<key>``, ``log``:
    the event itself, ``response``: the response row, ``state``: the stream's own count or
    status). ``delta``: the delta keys the chunk reader reads for it (any other delta key is a
    vendor field, kept in the frame's ``extras``). ``snapshot``: its ``StreamSnapshot``
    attributes. ``columns``: its frame columns and their dtypes, in the frame's order.
    ``result``: its columns in a run's results and the store's ``requests`` table. ``render``:
    the rendered part that shows it (``status``: the status line), None when no view shows it.
    ``reading``: for a field of one frame column, the attribute of ``chunk.Reading`` that holds
    the chunk's value (None when absent), put in that column as it is, or as JSON (``json``):
    the frame builder needs no edit of its own for it.
    """

    name: str
    read: str
    delta: tuple[str, ...] = ()
    snapshot: tuple[str, ...] = ()
    columns: Columns = ()
    result: Columns = ()
    render: str | None = None
    reading: str | None = None
    json: bool = False


@dataclass(frozen=True, slots=True)
class Metric:
    """One figure of docs/METRICS.md (its formula: ``metrics.py``).

    ``dtype``: its column's. ``snapshot``: the ``StreamSnapshot`` attribute that holds it while
    the stream runs (None: not there). ``frame``: a column of ``df.nito.metrics()``.
    ``result``: a column of a run's results (the same name). ``sweep``: the quantiles of it a
    sweep's view shows. ``slo``: a run's ``slo=`` may bound it. ``render``: the rendered part
    that shows it. Which the summaries and the comparison table show, in their order: below
    (``SUMMARY_QUANTILES``, ``SUMMARY_MEANS``, ``LOAD_QUANTILES``, ``COMPARISON``).
    """

    name: str
    dtype: str = "float64"
    snapshot: str | None = None
    frame: bool = True
    result: bool = False
    sweep: tuple[str, ...] = ()
    slo: bool = False
    render: str | None = None


_S = "string"
_QUANTILES = ("p50", "p90", "p99")

#: Everything a stream carries, in the frame's column order.
FIELDS: tuple[Field, ...] = (
    Field("stream", "log", columns=(("stream", "category"),)),
    Field("seq", "log", columns=(("seq", "int64"),)),
    Field("part", "log", columns=(("part", "int64"),)),
    # The choice a row belongs to (n > 1); every row of an n = 1 stream is choice 0's.
    Field("choice", "choice.index", columns=(("choice", "Int64"),)),
    Field("t", "log", columns=(("t", "float64"),)),
    Field("gap", "log", columns=(("gap", "float64"),)),
    Field("kind", "log", columns=(("kind", "category"),)),
    Field("bytes", "log", columns=(("bytes", "Int64"),)),
    Field("token", "log", columns=(("token", "bool"),)),
    Field("ignored", "log", columns=(("ignored", "bool"),)),
    Field("id", "chunk.id", snapshot=("id",), columns=(("id", _S),)),
    Field(
        "model",
        "chunk.model",
        snapshot=("model",),
        columns=(("model", "category"),),
        render="status",
    ),
    Field(
        "role", "delta.role", delta=("role",), snapshot=("role",), columns=(("role", "category"),)
    ),
    Field(
        "content",
        "delta.content",
        delta=("content",),
        snapshot=("content",),
        columns=(("content", _S),),
        result=(("content", _S),),
        render="answer",
    ),
    Field(
        "refusal",
        "delta.refusal",
        delta=("refusal",),
        snapshot=("refusal",),
        columns=(("refusal", _S),),
        render="refusal",
        reading="refusal",
    ),
    Field(
        "reasoning",
        "delta.reasoning_details",
        delta=("reasoning_details", "reasoning", "reasoning_content"),
        snapshot=("reasoning",),
        columns=(("reasoning", _S), ("reasoning_type", "category"), ("reasoning_index", "Int64")),
        result=(("reasoning", _S),),
        render="reasoning",
    ),
    Field(
        "tool_calls",
        "delta.tool_calls",
        delta=("tool_calls", "function_call"),
        snapshot=("tool_calls",),
        columns=(
            ("tool_index", "Int64"),
            ("tool_id", _S),
            ("tool_name", _S),
            ("tool_type", _S),
            ("tool_args", _S),
        ),
        result=(("n_tool_calls", "Int64"),),
        render="tool",
    ),
    Field(
        "finish_reason",
        "choice.finish_reason",
        snapshot=("finish_reason",),
        columns=(("finish_reason", "category"),),
        result=(("finish_reason", _S),),
        render="status",
    ),
    Field(
        "usage",
        "chunk.usage",
        snapshot=("usage",),
        columns=(
            ("prompt_tokens", "Int64"),
            ("completion_tokens", "Int64"),
            ("total_tokens", "Int64"),
            ("reasoning_tokens", "Int64"),
            ("cached_tokens", "Int64"),
            ("cost", "float64"),
            ("usage", _S),
        ),
        result=(("prompt_tokens", "Int64"), ("completion_tokens", "Int64"), ("cost", "float64")),
        render="status",
    ),
    Field(
        "error",
        "chunk.error",
        snapshot=("error",),
        columns=(("error_code", _S), ("error_message", _S)),
        render="error",
    ),
    Field("comment", "log", columns=(("comment", _S),)),
    Field(
        "web_search", "chunk.web_search", snapshot=("web_search",), columns=(("web_search", _S),)
    ),
    Field(
        "free_tier",
        "chunk.free_tier",
        snapshot=("free_tier",),
        columns=(("free_tier", _S),),
        render="status",
    ),
    Field("extras", "chunk", columns=(("extras", _S),)),
    Field(
        "status",
        "state",
        snapshot=("status", "done"),
        columns=(("status", "category"),),
        render="status",
    ),
    Field("http_status", "response", columns=(("http_status", "Int64"),)),
    Field("attempts", "response", columns=(("attempts", "Int64"),)),
    # On the response row too, not only in df.attrs (which CSV loses): the connect metric's reading.
    Field("connect", "response", columns=(("connect", "float64"),)),
    # OpenAI's audio output: its transcript is the text the audio speaks; the rest (id,
    # expires_at, the size of its base64 data, never the data) is the frame's ``audio`` column.
    Field(
        "audio",
        "delta.audio",
        delta=("audio",),
        snapshot=("audio_transcript",),
        columns=(("audio", _S),),
        render="audio",
        reading="audio",
        json=True,
    ),
    # What the state counts and knows besides what the chunks say.
    Field("anomalies", "state", snapshot=("anomalies",), render="anomalies"),
    Field("timed", "log", snapshot=("timed",)),
    Field("exception", "state", snapshot=("exception",)),
)

#: Every figure of docs/METRICS.md, in ``df.nito.metrics()``'s column order.
METRICS: tuple[Metric, ...] = (
    Metric("connect", snapshot="connect", result=True),
    Metric("ttfb", snapshot="ttfb", result=True),
    Metric("ttft", snapshot="ttft", result=True, sweep=("p50", "p99"), slo=True, render="status"),
    Metric("ttfc"),
    Metric("e2e", snapshot="last_event", result=True, sweep=("p99",), slo=True),
    Metric("itl", result=True, sweep=("p50", "p99"), slo=True),
    Metric("itl_p50"),
    Metric("itl_p90"),
    Metric("itl_p99"),
    Metric("itl_max"),
    Metric("tpot", result=True, slo=True),
    Metric("output_tps", result=True, render="status"),
    Metric("output_chunks_per_s", result=True, render="status"),
    Metric("n_events", "Int64"),
    Metric("n_chunks", "Int64", snapshot="n_chunks", render="status"),
    Metric("n_token_chunks", "Int64", snapshot="n_token_chunks", result=True, render="status"),
    Metric("n_output_tokens", "Int64", result=True),
    # Times a snapshot holds for the metrics above (docs/METRICS.md): not columns of their own.
    Metric("last_token", snapshot="last_token", frame=False),
    Metric("elapsed", snapshot="elapsed", frame=False, render="status"),
)

# -- derived ------------------------------------------------------------------------------------

#: The delta keys the chunk reader reads (any other is a vendor field).
DELTA_KEYS: frozenset[str] = frozenset(key for f in FIELDS for key in f.delta)
#: The frame columns filled from one ``Reading`` attribute each: (attribute, column, as JSON).
FROM_READING: tuple[tuple[str, str, bool], ...] = tuple(
    (f.reading, f.columns[0][0], f.json) for f in FIELDS if f.reading is not None
)
#: The frame's columns and their dtypes, in order.
FRAME_COLUMNS: dict[str, str] = {name: dtype for f in FIELDS for name, dtype in f.columns}
#: Every ``StreamSnapshot`` attribute.
SNAPSHOT: frozenset[str] = frozenset(
    [a for f in FIELDS for a in f.snapshot] + [m.snapshot for m in METRICS if m.snapshot]
)
#: What a renderer reads of a state (the attributes of the fields and metrics a view shows).
RENDERED: tuple[str, ...] = tuple(
    [a for f in FIELDS if f.render for a in f.snapshot]
    + [m.snapshot for m in METRICS if m.render and m.snapshot]
)
#: A run result's columns of the answer, then of the metrics (the same names as the metrics).
RESULT_ANSWER: dict[str, str] = {name: dtype for f in FIELDS for name, dtype in f.result}
RESULT_METRICS: dict[str, str] = {m.name: m.dtype for m in METRICS if m.result}
#: A run summary's quantile columns (``ttft_p50``...) and means (``output_tps_mean``...), in its
#: column order (docs/RUNS.md).
SUMMARY_QUANTILES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ttft", _QUANTILES),
    ("itl", _QUANTILES),
    ("e2e", _QUANTILES),
)
SUMMARY_MEANS: tuple[str, ...] = ("output_tps", "output_chunks_per_s")
#: The quantiles an open-loop run's summary adds (docs/LOAD.md): of metrics, and of the columns
#: of the schedule that a load run's results have (``send_delay``, ``*_from_schedule``).
LOAD_QUANTILES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tpot", _QUANTILES),
    ("send_delay", _QUANTILES),
    ("ttft_from_schedule", _QUANTILES),
    ("e2e_from_schedule", _QUANTILES),
    ("connect", _QUANTILES),
)
#: The metrics of the magic's comparison table and ``%nito history``, in order.
COMPARISON: tuple[str, ...] = (
    "ttft",
    "e2e",
    "output_tps",
    "output_chunks_per_s",
    "n_output_tokens",
    "n_token_chunks",
    "itl_max",
)
#: The metrics a run's ``slo=`` may bound.
SLO: tuple[str, ...] = tuple(m.name for m in METRICS if m.slo)
#: The summary columns a sweep's view shows of the metrics.
SWEEP: tuple[str, ...] = tuple(
    f"{name}_{a}"
    for name, _ in SUMMARY_QUANTILES
    for m in METRICS
    if m.name == name
    for a in m.sweep
)
