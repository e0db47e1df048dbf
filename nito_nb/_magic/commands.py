"""``%nito help | config | models | history | cost | last | reset`` and ``%nito --replay PATH``:
the line magic's commands, each one answer printed or returned (the session's streams, the
settings, the models the simulator and the gateway offer).

Apart from the cell's flow (``cell.py``): a command sends nothing but ``models``' one GET, and
reads or clears what the cells kept.
"""

from __future__ import annotations

import inspect
import os
import re
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from .._client import shown_url
from .._core.errors import ConfigurationError
from .._last import last as _kept
from .._last import remember as _remember_last
from . import store as _store
from .cell import run_cell
from .history import cost_line, history_table
from .models import models_table
from .options import parse_options
from .output import error_line

if TYPE_CHECKING:
    from .magics import NitoMagics

__all__ = ["line_command"]


def line_command(magics: NitoMagics, line: str) -> Any:
    command = line.strip().partition(" ")[0]
    if command in ("", "help", "-h", "--help"):
        print(_help(magics))
        return None
    if command == "config":
        print(_config_text(magics))
        return None
    if command == "models":
        return _models(magics)
    if command == "history":
        return history_table(_history(magics))
    if command == "cost":
        where = "in the store and this session" if magics.settings.store else "in this session"
        print(cost_line(_history(magics), where=where))
        return None
    if command == "last":
        kept = _kept()
        if kept is None and magics.settings.store:  # a new kernel: the store's last, rebuilt
            kept = _store.last_stream(magics.settings.store)
        if kept is None:
            print("nito: no stream yet: run a %%nito cell first")
            return None
        from IPython.display import display

        for stream in kept if isinstance(kept, list) else [kept]:
            display(stream)
        return None
    if command.startswith("-"):  # `%nito --replay PATH`: options and no prompt
        args = parse_options(magics.nito, line)
        if not args.replay:
            raise UsageError(
                "%nito with options only replays (--replay PATH); a prompt goes in a "
                "%%nito cell, below the options"
            )
        run_cell(magics, args, "")
        return None
    if command == "reset":
        _reset(magics)
        print("nito: chats, history and the last stream cleared")
        return None
    raise UsageError(
        f"%nito {command}: unknown command. Use %nito help | config | models | history | cost | "
        "last | reset, or %%nito as a cell magic with the prompt in the cell."
    )


def _help(magics: NitoMagics) -> str:
    # magic_arguments opens the docstring with a reST literal block ("::") of argparse's usage
    # under the line magic's name (%nito); the options are listed below it anyway, so the help
    # drops that block, and the reST double backquotes.
    usage = inspect.cleandoc(magics.nito.__doc__ or "")
    usage = re.sub(r"\A::\n\n\s*%nito .*?\n\n", "", usage, flags=re.DOTALL).replace("``", "")
    return (
        "%%nito [options]  -- then the prompt in the cell\n\n" + usage + "\n\n"
        "Tool calls are shown (name and arguments, live); they are never executed unless you add\n"
        "--run-tools (then the --tools functions run and their results go back to the model).\n"
        "Examples:\n"
        "  %%nito -m sim/chat\n  Explain SSE in two lines.\n\n"
        "  %%nito -m sim/chat,sim/reasoning --temperature 0.2\n  Same prompt, two models.\n"
    )


def _config_text(magics: NitoMagics) -> str:
    settings = magics.settings
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


def _models(magics: NitoMagics) -> Any:
    from .._client import Client
    from ..sim import SIM_MODELS

    rows: list[dict[str, Any]] = [
        {"id": name, "source": "simulator", "description": text}
        for name, text in SIM_MODELS.items()
    ]
    if os.environ.get("NITO_API_KEY") or magics.settings.base_url:
        try:
            with Client(base_url=magics.settings.base_url or None) as client:
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


def _history(magics: NitoMagics) -> list[Any]:
    """This session's streams, with those captured or watched in this kernel by the time they
    were sent (docs/CAPTURE.md); without any, the magic's in the order it kept them. With a
    store, the magic's streams of earlier sessions (earlier kernels) come first."""
    from .._capture import streams

    earlier = (
        _store.earlier_streams(magics.settings.store, magics.session)
        if magics.settings.store
        else []
    )
    captured = streams()
    if not captured:
        return [*earlier, *magics.streams]
    return [*earlier, *sorted([*magics.streams, *captured], key=lambda s: s.t0_wall)]


def _reset(magics: NitoMagics) -> None:
    from .._capture import REGISTRY

    magics.chats.clear()
    magics.chat_images.clear()
    magics.streams.clear()
    magics.session = _store.new_session()  # a store keeps the cleared streams, as earlier ones
    REGISTRY.clear()
    _remember_last(None)
    magics.namespace.pop("_nito", None)
