"""``%%nito`` and ``%nito``: thin glue from a notebook cell to a live, kept Stream.

    %load_ext nito_nb
    %%nito -m z-ai/glm-5.2 --system "Be brief" --temperature 0.2
    Summarise {df.shape} rows of {topic} in three bullets.

The cell's text, interpolated (``_interpolate.py``), is sent with ``nito_nb.stream`` and iterated
here, in the cell's thread: the kernel's interrupt arrives as KeyboardInterrupt during iteration,
the engine closes the connection and keeps what arrived. The live display (``_display/notebook.py``) is
updated after each chunk (it throttles itself) and finished in a ``finally:``, so the final state
always reaches the notebook before the cell goes idle (which is what nbclient saves).

This module is the IPython glue: the ``NitoMagics`` class holds the session (its chats, streams,
client, settings) and what every route of a cell shares (the connection, the live view, keeping a
result); the rest lives apart. The options and their request fields (``options.py``), a cell's flow
and one model streamed live (``cell.py``), the line commands (``commands.py``), several models side
by side (``grid.py``), ``--over`` (``over.py``), ``--replay`` (``replay.py``),
``%nito history`` / ``cost`` and the comparison table (``history.py``), ``Nito.store``
(``store.py``: every stream also written to a run store, read back by history), the settings
(``config.py``: ``%config Nito.model = "..."``, ``ipython_config.py``, ``NITO_MODEL``; the API key
only ever comes from ``NITO_API_KEY`` and is never shown) and the one-line errors (``output.py``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class

from .._core.attachments import Attachment
from .._core.errors import has_its_line, shown_as_line
from .._last import last as _kept
from .._last import remember as _remember_last
from . import store as _store
from .cell import run_cell
from .commands import line_command
from .config import Nito, settings_for
from .options import parse_options, with_options
from .output import error_line

__all__ = ["Nito", "NitoMagics", "last", "load_ipython_extension"]


def last() -> Any:
    """The last Stream ``%%nito`` ran (a list of Streams after ``-m a,b``), or the last Run, or
    None (``_last.py`` keeps it)."""
    return _kept()


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

    @with_options
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
                return line_command(self, line)
            args = parse_options(self.nito, line)
            run_cell(self, args, cell)
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

    # -- keeping (what every route of a cell shares: cell.py, grid.py, replay.py) ------------------

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
