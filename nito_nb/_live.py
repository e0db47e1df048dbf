"""``nito_nb.live()``: the magic's live view for streams that other libraries make.

    with nito_nb.live():
        for chunk in client.chat.completions.create(..., stream=True):   # a captured client
            ...

Inside the block, every Stream that a capturing client (``httpx_client``) or ``watch()`` starts gets
the display the magic uses (``_display.notebook.live_display``: the same renderer, throttling and escaping in
a notebook, plain text elsewhere). It is updated by the code that feeds the Stream, in the thread
that reads the response, so the view follows the bytes even when the user's code only iterates.
A view still open when the block ends is finished there (it shows the state at that moment); a
stream read after the block is not shown.
"""

from __future__ import annotations

from contextvars import Token
from typing import Any

from ._capture import VIEWERS, Views
from ._display.throttle import MAX_RATE
from ._stream import Stream

__all__ = ["live"]


class live:  # lower case: a context manager used like a function, `with nito_nb.live():`
    """Show every stream captured or watched inside the block live (sync ``with`` or ``async with``).

    ``format`` is the magic's (``markdown``, ``text``, ``code`` or ``code:LANG``); ``max_rate`` the
    most display updates per second. An inner ``live()`` replaces an outer one for its block.
    """

    def __init__(self, *, format: str = "markdown", max_rate: float = MAX_RATE) -> None:
        from ._render import check_format

        check_format(format)  # a bad format is the caller's mistake: say so before the block runs
        if max_rate <= 0:
            raise ValueError(f"max_rate must be positive, not {max_rate!r}")
        self.format = format
        self.max_rate = max_rate
        self.views: list[Any] = []
        self._token: Token[Any] | None = None

    def _open(self, stream: Stream) -> Any:
        from ._display.notebook import live_display

        view = live_display(stream, format=self.format, max_rate=self.max_rate)
        self.views.append(view)
        return view

    def __enter__(self) -> live:
        if self._token is not None:
            raise RuntimeError("this live() block is already open; use a new nito_nb.live()")
        self._token = VIEWERS.set((self._open,))
        return self

    def __exit__(self, *exc_info: Any) -> None:
        token, self._token = self._token, None
        try:
            # repeated finish() sends nothing new; failures: one line
            Views(None, self.views).finish()
        finally:
            if token is not None:
                VIEWERS.reset(token)

    async def __aenter__(self) -> live:
        return self.__enter__()

    async def __aexit__(self, *exc_info: Any) -> None:
        self.__exit__(*exc_info)
