"""``%%nito`` and ``%nito``: thin glue from a notebook cell to a live, kept Stream.

    %load_ext nito_nb
    %%nito -m z-ai/glm-5.2 --system "Be brief" --temperature 0.2
    Summarise {df.shape} rows of {topic} in three bullets.

The cell's text, interpolated (``_interpolate.py``), is sent with ``nito_nb.stream`` and iterated
here, in the cell's thread: the kernel's interrupt arrives as KeyboardInterrupt during iteration,
the engine closes the connection and keeps what arrived. The live display (``_display.py``) is
updated after each chunk (it throttles itself) and finished in a ``finally:``, so the final state
always reaches the notebook before the cell goes idle (which is what nbclient saves).

Several models (``-m a,b,c``) stream concurrently on an asyncio loop in a worker thread, which only
iterates the streams; this thread renders them side by side at the display's rate (ipykernel 7
sends output from other threads to the latest cell, see docs/JUPYTER.md).

Configuration is the ``Nito`` configurable (``%config Nito.model = "..."``, ``ipython_config.py``,
``NITO_MODEL``); the API key only ever comes from ``NITO_API_KEY`` and is never shown.
"""

from __future__ import annotations

import asyncio
import html
import inspect
import json
import math
import os
import re
import sys
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.process import arg_split
from traitlets import Bool, CFloat, CInt, Dict, TraitError, Unicode, default, validate
from traitlets.config import Configurable

from .._client import check_request
from .._core.errors import ConfigurationError, MissingAPIKeyError, NitoError
from .._interpolate import interpolate
from .._last import last as _kept
from .._last import remember as _remember_last
from ..tools import run_tool, tool_functions, tools_from

__all__ = ["Nito", "NitoMagics", "last", "load_ipython_extension"]

REASONING_EFFORTS = ("low", "medium", "high")
#: While several models stream side by side, each column shows about this many characters of the
#: answer's end (finished blocks are dropped from the front): each refresh re-sends the whole grid,
#: so the window keeps traffic proportional to time, not to the square of the answers.
GRID_WINDOW_CHARS = 2000
#: ... and the grid is refreshed at most this often: each refresh carries every column.
GRID_MAX_RATE = 10.0
#: --run-tools: at most this many rounds of (tool calls, results) before the answer is left as is.
MAX_TOOL_ROUNDS = 5
#: A recorded SSE file has no arrival times: it is replayed at a steady pace, at most this long.
SSE_REPLAY_SECONDS = 5.0

def last() -> Any:
    """The last Stream ``%%nito`` ran (a list of Streams after ``-m a,b``), or the last Run, or
    None (``_last.py`` keeps it)."""
    return _kept()


class Nito(Configurable):
    """Defaults of the ``%%nito`` magic: ``%config Nito.model = "z-ai/glm-5.2"``, or
    ``c.Nito.model = ...`` in ``ipython_config.py``. The API key is not a setting: it comes from
    the ``NITO_API_KEY`` environment variable only, so no configuration display can show it."""

    model = Unicode(help="Model(s) when -m is not given; comma-separated for several (env NITO_MODEL).").tag(config=True)
    system = Unicode(None, allow_none=True, help="System prompt when --system is not given.").tag(config=True)
    temperature = CFloat(None, allow_none=True, help="Sampling temperature when --temperature is not given.").tag(config=True)
    max_tokens = CInt(None, allow_none=True, help="Answer length limit when --max-tokens is not given.").tag(config=True)
    reasoning = Unicode(None, allow_none=True, help="Reasoning effort (low, medium, high) when --reasoning is not given.").tag(config=True)
    history = CInt(20, help="Turns (a prompt and its answer) kept per --chat; older ones are dropped. 0: no limit.").tag(config=True)
    format = Unicode("markdown", help="How the answer is shown: markdown, text, code or code:LANG.").tag(config=True)
    max_rate = CFloat(20.0, help="Most display updates per second while streaming.").tag(config=True)
    base_url = Unicode(None, allow_none=True, help="Gateway URL (else NITO_BASE_URL, else Nito's). sim/ models then go there too.").tag(config=True)
    timeout = CFloat(None, allow_none=True, help="Seconds for connect, first byte and between chunks (default: the engine's).").tag(config=True)
    interpolate = Bool(True, help="Fill {name} / {expr.attr} / {In[3]} in prompts from the namespace.").tag(config=True)
    params = Dict(help="Extra request body fields sent with every prompt, e.g. {'seed': 1}.").tag(config=True)

    @default("model")
    def _default_model(self) -> str:
        return os.environ.get("NITO_MODEL", "").strip() or "sim/chat"

    # Every setting with a domain is checked on assignment: a TraitError makes traitlets keep the
    # old value (it rolls back what it was loading), and %config prints its message on one line.

    @validate("model")
    def _check_model(self, proposal: Any) -> str:
        value = proposal["value"]
        names = [name.strip() for name in value.split(",")]
        if not all(names) or any(len(name.split()) != 1 for name in names):
            raise _refused("model", "a model id, or several separated by commas (no spaces inside an id)", value)
        return ",".join(names)

    @validate("format")
    def _check_format(self, proposal: Any) -> str:
        try:
            return _format_or_raise(proposal["value"], ValueError)
        except ValueError as exc:
            raise TraitError(f"Nito.{exc}: the setting is unchanged.") from None

    @validate("reasoning")
    def _check_reasoning(self, proposal: Any) -> str | None:
        value = proposal["value"]
        if value not in (None, "", *REASONING_EFFORTS):
            raise _refused("reasoning", f"one of {', '.join(REASONING_EFFORTS)} (or None)", value)
        return value or None

    @validate("temperature", "max_tokens")
    def _check_body_field(self, proposal: Any) -> Any:
        name, value = proposal["trait"].name, proposal["value"]
        if value is not None:
            _check_params(name, {name: value})
        return value

    @validate("params")
    def _check_params(self, proposal: Any) -> dict[str, Any]:
        _check_params("params", proposal["value"])
        return proposal["value"]

    @validate("history")
    def _check_history(self, proposal: Any) -> int:
        if proposal["value"] < 0:
            raise _refused("history", "a number of turns, 0 or more (0: no limit)", proposal["value"])
        return proposal["value"]

    @validate("max_rate")
    def _check_rate(self, proposal: Any) -> float:
        value = proposal["value"]
        if not (math.isfinite(value) and value > 0):
            raise _refused("max_rate", "a positive number of updates per second", value)
        return float(value)

    @validate("timeout")
    def _check_timeout(self, proposal: Any) -> float | None:
        value = proposal["value"]
        if value is not None and not (math.isfinite(value) and value > 0):
            raise _refused("timeout", "a positive number of seconds (or None for the engine's)", value)
        return value

    @validate("base_url")
    def _check_base_url(self, proposal: Any) -> str | None:
        value = proposal["value"]
        if not value:
            return None
        parts = urllib.parse.urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise _refused("base_url", "an http:// or https:// URL (or None)", value)
        return value.strip()


