"""The options of ``%%nito`` and what they mean: the argparse definition (IPython's
``magic_arguments``), the line split with shell quoting, the checks every cell's options pass,
and the request fields the options and the settings make (``--param``, ``--tools``, ``--schema``,
``--logprobs``...). Each mistake is one line (a ``UsageError``), said before anything is sent.

Apart from the cell's flow (``cell.py``) because the options are read by every route of a cell
(one model, several, ``--over``, ``--replay``) and by ``%nito --replay``.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.process import arg_split

from .._client import check_keywords, check_request
from .._core.errors import ConfigurationError
from .._core.spelling import did_you_mean
from .._structured import schema_of
from ..tools import MAX_TOOL_ROUNDS, tools_from
from .config import REASONING_EFFORTS, format_or_raise
from .output import unsplittable_options, usage_error

if TYPE_CHECKING:
    from .config import Nito
    from .magics import NitoMagics

__all__ = ["OPTIONS", "check_options", "parse_options", "request_params", "with_options"]


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


def parse_options(magic: Any, line: str) -> Any:
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


#: The options of ``%%nito``, in the order ``%nito help`` lists them.
OPTIONS = (
    argument(
        "-m",
        "--model",
        action=_Once,
        help="model id, or several comma-separated (streamed side by side)",
    ),
    argument("--system", action=_Once, help="system prompt"),
    argument("--temperature", action=_Once, type=float),
    argument("--max-tokens", action=_Once, type=int),
    argument("--reasoning", action=_Once, choices=REASONING_EFFORTS, help="reasoning effort"),
    argument(
        "--tools",
        action=_Once,
        metavar="NAMES",
        help="comma-separated names of functions or JSON tool schemas in the namespace; "
        "the model's tool calls are shown, not run (see --run-tools)",
    ),
    argument(
        "--run-tools",
        action="store_true",
        help="run the model's calls of --tools functions and send the results back, "
        f"up to {MAX_TOOL_ROUNDS} rounds (only with this flag: tools never run otherwise)",
    ),
    argument("--json", action="store_true", help="ask for a JSON object (response_format)"),
    argument(
        "--schema",
        metavar="NAME",
        help="ask for JSON of this pydantic model or JSON-schema dict in the namespace, shown as it is "
        "parsed (the Stream's .parsed, .parse_error)",
    ),
    argument(
        "--logprobs",
        nargs="?",
        const=0,
        type=int,
        metavar="K",
        help="ask for each token's logprob (and its K most likely alternatives): _nito.logprobs, "
        "frame().nito.tokens()",
    ),
    argument(
        "--shade",
        action="store_true",
        help="show the answer shaded by each token's probability, its alternatives on hover "
        "(asks for logprobs: with --logprobs K, K alternatives)",
    ),
    argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra body field, VALUE as JSON (e.g. --param seed=1 --param sim='{\"tps\":5}')",
    ),
    argument(
        "--image",
        action="append",
        default=[],
        metavar="PATH_OR_URL",
        help="attach an image or a PDF (a local file or an http(s) URL); repeatable (docs/IMAGES.md)",
    ),
    argument(
        "-o", "--out", action=_Once, metavar="VAR", help="also store the Stream in this variable"
    ),
    argument(
        "--over",
        action=_Once,
        metavar="VAR",
        help="run the cell as a template over every row of the DataFrame, Series or list VAR "
        "(nito_nb.run: a progress panel, the Run in _nito / -o VAR)",
    ),
    argument(
        "--score",
        action="append",
        default=[],
        metavar="NAME=EXPR",
        help="grade each row of --over with a built-in score, e.g. exact=equals:truth, "
        "src=regex:https?://, fast=under:ttft:1.0, ok=json_valid, cheap=cost_under:0.01; "
        "repeatable (docs/SCORES.md)",
    ),
    argument(
        "--chat",
        action=_Once,
        metavar="NAME",
        help="keep the conversation under NAME across cells (without it, each cell stands alone)",
    ),
    argument("--new", action="store_true", help="start the --chat conversation afresh"),
    argument(
        "--images-back",
        action=_Once,
        type=int,
        metavar="N",
        help="with --chat: the images of the last N turns are sent again (default "
        "Nito.images_back, 1; 0: none)",
    ),
    argument("--no-interpolate", action="store_true", help="send {braces} as written"),
    argument(
        "--save", action=_Once, metavar="PATH", help="save the chunk log (JSON Lines) to PATH"
    ),
    argument(
        "--replay",
        action=_Once,
        metavar="PATH",
        help="show a saved .jsonl log or a recorded .sse body as if live",
    ),
    argument(
        "--speed", action=_Once, type=float, default=1.0, help="replay speed factor (0: at once)"
    ),
    argument(
        "--raise",
        dest="raise_",
        action="store_true",
        help="re-raise errors after the display (for headless runs that must fail)",
    ),
    argument("-f", "--format", action=_Once, help="markdown (default), text, code or code:LANG"),
)


def with_options(magic: Any) -> Any:
    """The magic with ``OPTIONS``: its ``parser``, and its docstring made argparse's help (what
    ``%nito?`` and ``%nito help`` show), as the decorators ``@magic_arguments()`` and
    ``@argument(...)`` stacked above it would."""
    for option in reversed(OPTIONS):  # a stack of decorators applies the lowest first
        magic = option(magic)
    return magic_arguments()(magic)


def check_options(args: Any, settings: Nito) -> str:
    """The checks every cell's options pass first (``--replay``'s too); the cell's format."""
    fmt = format_or_raise(args.format or settings.format, UsageError)
    if args.out is not None and not args.out.isidentifier():
        raise UsageError(f"-o/--out needs a variable name, not {args.out!r}")
    if args.new and not args.chat:
        raise UsageError("--new starts a chat afresh: use it with --chat NAME")
    if args.images_back is not None and not args.chat:
        raise UsageError("--images-back is how many turns of a --chat: use it with --chat NAME")
    if args.images_back is not None and args.images_back < 0:
        raise UsageError("--images-back is a number of turns, 0 or more (0: none)")
    return fmt


def request_params(magics: NitoMagics, args: Any) -> dict[str, Any]:
    settings = magics.settings
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
            params["tools"] = tools_from(args.tools, magics.namespace)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.json:
        params["response_format"] = {"type": "json_object"}
    if args.schema:
        params["schema"] = _schema(magics, args)
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


def _schema(magics: NitoMagics, args: Any) -> Any:
    """``--schema NAME``: the pydantic model or JSON-schema dict of that name, checked now."""
    if args.json:
        raise UsageError(
            "--json asks for any JSON object, --schema for one schema's: give one of them"
        )
    name = args.schema.strip()
    if name not in magics.namespace:
        raise UsageError(
            f"--schema {name}: no such name in the namespace (define a pydantic model or a JSON-schema dict first)"
        )
    try:
        return schema_of(magics.namespace[name])
    except ConfigurationError as exc:
        raise usage_error(exc) from None
