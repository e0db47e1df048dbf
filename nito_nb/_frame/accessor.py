"""``df.nito``: the accessor of a frame made by ``nito_nb.frame`` (tables and plots).

Importing this module registers it. The metrics' definitions are those of ``nito_nb._core.metrics``
(docs/METRICS.md): this module only gathers their inputs per stream from the columns.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._core import metrics
from .._core.answer_parts import parse_arguments
from .._core.errors import ConfigurationError
from .._core.fields import METRICS
from .._core.status import STATUSES
from .dtypes import _READABLE, _TEXT, _ints, _missing_columns, _not_ours

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["NitoAccessor"]


@pd.api.extensions.register_dataframe_accessor("nito")
class NitoAccessor:
    """``df.nito``: metrics, tool calls, usage, text and plots of a frame made by ``nito_nb.frame``.

    It holds nothing but the frame and computes everything from its columns on each call, so it
    also works after filtering rows (``df[df.stream == "a"].nito.metrics()``) and after a Parquet or
    CSV round trip. On a frame that is not one of ours, ``df.nito`` raises AttributeError naming the
    missing columns.
    """

    def __init__(self, df: pd.DataFrame) -> None:
        missing = _missing_columns(df)
        if missing:
            raise AttributeError(_not_ours(missing))
        self._df = df

    # -- shared views --------------------------------------------------------------------------

    def _streams(self, *, warn: bool = True) -> tuple[np.ndarray, pd.Index]:
        """Integer stream codes per row and the labels they index: the streams that have rows
        (``warn``: of streams that share a label; off for ``_arrays``, whose callers ask too)."""
        column = self._df["stream"]
        if isinstance(column.dtype, pd.CategoricalDtype):
            # A filtered frame (df[df.stream == "a"]) keeps every category of the whole one: each
            # table would get a row of NaN per stream filtered out, each plot an empty series.
            column = column.cat.remove_unused_categories()
            codes, labels = (
                column.cat.codes.to_numpy(),
                pd.Index(column.cat.categories, name="stream"),
            )
        else:
            found, unique = pd.factorize(column)
            codes, labels = found, pd.Index(unique, name="stream")
        if warn:
            _warn_shared_labels(self._df, codes, labels)
        return codes, labels

    def _first_choice(self) -> np.ndarray:
        """Rows of choice 0, the answer (n > 1: the other choices' rows are left out of every
        table but ``metrics(by_choice=True)``); a frame saved before the column had no others."""
        if "choice" not in self._df.columns:
            return np.ones(len(self._df), dtype=bool)
        return self._df["choice"].to_numpy(dtype=np.int64, na_value=0) == 0

    def _arrays(self) -> dict[str, np.ndarray]:
        df = self._df
        codes, _ = self._streams(warn=False)
        kind = df["kind"].astype(object).to_numpy()
        part = df["part"].to_numpy()
        return {
            "code": codes,
            "t": df["t"].to_numpy(dtype=np.float64, na_value=np.nan),
            "event": (kind != "response") & (part == 0),
            "kind": kind,
            "token": df["token"].to_numpy(dtype=bool) & (part == 0) & self._first_choice(),
            "ignored": df["ignored"].to_numpy(dtype=bool),
        }

    # -- tables --------------------------------------------------------------------------------

    def metrics(self, *, by_choice: bool = False) -> pd.DataFrame:
        """One row per stream (index: ``stream``), the definitions of docs/METRICS.md (one
        function each in ``nito_nb._core.metrics``): ``model``, ``status``, ``connect`` (from
        ``df.attrs["nito"]``: NaN once the attrs are gone), ``ttfb``, ``ttft``,
        ``ttfc``, ``e2e``, ``itl``, ``itl_p50``, ``itl_p90``, ``itl_p99``, ``itl_max``, ``tpot``
        (seconds), ``output_tps`` (tokens/s), ``output_chunks_per_s``, ``n_events``,
        ``n_chunks``, ``n_token_chunks`` (K), ``n_output_tokens`` (N), ``finish_reason``,
        ``error``, ``http_status``, ``attempts``. Each column holds one unit: the per-token ones
        (``tpot``, ``output_tps``, ``n_output_tokens``) are NA for a stream without usage.

        The figures of the answer are choice 0's (n > 1). ``by_choice=True``: one row per
        (``stream``, ``choice``), each choice's figures from its own chunks (and the stream's
        response, comments and ``[DONE]``); the per-token ones are NA for a stream of several
        choices, whose usage counts them all."""
        if by_choice:
            return self._metrics_by_choice()
        df = self._df
        a = self._arrays()
        _, labels = self._streams()
        n_streams = len(labels)
        code, t, event, token, ignored, kind = (
            a["code"],
            a["t"],
            a["event"],
            a["token"],
            a["ignored"],
            a["kind"],
        )
        valid = code >= 0
        event &= valid
        token &= valid

        def per_stream(fill: Any = np.nan, dtype: Any = np.float64) -> np.ndarray:
            return np.full(n_streams, fill, dtype=dtype)

        # fmin/fmax skip NaN times (a recording read without arrival times has only those).
        def minimum(mask: np.ndarray) -> np.ndarray:
            out = per_stream(np.inf)
            np.fmin.at(out, code[mask], t[mask])
            out[np.isinf(out)] = np.nan
            return out

        def maximum(mask: np.ndarray) -> np.ndarray:
            out = per_stream(-np.inf)
            np.fmax.at(out, code[mask], t[mask])
            out[np.isinf(out)] = np.nan
            return out

        def last_of(mask: np.ndarray, column: str) -> list[Any]:
            """The column's value on the last row of each stream where ``mask`` holds."""
            rows = np.flatnonzero(mask)
            out: list[Any] = [None] * n_streams
            values = df[column].to_numpy(dtype=object, na_value=None)
            for row in rows:  # later rows overwrite earlier ones
                out[code[row]] = values[row]
            return out

        response = (kind == "response") & valid
        ttfb = per_stream()
        ttfb[code[response]] = t[response]
        content = df["content"].to_numpy(dtype=object, na_value="")
        first_choice = self._first_choice()
        has_content = (content != "") & ~ignored & event & first_choice
        ttft = minimum(token)
        last_token = maximum(token)
        k = np.bincount(code[token], minlength=n_streams)

        # Token gaps: consecutive token-bearing events of the same stream, in arrival order.
        rows = np.flatnonzero(token)
        rows = rows[np.lexsort((t[rows], code[rows]))]
        same = code[rows][1:] == code[rows][:-1]
        gaps = np.diff(t[rows])[same]
        gap_codes = code[rows][1:][same]
        # Each stream's gaps, then docs/METRICS.md's definitions (nito_nb._core.metrics), once each.
        bounds = np.searchsorted(gap_codes, np.arange(n_streams + 1))
        per_stream_gaps = [gaps[bounds[i] : bounds[i + 1]].tolist() for i in range(n_streams)]
        quantiles = {
            q: _floats(metrics.quantile(g, q) for g in per_stream_gaps)
            for q in (0.5, 0.9, 0.99, 1.0)
        }

        usage_rows = df["usage"].notna().to_numpy() & ~ignored & valid
        ns = [
            metrics.n_output_tokens(None if c is None else {"completion_tokens": c})
            for c in last_of(usage_rows, "completion_tokens")
        ]
        e2e = maximum(event)
        first, last, ks, e2es = ttft.tolist(), last_token.tolist(), k.tolist(), e2e.tolist()
        of_streams = [
            metrics.of_stream(first[i], last[i], ks[i], ns[i], e2es[i]) for i in range(n_streams)
        ]
        derived = {name: _floats(row[name] for row in of_streams) for name in _OF_STREAM}

        # connect is on the response row, so that it survives CSV (which drops df.attrs); a frame
        # made before that column has it only in each stream's attrs. Attrs that are not ours (a
        # hand-set df.attrs["nito"]) only leave connect unknown (NaN): nothing else depends on them.
        connect = per_stream()
        if "connect" in df.columns:  # a frame read back without nito_nb.frame(df) may lack it
            connect[:] = [np.nan if v is None else v for v in last_of(response, "connect")]
        described = df.attrs.get("nito")
        described = described if isinstance(described, dict) else {}
        for i, label in enumerate(labels):
            of_stream = described.get(label)
            connect_ns = of_stream.get("connect_ns") if isinstance(of_stream, dict) else None
            if connect[i] != connect[i] and isinstance(connect_ns, (int, float)):
                connect[i] = metrics.connect(connect_ns)
        chunk_rows = event & (kind == "chunk") & ~ignored
        taken = event & ~ignored
        out = pd.DataFrame(
            {
                "model": last_of(response, "model"),
                "status": pd.Categorical(
                    last_of(response, "status"), categories=[s.value for s in STATUSES]
                ),
                "connect": connect,
                "ttfb": ttfb,
                "ttft": ttft,
                "ttfc": minimum(has_content),
                "e2e": e2e,
                "itl_p50": quantiles[0.5],
                "itl_p90": quantiles[0.9],
                "itl_p99": quantiles[0.99],
                "itl_max": quantiles[1.0],
                **derived,
                "n_events": np.bincount(code[event], minlength=n_streams),
                "n_chunks": np.bincount(code[chunk_rows], minlength=n_streams),
                "n_token_chunks": k,
                "n_output_tokens": _ints(
                    [None if n is None else int(n) for n in ns], "completion_tokens"
                ),
                "finish_reason": pd.array(
                    last_of(
                        taken & first_choice & df["finish_reason"].notna().to_numpy(),
                        "finish_reason",
                    ),
                    dtype=_TEXT,
                ),
                "error": pd.array(
                    last_of(taken & df["error_message"].notna().to_numpy(), "error_message"),
                    dtype=_TEXT,
                ),
                "http_status": _ints(last_of(response, "http_status"), "http_status"),
                "attempts": _ints(last_of(response, "attempts"), "attempts"),
            },
            index=labels,
        )
        # In the order of the declared metrics (_core/fields.py), between the response row's.
        return out[
            [*_FIRST, *(m.name for m in METRICS if m.frame and m.name in out.columns), *_LAST]
        ]

    def _metrics_by_choice(self) -> pd.DataFrame:
        """``metrics(by_choice=True)``: the table of each choice's frame (its chunk rows, as choice
        0's, and the rows of the stream that belong to no choice), one row per choice that came."""
        df = self._df
        codes, labels = self._streams()
        choice = (
            df["choice"].to_numpy(dtype=np.int64, na_value=0)
            if "choice" in df.columns
            else np.zeros(len(df), dtype=np.int64)
        )
        chunk = (df["kind"] == "chunk").to_numpy(dtype=bool)
        came = {
            (int(c), int(k)) for c, k in zip(codes[chunk], choice[chunk], strict=True) if c >= 0
        }
        came |= {(code, 0) for code in range(len(labels))}
        several = {code for code, k in came if k}  # streams of more than one choice
        tables = []
        for k in sorted({k for _, k in came}):
            sub = df[(choice == k) | ~chunk]
            # The first row of each chunk in this choice is its event (part 0).
            sub = sub.assign(
                choice=0, part=sub.groupby(["stream", "seq"], observed=True, sort=False).cumcount()
            )
            table = NitoAccessor(sub).metrics()
            table.insert(0, "choice", k)
            tables.append(table)
        out = pd.concat(tables)
        position = {label: i for i, label in enumerate(labels)}
        out["_order"] = [position[label] for label in out.index]
        keep = [
            (position[label], k) in came for label, k in zip(out.index, out["choice"], strict=True)
        ]
        out = out[keep].sort_values(["_order", "choice"], kind="stable").drop(columns="_order")
        # A stream's usage counts every choice's tokens: no choice's per-token figure comes of it.
        many = np.array([position[label] in several for label in out.index], dtype=bool)
        for name in ("tpot", "output_tps", "n_output_tokens"):
            out.loc[many, name] = np.nan if out[name].dtype == np.float64 else pd.NA
        out.index.name = "stream"
        return out.set_index("choice", append=True)

    def tool_calls(self) -> pd.DataFrame:
        """One row per assembled tool call, in stream then index order: ``stream``, ``index``,
        ``id``, ``name``, ``type``, ``arguments`` (the concatenated string), ``valid_json``, ``parsed``
        (the arguments as JSON, None when invalid; empty arguments are ``{}``; a ``custom`` call's
        input is free text: ``parsed`` is the text, ``valid_json`` True, as ``ToolCall`` has them),
        ``t_first``, ``t_last``
        (arrival of its first and last fragment), ``n_fragments``. Chunks after ``[DONE]`` are
        left out, as the accumulator leaves them out."""
        df = self._df
        codes, labels = self._streams()
        mask = (
            df["tool_index"].notna().to_numpy()
            & ~df["ignored"].to_numpy(dtype=bool)
            & (codes >= 0)
            & self._first_choice()
        )
        rows = np.flatnonzero(mask)
        index = df["tool_index"]
        if index.dtype != "Int64":  # exact ints past 64 bits, or a hand edit's digit strings
            index = pd.Series(_ints(index.tolist(), "tool_index"), index=index.index)
        index = index.to_numpy(dtype=object, na_value=None)
        ids = df["tool_id"].to_numpy(dtype=object, na_value=None)
        names = df["tool_name"].to_numpy(dtype=object, na_value=None)
        # A frame saved before the column existed reads without it (_frame/dtypes.py _ADDED_LATER).
        types = (
            df["tool_type"].to_numpy(dtype=object, na_value=None)
            if "tool_type" in df.columns
            else np.full(len(df), None, dtype=object)
        )
        args = df["tool_args"].to_numpy(dtype=object, na_value=None)
        t = df["t"].to_numpy(dtype=np.float64, na_value=np.nan)
        calls: dict[tuple[int, int], dict[str, Any]] = {}
        for row in rows:
            key = (int(codes[row]), int(index[row]))
            call = calls.get(key)
            if call is None:
                call = calls[key] = {
                    "id": None,
                    "name": "",
                    "type": None,
                    "parts": [],
                    "t_first": t[row],
                    "n": 0,
                }
            call["n"] += 1
            call["t_last"] = t[row]
            if call["id"] is None and ids[row]:
                call["id"] = ids[row]
            if not call["name"] and names[row]:
                call["name"] = names[row]
            if call["type"] is None and types[row]:
                call["type"] = types[row]
            if args[row]:
                call["parts"].append(args[row])
        records = []
        for (code, number), call in sorted(calls.items()):
            arguments = "".join(call["parts"])
            # The accumulator's rule (ToolCall.custom): a custom tool's input is not JSON.
            parsed, error = (
                (arguments, None) if call["type"] == "custom" else parse_arguments(arguments)
            )
            records.append(
                {
                    "stream": labels[code],
                    "index": number,
                    "id": call["id"],
                    "name": call["name"],
                    "type": call["type"],
                    "arguments": arguments,
                    "valid_json": error is None,
                    "parsed": parsed,
                    "t_first": call["t_first"],
                    "t_last": call["t_last"],
                    "n_fragments": call["n"],
                }
            )
        columns = [
            "stream",
            "index",
            "id",
            "name",
            "type",
            "arguments",
            "valid_json",
            "parsed",
            "t_first",
            "t_last",
            "n_fragments",
        ]
        out = pd.DataFrame.from_records(records, columns=columns)
        out["stream"] = pd.Categorical(out["stream"], categories=labels)
        for name in ("id", "name", "type", "arguments"):
            out[name] = pd.array(out[name].tolist(), dtype=_TEXT)
        # Int64, or exact ints past 64 bits
        out["index"] = _ints(out["index"].tolist(), "tool_index")
        if out["index"].dtype == "Int64":
            out["index"] = out["index"].astype("int64")
        out["n_fragments"] = out["n_fragments"].astype("int64")
        out["valid_json"] = out["valid_json"].astype(bool)
        out["t_first"] = out["t_first"].astype("float64")
        out["t_last"] = out["t_last"].astype("float64")
        return out

    def tokens(self) -> pd.DataFrame:
        """One row per token whose logprobs came (``logprobs=True``), in stream then arrival order:
        ``stream``, ``position`` (the token's place in its channel of the stream, from 0),
        ``channel`` (``content``, or ``refusal`` for a refusal's tokens), ``token``, ``logprob``,
        ``probability`` (``exp(logprob)``), ``seq`` and ``t`` (the chunk it came in and its arrival),
        ``top_logprobs`` (a list of ``{"token", "logprob"}``, most likely first). Read from the
        ``extras`` column (the chunks' ``choice.logprobs``); chunks after ``[DONE]`` are left out."""
        import json

        from .._core.logprobs import logprobs_of, probability

        df = self._df
        codes, labels = self._streams()
        extras = df["extras"].to_numpy(dtype=object, na_value=None)
        seqs = df["seq"].to_numpy()
        t = df["t"].to_numpy(dtype=np.float64, na_value=np.nan)
        ignored = df["ignored"].to_numpy(dtype=bool)
        records: list[dict[str, Any]] = []
        positions: dict[tuple[int, str], int] = {}
        for row in np.flatnonzero(
            ~ignored & (codes >= 0) & self._first_choice() & df["extras"].notna().to_numpy()
        ):
            text = extras[row]
            if "choice.logprobs" not in text:  # most rows: not worth decoding
                continue
            try:
                value = json.loads(text).get("choice.logprobs")
            except (ValueError, AttributeError):
                continue
            found = logprobs_of({"choices": [{"index": 0, "logprobs": value}]})
            for channel, entries in found.items():
                for entry in entries:
                    key = (int(codes[row]), channel)
                    position = positions.get(key, 0)
                    positions[key] = position + 1
                    logprob = entry.get("logprob")
                    top = entry.get("top_logprobs")
                    records.append(
                        {
                            "stream": labels[codes[row]],
                            "position": position,
                            "channel": channel,
                            "token": entry["token"],
                            "logprob": None
                            if probability(logprob) is None
                            else float(logprob or 0.0),
                            "probability": probability(logprob),
                            "seq": int(seqs[row]),
                            "t": t[row],
                            "top_logprobs": [
                                {"token": alt.get("token"), "logprob": alt.get("logprob")}
                                for alt in (top if isinstance(top, list) else [])
                                if isinstance(alt, dict)
                            ],
                        }
                    )
        columns = [
            "stream",
            "position",
            "channel",
            "token",
            "logprob",
            "probability",
            "seq",
            "t",
            "top_logprobs",
        ]
        out = pd.DataFrame.from_records(records, columns=columns)
        out["stream"] = pd.Categorical(out["stream"], categories=labels)
        out["channel"] = pd.Categorical(out["channel"], categories=["content", "refusal"])
        out["token"] = pd.array(out["token"].tolist(), dtype=_TEXT)
        for name in ("position", "seq"):
            out[name] = out[name].astype("int64")
        for name in ("logprob", "probability", "t"):
            out[name] = out[name].astype("float64")
        out = out.sort_values(["stream", "channel", "position"], kind="stable").reset_index(
            drop=True
        )
        return out

    def usage(self) -> pd.DataFrame:
        """One row per stream (index ``stream``): ``prompt_tokens``, ``completion_tokens``,
        ``total_tokens``, ``reasoning_tokens``, ``cached_tokens``, ``cost``, from the stream's last
        usage object (docs/PROTOCOL.md rule 6); NA when the stream reported none."""
        df = self._df
        codes, labels = self._streams()
        mask = df["usage"].notna().to_numpy() & ~df["ignored"].to_numpy(dtype=bool) & (codes >= 0)
        last = np.full(len(labels), -1, dtype=np.int64)
        rows = np.flatnonzero(mask)
        last[codes[rows]] = rows  # fancy assignment: the last write of each stream wins
        names = [
            "prompt_tokens",
            "completion_tokens",
            "total_tokens",
            "reasoning_tokens",
            "cached_tokens",
            "cost",
        ]
        picked = df.iloc[np.where(last >= 0, last, 0)][names].reset_index(drop=True)
        picked.loc[last < 0, names] = pd.NA if len(picked) else None
        try:
            picked["cost"] = picked["cost"].astype("float64")  # a digit string of a hand edit too
        except (TypeError, ValueError):
            raise ConfigurationError(
                f"the 'cost' column holds {picked['cost'].tolist()!r}, where a frame made by nito_nb.frame "
                "has numbers (USD): fix those values (or build the frame again with nito_nb.frame)"
            ) from None
        picked.index = labels
        return picked

    def text(self) -> pd.Series:
        """The answer's content per stream (index ``stream``): the join of ``content`` over the rows
        the accumulator took, equal to ``Stream.content``."""
        codes, labels = self._streams()
        df = self._df
        content = df["content"].to_numpy(dtype=object, na_value=None)
        ignored = df["ignored"].to_numpy(dtype=bool)
        pieces: list[list[str]] = [[] for _ in labels]
        for row in np.flatnonzero(
            ~ignored & (codes >= 0) & self._first_choice() & df["content"].notna().to_numpy()
        ):
            pieces[codes[row]].append(content[row])
        return pd.Series(["".join(p) for p in pieces], index=labels, name="content", dtype=_TEXT)

    def reasoning(self) -> pd.Series:
        """The readable reasoning per stream (index ``stream``), equal to ``Stream.reasoning``: the
        text and summary details in index order (blocks joined by a blank line), else the plain
        reasoning strings."""
        codes, labels = self._streams()
        df = self._df
        text = df["reasoning"].to_numpy(dtype=object, na_value=None)
        types = df["reasoning_type"].astype(object).to_numpy()
        index = df["reasoning_index"].to_numpy(dtype=object, na_value=None)
        ignored = df["ignored"].to_numpy(dtype=bool)
        blocks: list[dict[tuple[Any, str], list[str]]] = [{} for _ in labels]
        plain: list[list[str]] = [[] for _ in labels]
        for row in np.flatnonzero(
            ~ignored & (codes >= 0) & self._first_choice() & df["reasoning"].notna().to_numpy()
        ):
            type_ = types[row]
            if type_ in _READABLE:
                blocks[codes[row]].setdefault((index[row] or 0, type_), []).append(text[row])
            else:
                plain[codes[row]].append(text[row])
        out = []
        for stream_blocks, stream_plain in zip(blocks, plain, strict=True):
            readable = [(key[0], "".join(parts)) for key, parts in stream_blocks.items()]
            readable = [(i, s) for i, s in readable if s]
            if readable:
                out.append("\n\n".join(s for _, s in sorted(readable, key=lambda item: item[0])))
            else:
                out.append("".join(stream_plain))
        return pd.Series(out, index=labels, name="reasoning", dtype=_TEXT)

    # -- plots ---------------------------------------------------------------------------------

    def plot_timeline(self, *, max_legend: int = 16) -> Figure:
        """When each event arrived and what it was: x = seconds since the request was sent, y =
        characters of answer text received so far (content, reasoning and tool arguments), one
        colour per stream. Markers: ``o`` content, ``.`` reasoning, ``s`` tool-call arguments (one
        per token-bearing event, classed by its first kind of text in that order), ``x`` comments,
        ``|`` [DONE], ``X`` error chunks, ``^`` the response headers. Each series is a Line2D
        labelled ``"{stream} {what}"``. The legend names each stream by its colour (up to
        ``max_legend`` streams; past that the colours are left unnamed) and each kind of event
        shown by its marker. Returns a ``matplotlib.figure.Figure`` (no pyplot state)."""
        from .plots import plot_timeline

        return plot_timeline(self, max_legend=max_legend)

    def plot_gaps(self, *, bins: int = 40) -> Figure:
        """Histogram of the gaps between consecutive token-bearing chunks (the gaps behind ``itl``
        and ``itl_p50``...), in milliseconds, one bar series per stream (a BarContainer labelled
        with the stream). Returns a ``matplotlib.figure.Figure``."""
        from .plots import plot_gaps

        return plot_gaps(self, bins=bins)

    def plot_confidence(self, *, low: float = 0.5) -> Figure:
        """The probability of each answer token along the answer (``tokens()``, ``logprobs=True``),
        one line per stream; the tokens below ``low`` marked (red crosses), their spans shaded.
        Returns a ``matplotlib.figure.Figure``."""
        from .plots import plot_confidence

        return plot_confidence(self, low=low)


