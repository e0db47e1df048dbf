"""``%%nito`` and ``%nito``: thin glue from a notebook cell to a live, kept Stream.

    %load_ext nito_nb
    %%nito -m z-ai/glm-5.2 --system "Be brief" --temperature 0.2
    Summarise {df.shape} rows of {topic} in three bullets.

The cell's text, interpolated (``_interpolate.py``), is sent with ``nito_nb.stream`` and iterated
here, in the cell's thread: the kernel's interrupt arrives as KeyboardInterrupt during iteration,
the engine closes the connection and keeps what arrived. The live display (``_display/notebook.py``) is
updated after each chunk (it throttles itself) and finished in a ``finally:``, so the final state
always reaches the notebook before the cell goes idle (which is what nbclient saves).

The rest of the package: several models side by side (``grid.py``), ``--replay`` (``replay.py``),
``%nito history`` / ``cost`` and the comparison table (``history.py``), ``Nito.store``
(``store.py``: every stream also written to a run store, read back by history), the settings
(``config.py``: ``%config Nito.model = "..."``, ``ipython_config.py``, ``NITO_MODEL``; the API key
only ever comes from ``NITO_API_KEY`` and is never shown) and the one-line errors (``output.py``).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.process import arg_split

from .._client import check_keywords, check_request, shown_url
from .._client.attachments import read_images
from .._core.attachments import DEFAULT_MAX_IMAGE_SIZE, Attachment, resend_history
from .._core.errors import ConfigurationError, NitoError, has_its_line, shown_as_line
from .._core.request import model_names
from .._core.spelling import did_you_mean
from .._interpolate import interpolate
from .._last import last as _kept
from .._last import remember as _remember_last
from .._structured import schema_of
from ..tools import MAX_TOOL_ROUNDS, tool_functions, tool_round, tools_from
from . import store as _store
from .config import REASONING_EFFORTS, Nito, format_or_raise, save_problem, settings_for
from .grid import ChoiceGrid, run_models
from .history import cost_line, history_table
from .models import models_table
from .output import (
    error_line,
    in_kernel,
    show_attachments,
    start_view,
    unsplittable_options,
    usage_error,
)
from .replay import replay

__all__ = ["Nito", "NitoMagics", "last", "load_ipython_extension"]


def last() -> Any:
    """The last Stream ``%%nito`` ran (a list of Streams after ``-m a,b``), or the last Run, or
    None (``_last.py`` keeps it)."""
    return _kept()


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


class _Once(argparse.Action):
    """An option that takes one value, given once: ``-m a --model b`` silently sent ``b``."""

    def __call__(
        self, parser: Any, namespace: Any, values: Any, option_string: str | None = None
    ) -> None:
        given = namespace.__dict__.setdefault("_given_once", {})
        if self.dest in given:
            several = " (several models: -m a,b)" if self.dest == "model" else ""
            raise argparse.ArgumentError(
                self, f"given twice ({given[self.dest]!r}, then {values!r}): give it once{several}"
            )
        given[self.dest] = values
        setattr(namespace, self.dest, values)


def _parse(magic: Any, line: str) -> Any:
    """``parse_argstring`` with shell quoting: IPython splits magic lines non-POSIX, which keeps the
    quotes in ``--system "Be brief"`` and cuts ``--param sim='{"tps": 5}'`` at its space. An
    unknown option that is a slip of one (``--max_tokens``) gets "Did you mean"."""
    try:
        words = arg_split(line, posix=True)
    except ValueError:  # shlex's "No closing quotation", with a traceback from inside shlex
        raise UsageError(unsplittable_options(line)) from None
    parser = magic.parser
    try:
        return parser.parse_args(words)
    except UsageError as exc:
        # argparse lists the options only in its private ``_actions`` (what its own help reads).
        options = [
            o for action in parser._actions for o in action.option_strings if o.startswith("--")
        ]
        hints = (
            did_you_mean(word.split("=")[0], options) for word in words if word.startswith("--")
        )
        hint = next((h for h in hints if h), "")
        raise UsageError(f"{exc}{'.' if hint else ''}{hint}") from None


def _slug(model: str) -> str:
    return re.sub(r"[^\w.-]+", "-", model).strip("-") or "model"


# -- the magics ------------------------------------------------------------------------------------


@magics_class
class NitoMagics(Magics):
    """``%%nito`` (a prompt, streamed live) and ``%nito help|config|models|history|cost|last|reset``."""

    def __init__(self, shell: Any, settings: Nito) -> None:
        super().__init__(shell)
        self.settings = settings
        #: chat name -> turns; a turn is the messages of one cell (prompt, answer, tool results)
        self.chats: dict[str, list[list[dict[str, Any]]]] = {}
        #: chat name -> the images and files its next cell may send again, by sha256 or URL (the
        #: turns keep descriptors only: docs/IMAGES.md)
        self.chat_images: dict[str, dict[str, Attachment]] = {}
        #: every Stream the magic ran in this session, oldest first
        self.streams: list[Any] = []
        #: the run id of this session's rows in a store (Nito.store); %nito reset starts another
        self.session = _store.new_session()
        self._sync_client: Any = None

    @magic_arguments()
    @argument(
        "-m",
        "--model",
        action=_Once,
        help="model id, or several comma-separated (streamed side by side)",
    )
    @argument("--system", action=_Once, help="system prompt")
    @argument("--temperature", action=_Once, type=float)
    @argument("--max-tokens", action=_Once, type=int)
    @argument("--reasoning", action=_Once, choices=REASONING_EFFORTS, help="reasoning effort")
    @argument(
        "--tools",
        action=_Once,
        metavar="NAMES",
        help="comma-separated names of functions or JSON tool schemas in the namespace; "
        "the model's tool calls are shown, not run (see --run-tools)",
    )
    @argument(
        "--run-tools",
        action="store_true",
        help="run the model's calls of --tools functions and send the results back, "
        f"up to {MAX_TOOL_ROUNDS} rounds (only with this flag: tools never run otherwise)",
    )
    @argument("--json", action="store_true", help="ask for a JSON object (response_format)")
    @argument(
        "--schema",
        metavar="NAME",
        help="ask for JSON of this pydantic model or JSON-schema dict in the namespace, shown as it is "
        "parsed (the Stream's .parsed, .parse_error)",
    )
    @argument(
        "--logprobs",
        nargs="?",
        const=0,
        type=int,
        metavar="K",
        help="ask for each token's logprob (and its K most likely alternatives): _nito.logprobs, "
        "frame().nito.tokens()",
    )
    @argument(
        "--shade",
        action="store_true",
        help="show the answer shaded by each token's probability, its alternatives on hover "
        "(asks for logprobs: with --logprobs K, K alternatives)",
    )
    @argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra body field, VALUE as JSON (e.g. --param seed=1 --param sim='{\"tps\":5}')",
    )
    @argument(
        "--image",
        action="append",
        default=[],
        metavar="PATH_OR_URL",
        help="attach an image or a PDF (a local file or an http(s) URL); repeatable (docs/IMAGES.md)",
    )
    @argument(
        "-o", "--out", action=_Once, metavar="VAR", help="also store the Stream in this variable"
    )
    @argument(
        "--over",
        action=_Once,
        metavar="VAR",
        help="run the cell as a template over every row of the DataFrame, Series or list VAR "
        "(nito_nb.run: a progress panel, the Run in _nito / -o VAR)",
    )
    @argument(
        "--score",
        action="append",
        default=[],
        metavar="NAME=EXPR",
        help="grade each row of --over with a built-in score, e.g. exact=equals:truth, "
        "src=regex:https?://, fast=under:ttft:1.0, ok=json_valid, cheap=cost_under:0.01; "
        "repeatable (docs/SCORES.md)",
    )
    @argument(
        "--chat",
        action=_Once,
        metavar="NAME",
        help="keep the conversation under NAME across cells (without it, each cell stands alone)",
    )
    @argument("--new", action="store_true", help="start the --chat conversation afresh")
    @argument(
        "--images-back",
        action=_Once,
        type=int,
        metavar="N",
        help="with --chat: the images of the last N turns are sent again (default "
        "Nito.images_back, 1; 0: none)",
    )
    @argument("--no-interpolate", action="store_true", help="send {braces} as written")
    @argument(
        "--save", action=_Once, metavar="PATH", help="save the chunk log (JSON Lines) to PATH"
    )
    @argument(
        "--replay",
        action=_Once,
        metavar="PATH",
        help="show a saved .jsonl log or a recorded .sse body as if live",
    )
    @argument(
        "--speed", action=_Once, type=float, default=1.0, help="replay speed factor (0: at once)"
    )
    @argument(
        "--raise",
        dest="raise_",
        action="store_true",
        help="re-raise errors after the display (for headless runs that must fail)",
    )
    @argument("-f", "--format", action=_Once, help="markdown (default), text, code or code:LANG")
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
            # exception's _render_traceback_ returns instead of its traceback. A Run's (--over)
            # has its own line already: what it kept and how to resume.
            if has_its_line(interrupt):
                raise
            where = (
                "what arrived is kept in _nito, marked stopped"
                if len(self.streams) > kept
                else "nothing was kept"
            )
            line_ = f"KeyboardInterrupt: nito stopped; {where}."
            shown_as_line(interrupt, line_)
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
            where = "in the store and this session" if self.settings.store else "in this session"
            print(cost_line(self._history(), where=where))
            return None
        if command == "last":
            kept = _kept()
            if kept is None and self.settings.store:  # a new kernel: the store's last, rebuilt
                kept = _store.last_stream(self.settings.store)
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
                raise UsageError(
                    "%nito with options only replays (--replay PATH); a prompt goes in a "
                    "%%nito cell, below the options"
                )
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
            value = getattr(settings, name)
            if name == "base_url" and value:  # a password or an ?api-key= in it is never shown
                value = shown_url(value)
            lines.append(f"  Nito.{name} = {value!r}")
        from .._client.endpoint import base_url_of

        sim = "go there too" if settings.base_url else "run on the embedded simulator"
        try:  # the clients' own choice and check: the setting, else NITO_BASE_URL, else Nito's
            effective = f"{shown_url(base_url_of(settings.base_url))} (sim/... models {sim})"
        except ConfigurationError as exc:  # a bad NITO_BASE_URL (the setting is checked when set):
            # said on its line, not raised, where one looks for what is wrong with the settings
            effective = (
                f"not usable, so only sim/... models run (on the embedded simulator): {exc.message}"
            )
        lines.append(f"  effective base URL: {effective}")
        lines.append(
            f"  API key (NITO_API_KEY): {'set' if os.environ.get('NITO_API_KEY') else 'unset'}"
        )
        return "\n".join(lines)

    def _models(self) -> Any:
        from .._client import Client
        from ..sim import SIM_MODELS

        rows: list[dict[str, Any]] = [
            {"id": name, "source": "simulator", "description": text}
            for name, text in SIM_MODELS.items()
        ]
        if os.environ.get("NITO_API_KEY") or self.settings.base_url:
            try:
                with Client(base_url=self.settings.base_url or None) as client:
                    for model in client.models():
                        rows.append(
                            {
                                "id": model.get("id"),
                                "source": "gateway",
                                "description": model.get("name") or model.get("description") or "",
                            }
                        )
            except Exception as exc:  # any failure of the GET: one clear line, the sim list stays
                error_line(exc)
        return models_table(rows)

    def _history(self) -> list[Any]:
        """This session's streams, with those captured or watched in this kernel by the time they
        were sent (docs/CAPTURE.md); without any, the magic's in the order it kept them. With a
        store, the magic's streams of earlier sessions (earlier kernels) come first."""
        from .._capture import streams

        earlier = (
            _store.earlier_streams(self.settings.store, self.session) if self.settings.store else []
        )
        captured = streams()
        if not captured:
            return [*earlier, *self.streams]
        return [*earlier, *sorted([*self.streams, *captured], key=lambda s: s.t0_wall)]

    def _reset(self) -> None:
        from .._capture import REGISTRY

        self.chats.clear()
        self.chat_images.clear()
        self.streams.clear()
        self.session = _store.new_session()  # a store keeps the cleared streams, as earlier ones
        REGISTRY.clear()
        _remember_last(None)
        self.namespace.pop("_nito", None)

    # -- cell magic ------------------------------------------------------------------------------

    def _cell(self, args: Any, cell: str) -> None:
        settings = self.settings
        fmt = format_or_raise(args.format or settings.format, UsageError)
        if args.out is not None and not args.out.isidentifier():
            raise UsageError(f"-o/--out needs a variable name, not {args.out!r}")
        if args.new and not args.chat:
            raise UsageError("--new starts a chat afresh: use it with --chat NAME")
        if args.images_back is not None and not args.chat:
            raise UsageError("--images-back is how many turns of a --chat: use it with --chat NAME")
        if args.images_back is not None and args.images_back < 0:
            raise UsageError("--images-back is a number of turns, 0 or more (0: none)")
        if args.replay:
            replay(self, args, fmt)
            return
        models = model_names(args.model or settings.model)
        if not models:
            raise UsageError("no model: give -m MODEL or set %config Nito.model = '...'")
        if args.save:  # checked now: it was found out only after the whole answer had streamed
            why = save_problem(args.save)
            if why:
                raise UsageError(f"--save {args.save!r}: {why}")
        if args.score and not args.over:
            raise UsageError("--score grades the rows of a run: add --over VAR")
        if args.over:
            self._run_over(args, cell, models)
            return
        if args.chat and len(models) > 1:
            raise UsageError("--chat keeps one conversation: use it with one model")
        if args.run_tools and (len(models) > 1 or not args.tools):
            raise UsageError(
                "--run-tools runs the --tools functions of one model: give --tools and one -m"
            )
        prompt = cell.strip("\n")
        if settings.interpolate and not args.no_interpolate:
            try:  # its one refusal: a {group} that would put the key (NITO_API_KEY) in the prompt
                prompt = interpolate(
                    prompt, self.namespace, secrets=[os.environ.get("NITO_API_KEY")]
                )
            except NitoError as exc:
                raise UsageError(exc.message) from None
        if not prompt.strip():
            raise UsageError("the cell is empty: write the prompt below the %%nito line")
        params = self._params(args)
        if args.image:
            try:  # checked now (type, size, a missing file): one line before anything is sent
                read_images(args.image, "auto", DEFAULT_MAX_IMAGE_SIZE)
            except ConfigurationError as exc:
                raise usage_error(exc) from None
            # Read again by each call: only their descriptors are kept (--chat keeps the text).
            params["images"] = list(args.image)
        user = {"role": "user", "content": prompt}
        messages: list[dict[str, Any]] = []
        system = args.system if args.system is not None else settings.system
        if system:
            messages.append({"role": "system", "content": system})
        if args.chat:
            if args.new:
                self.chats[args.chat] = []
                self.chat_images.pop(args.chat, None)
            for turn in self.chats.get(args.chat, []):
                messages.extend(turn)
            back = settings.images_back if args.images_back is None else args.images_back
            messages, again = resend_history(messages, self.chat_images.get(args.chat, {}), back)
            if again:  # in their place in the history; their descriptors kept in the record
                params["images"] = [*again, *params.get("images", [])]
        messages.append(user)
        try:
            # the client's own check, before anything is sent (--schema's becomes its response_format)
            check_request(
                messages,
                {key: value for key, value in params.items() if key not in ("schema", "images")},
            )
        except ConfigurationError as exc:
            raise usage_error(exc) from None
        if len(models) == 1:
            self._run_one(messages, models[0], params, args, fmt, user)
        else:
            run_models(self, messages, models, params, args, fmt)

    def _run_over(self, args: Any, cell: str, models: list[str]) -> None:
        """``--over VAR``: the cell is a template filled from each row of VAR (``nito_nb.run``)."""
        from .._runs import run as start_run

        if args.chat or args.run_tools:
            raise UsageError("--over runs every row on its own: not with --chat or --run-tools")
        if args.over not in self.namespace:
            raise UsageError(f"--over {args.over}: no such variable in the namespace")
        template = cell.strip("\n")
        if not template.strip():
            raise UsageError(
                "the cell is empty: write the template below the %%nito line, e.g. Summarise: {text}"
            )
        system = args.system if args.system is not None else self.settings.system
        rows = self.namespace[args.over]
        images = self._over_images(args, rows)
        score = _scores(args.score)
        try:
            run = start_run(
                rows,
                template=template,
                model=models,
                system=system or None,
                images=images,
                score=score or None,
                **self._connection(),
                **self._params(args),
            )
        except NitoError as exc:  # a missing column, no key...: one line, nothing was sent
            raise UsageError(f"--over {args.over}: {exc}") from None
        self.namespace["_nito"] = run
        _remember_last(run)
        if args.out:
            self.namespace[args.out] = run
        if in_kernel():
            run._ipython_display_()
        run.wait()

    def _over_images(self, args: Any, rows: Any) -> str | None:
        """With ``--over VAR``, ``--image`` names VAR's column of each row's images (a path, an
        http(s) URL, a list of them, or empty), as ``run(images=...)`` takes it: a file named
        for every row would send the same image with each, which a column says as well."""
        if not args.image:
            return None
        columns = [str(c) for c in getattr(rows, "columns", [])]
        if len(args.image) > 1 or args.image[0] not in columns:
            have = (
                f"{args.over} has {', '.join(columns) or 'no columns'}"
                if columns
                else (f"{args.over} is a {type(rows).__name__}, not a DataFrame")
            )
            raise UsageError(
                f"--over {args.over}: --image names the column of each row's images, once "
                f"({have}); for the same image on every row, add a column: "
                f"{args.over}['image'] = 'chart.png'"
            )
        return str(args.image[0])

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
        if args.schema:
            params["schema"] = self._schema(args)
        if args.logprobs is not None or args.shade:
            params["logprobs"] = True
            if args.logprobs:
                params["top_logprobs"] = args.logprobs
        for item in args.param:
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise UsageError(f"--param takes KEY=VALUE, not {item!r}")
            try:  # the name first: a value given under a name like api_key is never echoed
                check_request([], {key.strip(): None})
                check_keywords({key.strip(): None}, (), "--param")
            except ConfigurationError as exc:
                raise usage_error(exc) from None
            params[key.strip()] = _param_value(key.strip(), value)
        return params

    def _schema(self, args: Any) -> Any:
        """``--schema NAME``: the pydantic model or JSON-schema dict of that name, checked now."""
        if args.json:
            raise UsageError(
                "--json asks for any JSON object, --schema for one schema's: give one of them"
            )
        name = args.schema.strip()
        if name not in self.namespace:
            raise UsageError(
                f"--schema {name}: no such name in the namespace (define a pydantic model or a JSON-schema dict first)"
            )
        try:
            return schema_of(self.namespace[name])
        except ConfigurationError as exc:
            raise usage_error(exc) from None

    def close(self) -> None:
        """Close the client this magics object opened (its connection pool); the streams stay."""
        if self._sync_client is not None:
            self._sync_client.close()
            self._sync_client = None

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
        from .._display.notebook import live_display

        return live_display(state, format=fmt, max_rate=self.settings.max_rate)

    def _run_one(
        self,
        messages: list[dict[str, Any]],
        model: str,
        params: dict[str, Any],
        args: Any,
        fmt: str,
        user: dict[str, Any],
    ) -> None:
        functions = tool_functions(args.tools, self.namespace) if args.run_tools else {}
        turn = [user]
        user_at = len(messages) - 1  # the prompt's place in each round's request
        started: list[Any] = []  # every Stream of this cell, also one an interrupt cut short
        try:
            for round_ in range(MAX_TOOL_ROUNDS + 1):
                stream = self._stream_one(messages, model, params, args, fmt, started)
                runs = None if stream is None else tool_round(stream, functions, round_)
                if not runs:
                    break
                for run in runs:  # the notebook shows what was executed
                    print(run.line)
                results = [run.message for run in runs]
                messages = [*messages, stream.message, *results]
                turn += [stream.message, *results]
        finally:
            if args.chat and started:
                self._remember(args.chat, turn, started[-1], user_at)

    def _stream_one(
        self,
        messages: list[dict[str, Any]],
        model: str,
        params: dict[str, Any],
        args: Any,
        fmt: str,
        started: list[Any],
    ) -> Any:
        """Send, show live, keep; return the Stream (None if refused before any Stream existed)."""
        try:
            stream = self._client().stream(
                messages, model=model, raise_errors=False, **self._connection(), **params
            )
        except ConfigurationError as exc:  # refused before sending (no key...): nothing to show
            raise usage_error(exc) from None
        except NitoError as exc:  # refused before the body (HTTP error, no key...): show, keep, say
            self._show_ended(exc.stream, fmt, args, started)
            if args.raise_:
                raise
            error_line(exc)
            return exc.stream
        except KeyboardInterrupt as interrupt:  # stopped before the response started
            self._show_ended(getattr(interrupt, "stream", None), fmt, args, started)
            raise
        started.append(stream)
        if len(started) == 1 and "images" in params:  # once per cell, not again for each tool round
            show_attachments(stream)
        n = params.get("n")
        count = n if isinstance(n, int) and n > 1 else 1
        if (count > 1 or args.shade) and in_kernel():  # the choices side by side, or shaded
            display = ChoiceGrid(stream, count, fmt, self.settings.max_rate, shade=args.shade)
        else:
            display = self._display(stream, fmt)
        try:
            chunks = iter(stream)  # iterated from here on: the view reads what arrived so far
            start_view(display)
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
            error_line(stream.exception)
        return stream

    def _show_ended(self, stream: Any, fmt: str, args: Any, started: list[Any]) -> None:
        """Show and keep a Stream that ended before its body (failed, or stopped while connecting)."""
        if stream is not None:
            started.append(stream)
            self._display(stream, fmt).finish()
            self._keep(stream, args)

    # -- keeping ---------------------------------------------------------------------------------

    def _keep(self, kept: Any, args: Any, save: bool = True) -> None:
        """Make the result reachable (``_nito``, ``last()``, ``-o VAR``), saved (``--save``) and
        stored (``Nito.store``); ``save=False``: a replayed recording, neither saved nor stored."""
        _remember_last(kept)
        streams = kept if isinstance(kept, list) else [kept]
        self.streams.extend(streams)
        self.namespace["_nito"] = kept
        if args.out:
            self.namespace[args.out] = kept
        if save and self.settings.store:
            # row: the cell (a run's row is its input's), so a cell's models and tool rounds share
            # it. Its number is the last of In[] (stored before the cell runs); execution_count is
            # that number in IPython 8 but one more in IPython 9, which increments it first.
            history = getattr(self.shell, "history_manager", None)
            cell = len(history.input_hist_raw) - 1 if history is not None else None
            _store.write(self.settings.store, streams, self.session, f"In[{cell}]")
        if save and args.save:
            path = Path(args.save).expanduser()
            for stream in streams:
                target = path
                if len(streams) > 1:
                    target = path.with_name(
                        f"{path.stem}.{_slug(str(stream.request.get('model')))}{path.suffix}"
                    )
                try:
                    stream.save(target)
                except OSError as exc:
                    error_line(exc)

    def _remember(self, chat: str, turn: list[dict[str, Any]], stream: Any, user_at: int) -> None:
        """Add this cell's turn (the prompt, any tool rounds, the answer) to the chat, unless
        nothing came back (a failed request). The prompt is kept as the request kept it (its
        images as descriptors); the images the next cell may send again are the Stream's."""
        if not (stream.content or stream.tool_calls):
            return
        sent = stream.request.get("messages") or []
        if user_at < len(sent) and sent[user_at].get("role") == "user":
            turn = [sent[user_at], *turn[1:]]
        self.chat_images[chat] = dict(stream._resend)
        turn = [*turn, stream.message]
        # Tool calls left unanswered would make the next request invalid: each gets a result
        # that says it was not run.
        for call in stream.tool_calls:
            turn.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": "The tool was not run (nito_nb runs tools only with --run-tools).",
                }
            )
        turns = self.chats.setdefault(chat, [])
        turns.append(turn)
        if self.settings.history > 0:
            del turns[: -self.settings.history]


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%%nito``/``%nito`` and the ``Nito`` configurable (``%config Nito.model = ...``)."""
    for configurable in ipython.configurables:
        if isinstance(configurable, Nito):  # loaded twice (%reload_ext): keep one, fresh magics
            settings = configurable
            break
    else:
        settings = settings_for(ipython)
        ipython.configurables.append(settings)
    # IPython keeps every registered Magics object in ``configurables``: a reload would leave the
    # old one there for the session, with its Client's connection pool open.
    # The new one takes over the session's chats and streams (%nito history must not lose them).
    earlier = [c for c in ipython.configurables if isinstance(c, NitoMagics)]
    magics = NitoMagics(ipython, settings)  # (Magics.__init__ appends it to configurables)
    for old in earlier:
        magics.chats, magics.streams, magics.session = old.chats, old.streams, old.session
        old.close()
        ipython.configurables.remove(old)
    ipython.register_magics(magics)


def _scores(exprs: list[str]) -> dict[str, Any]:
    """``--score NAME=EXPR`` (repeatable): the built-in scores, parsed, never evaluated."""
    from ..scores import parse_score

    out: dict[str, Any] = {}
    for expr in exprs:
        try:
            name, score = parse_score(expr)
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
        if name in out:
            raise UsageError(f"--score {expr!r}: the name {name!r} is given twice")
        out[name] = score
    return out