def _refused(name: str, domain: str, value: Any) -> TraitError:
    return TraitError(f"Nito.{name} must be {domain}, not {value!r}: the setting is unchanged.")


def _check_params(name: str, params: dict[str, Any]) -> None:
    """A setting that ends in the request body: the client's own check of a request."""
    from .._client import check_request

    try:
        check_request([], params)
    except ConfigurationError as exc:
        raise TraitError(f"Nito.{name}: {exc.message} The setting is unchanged.") from None


def _format_or_raise(value: str, error: type[Exception]) -> str:
    from .._render import _check_format

    try:
        _check_format(value)
    except ValueError as exc:
        raise error(str(exc)) from None
    return value


# -- small helpers -------------------------------------------------------------------------------


def _param_value(key: str, text: str) -> Any:
    """``--param KEY=VALUE``: VALUE as JSON; a bare word is a string, but something that starts
    like JSON (an object, a list, a quoted string) and does not parse is a mistake, not a string."""
    try:
        return json.loads(text)
    except ValueError as exc:
        if text.lstrip()[:1] in ("{", "[", '"'):
            raise UsageError(
                f"--param {key}: the value is not valid JSON ({exc}): {text[:80]!r}. "
                "Quote the whole value, e.g. --param sim='{\"tps\": 20}'"
            ) from None
        return text  # a bare word: a string


def _parse(magic: Any, line: str) -> Any:
    """``parse_argstring`` with shell quoting: IPython splits magic lines non-POSIX, which keeps the
    quotes in ``--system "Be brief"`` and cuts ``--param sim='{"tps": 5}'`` at its space."""
    return magic.parser.parse_args(arg_split(line, posix=True))


def _slug(model: str) -> str:
    return re.sub(r"[^\w.-]+", "-", model).strip("-") or "model"


#: How the magic's user sets the key (the engine's message names api_key=..., which a cell lacks).
NO_KEY = (
    "No API key: set the NITO_API_KEY environment variable before starting Jupyter, or in the "
    "notebook without writing the key in it: import os, getpass; "
    "os.environ['NITO_API_KEY'] = getpass.getpass(). Models named sim/... need no key."
)
ERROR_LINE_CHARS = 500


def _error_line(error: BaseException) -> None:
    """One short line on stderr instead of a traceback (the display already shows the banner).

    The whole message, hint included (an APIError's ``str`` ends with what to do, its ``.message``
    is only the gateway's words); a long one loses its middle, never its end.
    """
    text = " ".join(str(error).split())
    if len(text) > ERROR_LINE_CHARS:
        text = f"{text[: ERROR_LINE_CHARS - 200]} … {text[-199:]}"
    print(f"nito: {type(error).__name__}: {text}", file=sys.stderr)


def _usage_error(error: ConfigurationError) -> UsageError:
    """A request refused before it was sent (a user's mistake): one line, in the magic's terms."""
    return UsageError(NO_KEY if isinstance(error, MissingAPIKeyError) else error.message)


def _start(display: Any) -> None:
    """Show the live view now and keep it fresh during stalls (its refresh thread), in a kernel."""
    start = getattr(display, "start", None)
    if start is not None:
        start()