def _warn_shared_labels(df: pd.DataFrame, codes: np.ndarray, labels: pd.Index) -> None:
    """Warn when streams share a label: ``pd.concat([a.frame(), b.frame()])`` labels both
    ``sim/chat#0``, and every table would fold them into one stream (chunks counted twice, texts
    joined). The label is a stream's only identity in the rows; each stream has exactly one
    ``response`` row, so two of them under one label are two streams. They are not told apart
    here: that would lean on the rows' order, which sorting or filtering changes; relabelling is
    one line for the user. Python's warning registry shows it once per message."""
    response = (df["kind"] == "response").to_numpy(dtype=bool) & (codes >= 0)
    counts = np.bincount(codes[response], minlength=len(labels))
    shared = [str(labels[i]) for i in np.flatnonzero(counts > 1)]
    if shared:
        shown = ", ".join(repr(label) for label in shared[:3]) + (" ..." if len(shared) > 3 else "")
        warnings.warn(
            f"nito_nb: several streams share the label {shown} in this frame (one response row "
            "each): df.nito reads them as one stream. Label them apart: one frame of them all "
            "(nito_nb.frame([s1, s2]) or nito_nb.frame({'a': s1, 'b': s2})), or rename a frame's "
            "labels before pd.concat (df['stream'] = df['stream'].cat.rename_categories({'old': 'new'}))",
            stacklevel=4,
        )


#: The columns of ``metrics()`` around the metrics: what the response row and the chunks said.
_FIRST = ("model", "status")
_LAST = ("finish_reason", "error", "http_status", "attempts")
#: The metrics ``metrics.of_stream`` computes (its names, whatever the stream).
_OF_STREAM = tuple(metrics.of_stream(None, None, 0, None, None))


def _floats(values: Any) -> np.ndarray:
    """Metric values (None: undefined) as a float array with NaN."""
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
