"""A ``%%nito`` cell's flow: the checks of its route, the prompt (interpolated from the namespace),
the messages (the system prompt, a ``--chat``'s turns and the images they send again), then one
model streamed live in the cell's thread, with ``--run-tools``' rounds, and the chat's turn kept.

The other routes have modules of their own: several models (``grid.py``), ``--over`` (``over.py``),
``--replay`` (``replay.py``); the options and their request fields are ``options.py``'s.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from .._client import check_request
from .._client.attachments import read_images
from .._core.attachments import DEFAULT_MAX_IMAGE_SIZE, resend_history
from .._core.errors import ConfigurationError, NitoError
from .._core.request import model_names
from .._interpolate import interpolate
from ..tools import MAX_TOOL_ROUNDS, tool_functions, tool_round
from .config import save_problem
from .grid import ChoiceGrid, run_models
from .options import check_options, request_params
from .output import error_line, in_kernel, show_attachments, start_view, usage_error
from .over import run_over
from .replay import replay

if TYPE_CHECKING:
    from .magics import NitoMagics

__all__ = ["run_cell"]


def run_cell(magics: NitoMagics, args: Any, cell: str) -> None:
    settings = magics.settings
    fmt = check_options(args, settings)
    if args.replay:
        replay(magics, args, fmt)
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
        run_over(magics, args, cell, models)
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
            prompt = interpolate(prompt, magics.namespace, secrets=[os.environ.get("NITO_API_KEY")])
        except NitoError as exc:
            raise UsageError(exc.message) from None
    if not prompt.strip():
        raise UsageError("the cell is empty: write the prompt below the %%nito line")
    params = request_params(magics, args)
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
            magics.chats[args.chat] = []
            magics.chat_images.pop(args.chat, None)
        for turn in magics.chats.get(args.chat, []):
            messages.extend(turn)
        back = settings.images_back if args.images_back is None else args.images_back
        messages, again = resend_history(messages, magics.chat_images.get(args.chat, {}), back)
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
        _run_one(magics, messages, models[0], params, args, fmt, user)
    else:
        run_models(magics, messages, models, params, args, fmt)


def _run_one(
    magics: NitoMagics,
    messages: list[dict[str, Any]],
    model: str,
    params: dict[str, Any],
    args: Any,
    fmt: str,
    user: dict[str, Any],
) -> None:
    functions = tool_functions(args.tools, magics.namespace) if args.run_tools else {}
    turn = [user]
    user_at = len(messages) - 1  # the prompt's place in each round's request
    started: list[Any] = []  # every Stream of this cell, also one an interrupt cut short
    try:
        for round_ in range(MAX_TOOL_ROUNDS + 1):
            stream = _stream_one(magics, messages, model, params, args, fmt, started)
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
            _remember(magics, args.chat, turn, started[-1], user_at)


def _stream_one(
    magics: NitoMagics,
    messages: list[dict[str, Any]],
    model: str,
    params: dict[str, Any],
    args: Any,
    fmt: str,
    started: list[Any],
) -> Any:
    """Send, show live, keep; return the Stream (None if refused before any Stream existed)."""
    try:
        stream = magics._client().stream(
            messages, model=model, raise_errors=False, **magics._connection(), **params
        )
    except ConfigurationError as exc:  # refused before sending (no key...): nothing to show
        raise usage_error(exc) from None
    except NitoError as exc:  # refused before the body (HTTP error, no key...): show, keep, say
        _show_ended(magics, exc.stream, fmt, args, started)
        if args.raise_:
            raise
        error_line(exc)
        return exc.stream
    except KeyboardInterrupt as interrupt:  # stopped before the response started
        _show_ended(magics, getattr(interrupt, "stream", None), fmt, args, started)
        raise
    started.append(stream)
    if len(started) == 1 and "images" in params:  # once per cell, not again for each tool round
        show_attachments(stream)
    n = params.get("n")
    count = n if isinstance(n, int) and n > 1 else 1
    if (count > 1 or args.shade) and in_kernel():  # the choices side by side, or shaded
        display = ChoiceGrid(stream, count, fmt, magics.settings.max_rate, shade=args.shade)
    else:
        display = magics._display(stream, fmt)
    try:
        chunks = iter(stream)  # iterated from here on: the view reads what arrived so far
        start_view(display)
        display.feed(chunks)  # update() after each chunk
    except BaseException:
        # The interrupt may land outside the engine's own iteration (in update(), say): close
        # the stream here so it is marked stopped and its connection released.
        if not stream.finished:
            stream.close()
        raise
    finally:
        display.finish()
        magics._keep(stream, args)
    if stream.exception is not None:
        if args.raise_:
            raise stream.exception
        error_line(stream.exception)
    return stream


def _show_ended(magics: NitoMagics, stream: Any, fmt: str, args: Any, started: list[Any]) -> None:
    """Show and keep a Stream that ended before its body (failed, or stopped while connecting)."""
    if stream is not None:
        started.append(stream)
        magics._display(stream, fmt).finish()
        magics._keep(stream, args)


def _remember(
    magics: NitoMagics, chat: str, turn: list[dict[str, Any]], stream: Any, user_at: int
) -> None:
    """Add this cell's turn (the prompt, any tool rounds, the answer) to the chat, unless
    nothing came back (a failed request). The prompt is kept as the request kept it (its
    images as descriptors); the images the next cell may send again are the Stream's."""
    if not (stream.content or stream.tool_calls):
        return
    sent = stream.request.get("messages") or []
    if user_at < len(sent) and sent[user_at].get("role") == "user":
        turn = [sent[user_at], *turn[1:]]
    magics.chat_images[chat] = dict(stream._resend)
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
    turns = magics.chats.setdefault(chat, [])
    turns.append(turn)
    if magics.settings.history > 0:
        del turns[: -magics.settings.history]