def _in_kernel() -> bool:
    from ..display.live import in_kernel

    return in_kernel()


#: The columns of the comparison table shown after ``-m a,b,c`` (``%nito history`` has them all).
COMPARISON_COLUMNS = (
    "model", "status", "ttft", "e2e", "output_tps", "n_tokens", "tokens_source", "gap_max",
    "finish_reason", "error",
)


def metrics_table(streams: Sequence[Any]) -> Any:
    """One row per Stream: the pandas adapter's metrics (``nito_nb.frame(...).nito.metrics()``)."""
    import pandas as pd

    if not streams:
        return pd.DataFrame(columns=list(COMPARISON_COLUMNS))
    try:
        from .._frame import frame

        return frame(list(streams)).nito.metrics()
    except Exception:  # the table is secondary to the answers: never lose the cell over it
        return _simple_metrics(streams)


def _simple_metrics(streams: Sequence[Any]) -> Any:
    """The same figures from Stream attributes alone (when the adapter cannot build a frame)."""
    import pandas as pd

    rows = []
    for s in streams:
        snap = s.snapshot()  # docs/METRICS.md's figures, from their one definition (_core/metrics)
        count, source = snap.n_tokens
        error = snap.error.get("message") if isinstance(snap.error, dict) else snap.error
        rows.append({
            "model": snap.model,
            "status": snap.status,
            "ttft": snap.ttft,
            "e2e": snap.elapsed,
            "output_tps": snap.output_tps,
            "n_tokens": count,
            "tokens_source": source,
            "n_chunks": snap.n_chunks,
            "finish_reason": snap.finish_reason,
            "error": error,
        })
    return pd.DataFrame(rows)


#: ``%nito history``: a prompt is shown up to this many characters.
HISTORY_PROMPT_CHARS = 80


def _cost(stream: Any) -> float | None:
    usage = stream.usage if isinstance(stream.usage, dict) else {}
    cost = usage.get("cost")
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def _prompt(stream: Any) -> str:
    """The last user message of the request, on one line, shortened."""
    text = ""
    for message in reversed(stream.request.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # content parts: their text
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            text = " ".join(str(content or "").split())
            break
    return text if len(text) <= HISTORY_PROMPT_CHARS else text[: HISTORY_PROMPT_CHARS - 1] + "…"


def history_table(streams: Sequence[Any]) -> Any:
    """``%nito history``: one row per Stream of the session, oldest first: when it was sent, the
    prompt, the metrics, its cost and the running cost of the session so far."""
    import pandas as pd

    table = metrics_table(streams)
    costs = pd.Series([_cost(s) for s in streams], index=table.index, dtype="float64")
    front = {
        # The kernel's local clock, to the second: what the user compares with their own.
        "time": pd.Series(
            [pd.Timestamp(s.t0_wall.astimezone()).tz_localize(None).floor("s") for s in streams],
            index=table.index, dtype="datetime64[ns]",
        ),
        "prompt": pd.Series([_prompt(s) for s in streams], index=table.index, dtype=object),
        "model": table.pop("model"),
        "status": table.pop("status"),
        "cost": costs,
        "cost_total": costs.fillna(0).cumsum(),  # what the session has spent so far
    }
    for position, (name, column) in enumerate(front.items()):
        table.insert(position, name, column)
    return table


def cost_line(streams: Sequence[Any]) -> str:
    """``%nito cost``: the session's running total, and how many streams reported no cost."""
    costs = [_cost(s) for s in streams]
    known = [c for c in costs if c is not None]
    line = f"nito: ${sum(known):.6f} over {len(streams)} stream(s) in this session".replace(".000000", "")
    if len(known) < len(streams):
        line += f" ({len(streams) - len(known)} reported no cost)"
    return line


def comparison_table(streams: Sequence[Any]) -> Any:
    """The metrics that matter when comparing models, one row per model, plus cost when sent."""
    table = metrics_table(streams)
    columns = [c for c in COMPARISON_COLUMNS if c in table.columns]
    table = table[columns].copy()
    costs = [s.usage.get("cost") if isinstance(s.usage, dict) else None for s in streams]
    if any(cost is not None for cost in costs):
        table["cost"] = costs
    return table.reset_index(drop=True)


class _Grid:
    """Several streams side by side in one output (an HTML grid), refreshed by this thread."""

    def __init__(self, streams: Sequence[Any], models: Sequence[str], format: str) -> None:
        from .._render import RenderCache

        self.streams, self.models, self.format = list(streams), list(models), format
        self.caches = [RenderCache() for _ in self.streams]
        self.handle: Any = None
        self._sent: dict[str, str] | None = None
        self.n_messages = 0

    def _column(self, index: int, live: bool) -> tuple[str, str]:
        from .._render import final_bundle, render_parts
        from ..display import snapshot

        state = self.streams[index]
        if not live or state.finished:
            bundle = final_bundle(state, format=self.format)
            return bundle["text/html"], bundle["text/plain"]
        parts = render_parts(snapshot(state), format=self.format, live=True, cache=self.caches[index])
        answers = [p for p in parts if p.key.startswith("answer-")]
        kept: list[Any] = []
        size = 0
        for part in reversed(answers):
            if kept and size + len(part.text) > GRID_WINDOW_CHARS:
                break
            kept.append(part)
            size += len(part.text)
        hidden = sum(len(p.text) for p in answers) - size
        kept_keys = {p.key for p in kept}
        shown = []
        for part in parts:
            if part.key.startswith("answer-"):
                if part.key == answers[0].key and hidden:
                    note = f"… {hidden:,} earlier characters (all shown when the stream ends)"
                    shown.append((f"<div><em>{html.escape(note)}</em></div>", note))
                if part.key not in kept_keys:
                    continue
            shown.append((part.html, part.text))
        return "".join(h for h, _ in shown), "\n\n".join(t for _, t in shown if t)

    def bundle(self, live: bool) -> dict[str, str]:
        columns = [self._column(i, live) for i in range(len(self.streams))]
        cells = "".join(
            f'<div style="min-width: 0;"><div><strong>{html.escape(model)}</strong></div>{body}</div>'
            for model, (body, _) in zip(self.models, columns, strict=True)
        )
        grid = (
            '<div class="nito-grid" style="display: grid; gap: 12px; '
            f'grid-template-columns: repeat({len(columns)}, minmax(0, 1fr));">{cells}</div>'
        )
        text = "\n\n".join(f"== {model} ==\n{body}" for model, (_, body) in zip(self.models, columns, strict=True))
        return {"text/html": grid, "text/plain": text}

    def refresh(self, live: bool = True) -> None:
        from IPython.display import display

        bundle = self.bundle(live)
        if bundle == self._sent:  # a stall: nothing new to send
            return
        self._sent = bundle
        if self.handle is None:
            self.handle = display(bundle, raw=True, display_id=True)
        else:
            self.handle.update(bundle, raw=True)
        self.n_messages += 1


# -- the magics ------------------------------------------------------------------------------------


@magics_class
class NitoMagics(Magics):
    """``%%nito`` (a prompt, streamed live) and ``%nito help|config|models|history|cost|last|reset``."""

    def __init__(self, shell: Any, settings: Nito) -> None:
        super().__init__(shell)
        self.settings = settings
        #: chat name -> turns; a turn is the messages of one cell (prompt, answer, tool results)
        self.chats: dict[str, list[list[dict[str, Any]]]] = {}
        #: every Stream the magic ran in this session, oldest first
        self.streams: list[Any] = []
        self._sync_client: Any = None

    @magic_arguments()
    @argument("-m", "--model", help="model id, or several comma-separated (streamed side by side)")
    @argument("--system", help="system prompt")
    @argument("--temperature", type=float)
    @argument("--max-tokens", type=int)
    @argument("--reasoning", choices=REASONING_EFFORTS, help="reasoning effort")
    @argument("--tools", metavar="NAMES",
              help="comma-separated names of functions or JSON tool schemas in the namespace; "
                   "the model's tool calls are shown, not run (see --run-tools)")
    @argument("--run-tools", action="store_true",
              help="run the model's calls of --tools functions and send the results back, "
                   f"up to {MAX_TOOL_ROUNDS} rounds (only with this flag: tools never run otherwise)")
    @argument("--json", action="store_true", help='ask for a JSON object (response_format)')
    @argument("--param", action="append", default=[], metavar="KEY=VALUE",
              help="extra body field, VALUE as JSON (e.g. --param seed=1 --param sim='{\"tps\":5}')")
    @argument("-o", "--out", metavar="VAR", help="also store the Stream in this variable")
    @argument("--over", metavar="VAR",
              help="run the cell as a template over every row of the DataFrame, Series or list VAR "
                   "(nito_nb.run: a progress panel, the Run in _nito / -o VAR)")
    @argument("--chat", metavar="NAME",
              help="keep the conversation under NAME across cells (without it, each cell stands alone)")
    @argument("--new", action="store_true", help="start the --chat conversation afresh")
    @argument("--no-interpolate", action="store_true", help="send {braces} as written")
    @argument("--save", metavar="PATH", help="save the chunk log (JSON Lines) to PATH")
    @argument("--replay", metavar="PATH", help="show a saved .jsonl log or a recorded .sse body as if live")
    @argument("--speed", type=float, default=1.0, help="replay speed factor (0: at once)")
    @argument("--raise", dest="raise_", action="store_true",
              help="re-raise errors after the display (for headless runs that must fail)")
    @argument("-f", "--format", help="markdown (default), text, code or code:LANG")
    @line_cell_magic
    def nito(self, line: str, cell: str | None = None) -> Any:
        """Stream a chat completion live: ``%%nito [options]`` then the prompt in the cell.

        The prompt's ``{name}``, ``{expr.attr}``, ``{In[3]}``, ``{Out[3]}`` are filled from the
        namespace (unknown names and code braces stay as written; ``{{``/``}}`` are literal
        braces). The Stream is kept in ``_nito`` (and ``nito_nb.last()``, and ``-o VAR``); the cell
        returns nothing, so the answer is shown once. With ``-m a,b,c`` the models stream at the
        same time, side by side, then a metrics table compares them; ``_nito`` is then the list of
        their Streams. Without ``--chat`` each cell stands alone; with it, the last
        ``Nito.history`` turns are sent again. The stop button ends the stream: what arrived stays,
        marked stopped. Errors show under the answer with a one-line message (``--raise`` raises).

        Line magic: ``%nito help | config | models | history | cost | last | reset``, and
        ``%nito --replay PATH [--speed X]``.
        Defaults: ``%config Nito.model = "..."`` (see ``%config Nito``); key: ``NITO_API_KEY``.
        """
        kept = len(self.streams)
        try:
            if cell is None:
                return self._line(line)
            args = _parse(self.nito, line)
            self._cell(args, cell)
            return None
        except KeyboardInterrupt as interrupt:
            # The stop button: the cell still ends as interrupted (Run All stops there), but shown
            # as one line, not the frames of the socket read it landed in. IPython prints what an
            # exception's _render_traceback_ returns instead of its traceback.
            where = (
                "what arrived is kept in _nito, marked stopped"
                if len(self.streams) > kept
                else "nothing was kept"
            )
            line_ = f"KeyboardInterrupt: nito stopped; {where}."
            interrupt._render_traceback_ = lambda: [line_]  # type: ignore[attr-defined]
            raise

    @property
    def namespace(self) -> dict[str, Any]:
        """The user's namespace (prompts are interpolated from it, results stored in it)."""
        assert self.shell is not None, "the magics are registered on a shell"
        return self.shell.user_ns

    # -- line magic ------------------------------------------------------------------------------

    def _line(self, line: str) -> Any:
        command = line.strip().partition(" ")[0]
        if command in ("", "help", "-h", "--help"):
            print(self._help())
            return None
        if command == "config":
            print(self._config_text())
            return None
        if command == "models":
            return self._models()
        if command == "history":
            return history_table(self._history())
        if command == "cost":
            print(cost_line(self._history()))
            return None
        if command == "last":
            kept = _kept()
            if kept is None:
                print("nito: no stream yet: run a %%nito cell first")
                return None
            from IPython.display import display

            for stream in kept if isinstance(kept, list) else [kept]:
                display(stream)
            return None
        if command.startswith("-"):  # `%nito --replay PATH`: options and no prompt
            args = _parse(self.nito, line)
            if not args.replay:
                raise UsageError("%nito with options only replays (--replay PATH); a prompt goes in a "
                                 "%%nito cell, below the options")
            self._cell(args, "")
            return None
        if command == "reset":
            self._reset()
            print("nito: chats, history and the last stream cleared")
            return None
        raise UsageError(
            f"%nito {command}: unknown command. Use %nito help | config | models | history | cost | "
            "last | reset, or %%nito as a cell magic with the prompt in the cell."
        )

    def _help(self) -> str:
        # magic_arguments opens the docstring with a reST literal block ("::") of argparse's usage
        # under the line magic's name (%nito); the options are listed below it anyway, so the help
        # drops that block, and the reST double backquotes.
        usage = inspect.cleandoc(self.nito.__doc__ or "")
        usage = re.sub(r"\A::\n\n\s*%nito .*?\n\n", "", usage, flags=re.DOTALL).replace("``", "")
        return (
            "%%nito [options]  -- then the prompt in the cell\n\n" + usage + "\n\n"
            "Tool calls are shown (name and arguments, live); they are never executed unless you add\n"
            "--run-tools (then the --tools functions run and their results go back to the model).\n"
            "Examples:\n"
            "  %%nito -m sim/chat\n  Explain SSE in two lines.\n\n"
            "  %%nito -m sim/chat,sim/reasoning --temperature 0.2\n  Same prompt, two models.\n"
        )

    def _config_text(self) -> str:
        settings = self.settings
        lines = ["Nito configuration (%config Nito.<name> = value):"]
        for name in sorted(settings.trait_names(config=True)):
            lines.append(f"  Nito.{name} = {getattr(settings, name)!r}")
        base_url = settings.base_url or os.environ.get("NITO_BASE_URL") or _default_base_url()
        sim = "go there too" if settings.base_url else "run on the embedded simulator"
        lines.append(f"  effective base URL: {base_url} (sim/... models {sim})")
        lines.append(f"  API key (NITO_API_KEY): {'set' if os.environ.get('NITO_API_KEY') else 'unset'}")
        return "\n".join(lines)

    def _models(self) -> Any:
        import pandas as pd

        from .._client import Client
        from ..sim import SIM_MODELS

        rows: list[dict[str, Any]] = [
            {"id": name, "source": "simulator", "description": text} for name, text in SIM_MODELS.items()
        ]
        if os.environ.get("NITO_API_KEY") or self.settings.base_url:
            try:
                with Client(base_url=self.settings.base_url or None) as client:
                    for model in client.models():
                        rows.append({
                            "id": model.get("id"),
                            "source": "gateway",
                            "description": model.get("name") or model.get("description") or "",
                        })
            except Exception as exc:  # any failure of the GET: one clear line, the sim list stays
                _error_line(exc)
        return pd.DataFrame(rows)

    def _history(self) -> list[Any]:
        """This session's streams, with those captured or watched in this kernel by the time they
        were sent (docs/CAPTURE.md); without any, the magic's in the order it kept them."""
        from .._capture import streams

        captured = streams()
        if not captured:
            return list(self.streams)
        return sorted([*self.streams, *captured], key=lambda s: s.t0_wall)

    def _reset(self) -> None:
        from .._capture import REGISTRY

        self.chats.clear()
        self.streams.clear()
        REGISTRY.clear()
        _remember_last(None)
        self.namespace.pop("_nito", None)

    # -- cell magic ------------------------------------------------------------------------------

    def _cell(self, args: Any, cell: str) -> None:
        settings = self.settings
        fmt = _format_or_raise(args.format or settings.format, UsageError)
        if args.out is not None and not args.out.isidentifier():
            raise UsageError(f"-o/--out needs a variable name, not {args.out!r}")
        if args.new and not args.chat:
            raise UsageError("--new starts a chat afresh: use it with --chat NAME")
        if args.replay:
            self._replay(args, fmt)
            return
        models = [m.strip() for m in (args.model or settings.model).split(",") if m.strip()]
        if not models:
            raise UsageError("no model: give -m MODEL or set %config Nito.model = '...'")
        if args.over:
            self._run_over(args, cell, models)
            return
        if args.chat and len(models) > 1:
            raise UsageError("--chat keeps one conversation: use it with one model")
        if args.run_tools and (len(models) > 1 or not args.tools):
            raise UsageError("--run-tools runs the --tools functions of one model: give --tools and one -m")
        prompt = cell.strip("\n")
        if settings.interpolate and not args.no_interpolate:
            try:  # its one refusal: a {group} that would put the key (NITO_API_KEY) in the prompt
                prompt = interpolate(prompt, self.namespace, secrets=[os.environ.get("NITO_API_KEY")])
            except NitoError as exc:
                raise UsageError(exc.message) from None
        if not prompt.strip():
            raise UsageError("the cell is empty: write the prompt below the %%nito line")
        params = self._params(args)
        user = {"role": "user", "content": prompt}
        messages: list[dict[str, Any]] = []
        system = args.system if args.system is not None else settings.system
        if system:
            messages.append({"role": "system", "content": system})
        if args.chat:
            if args.new:
                self.chats[args.chat] = []
            for turn in self.chats.get(args.chat, []):
                messages.extend(turn)
        messages.append(user)
        try:
            check_request(messages, params)  # the client's own check, before anything is sent
        except ConfigurationError as exc:
            raise _usage_error(exc) from None
        if len(models) == 1:
            self._run_one(messages, models[0], params, args, fmt, user)
        else:
            self._run_many(messages, models, params, args, fmt)

    def _run_over(self, args: Any, cell: str, models: list[str]) -> None:
        """``--over VAR``: the cell is a template filled from each row of VAR (``nito_nb.run``)."""
        from ..runs import run as start_run

        if args.chat or args.run_tools:
            raise UsageError("--over runs every row on its own: not with --chat or --run-tools")
        if args.over not in self.namespace:
            raise UsageError(f"--over {args.over}: no such variable in the namespace")
        template = cell.strip("\n")
        if not template.strip():
            raise UsageError("the cell is empty: write the template below the %%nito line, e.g. Summarise: {text}")
        system = args.system if args.system is not None else self.settings.system
        try:
            run = start_run(self.namespace[args.over], template=template, model=models, system=system or None,
                              **self._connection(), **self._params(args))
        except NitoError as exc:  # a missing column, no key...: one line, nothing was sent
            raise UsageError(f"--over {args.over}: {exc}") from None
        self.namespace["_nito"] = run
        _remember_last(run)
        if args.out:
            self.namespace[args.out] = run
        if _in_kernel():
            run._ipython_display_()
        run.wait()

    def _params(self, args: Any) -> dict[str, Any]:
        settings = self.settings
        params: dict[str, Any] = dict(settings.params)
        temperature = args.temperature if args.temperature is not None else settings.temperature
        max_tokens = args.max_tokens if args.max_tokens is not None else settings.max_tokens
        reasoning = args.reasoning or settings.reasoning
        if temperature is not None:
            params["temperature"] = temperature
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        if reasoning:
            params["reasoning"] = {"effort": reasoning}
        if args.tools:
            try:
                params["tools"] = tools_from(args.tools, self.namespace)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        if args.json:
            params["response_format"] = {"type": "json_object"}
        for item in args.param:
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise UsageError(f"--param takes KEY=VALUE, not {item!r}")
            try:  # the name first: a value given under a name like api_key is never echoed
                check_request([], {key.strip(): None})
            except ConfigurationError as exc:
                raise _usage_error(exc) from None
            params[key.strip()] = _param_value(key.strip(), value)
        return params

    def _client(self) -> Any:
        """The magic's Client, made on first use and kept: its connection pool is reused."""
        if self._sync_client is None:
            from .._client import Client

            self._sync_client = Client()
        return self._sync_client

    def _connection(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.settings.base_url:
            options["base_url"] = self.settings.base_url
        if self.settings.timeout is not None:
            options["timeout"] = self.settings.timeout
        return options

    def _display(self, state: Any, fmt: str) -> Any:
        from ..display.live import live_display

        return live_display(state, format=fmt, max_rate=self.settings.max_rate)

    def _run_one(
        self, messages: list[dict[str, Any]], model: str, params: dict[str, Any], args: Any, fmt: str,
        user: dict[str, Any],
    ) -> None:
        functions = tool_functions(args.tools, self.namespace) if args.run_tools else {}
        turn = [user]
        started: list[Any] = []  # every Stream of this cell, also one an interrupt cut short
        try:
            for round_ in range(MAX_TOOL_ROUNDS + 1):
                stream = self._stream_one(messages, model, params, args, fmt, started)
                if (
                    stream is None
                    or not functions
                    or stream.status != "done"
                    or not stream.tool_calls
                    or round_ == MAX_TOOL_ROUNDS
                ):
                    break
                results = [run_tool(functions, call) for call in stream.tool_calls]
                messages = [*messages, stream.message, *results]
                turn += [stream.message, *results]
        finally:
            if args.chat and started:
                self._remember(args.chat, turn, started[-1])

    def _stream_one(
        self, messages: list[dict[str, Any]], model: str, params: dict[str, Any], args: Any, fmt: str,
        started: list[Any],
    ) -> Any:
        """Send, show live, keep; return the Stream (None if refused before any Stream existed)."""
        try:
            stream = self._client().stream(
                messages, model=model, raise_errors=False, **self._connection(), **params
            )
        except ConfigurationError as exc:  # refused before sending (no key...): nothing to show
            raise _usage_error(exc) from None
        except NitoError as exc:  # refused before the body (HTTP error, no key...): show, keep, say
            self._show_ended(exc.stream, fmt, args, started)
            if args.raise_:
                raise
            _error_line(exc)
            return exc.stream
        except KeyboardInterrupt as interrupt:  # stopped before the response started
            self._show_ended(getattr(interrupt, "stream", None), fmt, args, started)
            raise
        started.append(stream)
        display = self._display(stream, fmt)
        try:
            chunks = iter(stream)  # iterated from here on: the view reads what arrived so far
            _start(display)
            for _ in chunks:
                display.update()
        except BaseException:
            # The interrupt may land outside the engine's own iteration (in update(), say): close
            # the stream here so it is marked stopped and its connection released.
            if not stream.finished:
                stream.close()
            raise
        finally:
            display.finish()
            self._keep(stream, args)
        if stream.exception is not None:
            if args.raise_:
                raise stream.exception
            _error_line(stream.exception)
        return stream

    def _show_ended(self, stream: Any, fmt: str, args: Any, started: list[Any]) -> None:
        """Show and keep a Stream that ended before its body (failed, or stopped while connecting)."""
        if stream is not None:
            started.append(stream)
            self._display(stream, fmt).finish()
            self._keep(stream, args)

    def _run_many(
        self, messages: list[dict[str, Any]], models: list[str], params: dict[str, Any], args: Any, fmt: str
    ) -> None:
        from .._client import AsyncClient
        from ..display.runner import LoopThread

        client = AsyncClient(**self._connection())
        streams, names = [], []
        for model in models:
            try:
                streams.append(client.stream(messages, model=model, raise_errors=False, **params))
                names.append(model)
            except MissingAPIKeyError:  # a gateway model without a key: the others still run
                print(f"nito: {model}: {NO_KEY}", file=sys.stderr)
            except NitoError as exc:
                _error_line(exc)
        if not streams:
            return
        failures: dict[int, NitoError] = {}

        async def consume(index: int) -> None:
            try:
                await streams[index].wait(raise_errors=False)
            except NitoError as exc:  # an HTTP error when it connected: the Stream is "failed"
                failures[index] = exc
            except asyncio.CancelledError:
                # Cancelled while still connecting, the engine has not marked it: close it, so
                # that it says "stopped" like the others instead of "waiting" forever.
                await streams[index].aclose()
                raise

        async def run_all() -> None:
            try:
                await asyncio.gather(*(consume(i) for i in range(len(streams))))
            finally:
                await client.aclose()

        # The streams are iterated on a private loop in a worker thread (display/runner.py); this
        # thread, the cell's, draws the grid: it is the grid's refresh loop, so a stall keeps its
        # clocks moving and its last text shown.
        runner = LoopThread(run_all, name="nito_nb-models")
        grid = _Grid(streams, names, fmt) if _in_kernel() else None
        runner.start()
        interval = 1.0 / min(self.settings.max_rate, GRID_MAX_RATE)
        try:
            while not runner.wait(interval):
                if grid is not None:
                    grid.refresh(live=True)
        except BaseException:
            runner.cancel()  # the streams say "stopped"
            runner.wait(10)
            raise
        finally:
            self._finish_many(streams, names, grid, args, fmt)
        errors = [failures.get(i) or s.exception for i, s in enumerate(streams)]
        for error in filter(None, errors):
            if args.raise_:
                raise error
            _error_line(error)

    def _finish_many(self, streams: list[Any], names: list[str], grid: _Grid | None, args: Any, fmt: str) -> None:
        from IPython.display import display

        if grid is not None:
            grid.refresh(live=False)
        else:
            from ..display import TerminalDisplay

            for name, stream in zip(names, streams, strict=True):
                print(f"== {name} ==")
                TerminalDisplay(stream, format=fmt).finish()
        table = comparison_table(streams)
        if grid is not None:
            display(table)
        else:
            print(table.to_string(index=False))
        self._keep(streams, args)

    # -- replay ----------------------------------------------------------------------------------

    def _replay(self, args: Any, fmt: str) -> None:
        from .._stream import Stream, read_file

        path = Path(args.replay).expanduser()
        if not path.is_file():
            raise UsageError(f"--replay: no such file: {str(path)!r}")
        try:
            recorded = read_file(path)
        except Exception as exc:
            raise UsageError(f"--replay: cannot read {path.name}: {' '.join(str(exc).split())}") from None
        if recorded.status == "failed" or not len(recorded.log):
            display = self._display(recorded, fmt)
            display.finish()
            self._keep(recorded, args, save=False)
            return
        events = list(recorded.log)
        timed = any(event.t_ns != events[0].t_ns for event in events)
        step = min(0.02, SSE_REPLAY_SECONDS / len(events))
        # A fresh Stream fed the recorded bytes: the same accumulation as live, at the recorded pace.
        # feed()/end(): the engine's public, I/O-free, thread-safe entry points (the view's
        # refresh thread takes snapshots meanwhile).
        replay = Stream(recorded.request, raise_errors=False)
        display = self._display(replay, fmt)
        start = time.perf_counter()
        try:
            _start(display)
            for index, event in enumerate(events):
                if args.speed > 0:
                    due = (event.t if timed else index * step) / args.speed
                    wait = start + due - time.perf_counter()
                    if wait > 0:
                        time.sleep(wait)
                replay.feed(event.raw, time.perf_counter_ns())
                display.update()
            status = recorded.status if recorded.status in ("stopped", "truncated") else None
            replay.end(status=status)
        except BaseException:
            replay.end(status="stopped")
            raise
        finally:
            display.finish()
            # What is kept is the recording itself (its original times), not the re-timed copy.
            self._keep(recorded, args, save=False)

    # -- keeping ---------------------------------------------------------------------------------

    def _keep(self, kept: Any, args: Any, save: bool = True) -> None:
        """Make the result reachable (``_nito``, ``last()``, ``-o VAR``) and saved (``--save``)."""
        _remember_last(kept)
        streams = kept if isinstance(kept, list) else [kept]
        self.streams.extend(streams)
        self.namespace["_nito"] = kept
        if args.out:
            self.namespace[args.out] = kept
        if save and args.save:
            path = Path(args.save).expanduser()
            for stream in streams:
                target = path
                if len(streams) > 1:
                    target = path.with_name(f"{path.stem}.{_slug(str(stream.request.get('model')))}{path.suffix}")
                try:
                    stream.save(target)
                except OSError as exc:
                    _error_line(exc)

    def _remember(self, chat: str, turn: list[dict[str, Any]], stream: Any) -> None:
        """Add this cell's turn (the prompt, any tool rounds, the answer) to the chat, unless
        nothing came back (a failed request)."""
        if not (stream.content or stream.tool_calls):
            return
        turn = [*turn, stream.message]
        # Tool calls left unanswered would make the next request invalid: each gets a result
        # that says it was not run.
        for call in stream.tool_calls:
            turn.append({
                "role": "tool",
                "tool_call_id": call.id,
                "content": "The tool was not run (nito_nb runs tools only with --run-tools).",
            })
        turns = self.chats.setdefault(chat, [])
        turns.append(turn)
        if self.settings.history > 0:
            del turns[: -self.settings.history]


def _default_base_url() -> str:
    from .._client import DEFAULT_BASE_URL

    return DEFAULT_BASE_URL


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%%nito``/``%nito`` and the ``Nito`` configurable (``%config Nito.model = ...``)."""
    for configurable in ipython.configurables:
        if isinstance(configurable, Nito):  # loaded twice (%reload_ext): keep one, fresh magics
            settings = configurable
            break
    else:
        settings = _settings(ipython)
        ipython.configurables.append(settings)
    ipython.register_magics(NitoMagics(ipython, settings))


def _settings(ipython: Any) -> Nito:
    """The Nito configurable with the IPython configuration's values (``c.Nito.x`` in
    ``ipython_config.py``); a value a setting refuses is left out with one line, not a traceback
    that would stop ``%load_ext``."""
    try:
        return Nito(parent=ipython)
    except TraitError:
        settings = Nito()
    for name, value in dict(ipython.config.get("Nito", {})).items():
        try:
            setattr(settings, name, value)
        except (TraitError, AttributeError) as exc:
            print(f"nito: ipython config: {exc}", file=sys.stderr)
    return settings
