"""What the magic writes besides the answer: one line per error (never a traceback for a
user's mistake), and starting a live view."""

from __future__ import annotations

import sys
from typing import Any

from IPython.core.error import UsageError

from .._core.errors import ConfigurationError, MissingAPIKeyError, one_line

__all__ = [
    "NO_KEY",
    "error_line",
    "in_kernel",
    "show_attachments",
    "start_view",
    "unsplittable_options",
    "usage_error",
]

#: How the magic's user sets the key (the engine's message names api_key=..., which a cell lacks).
NO_KEY = (
    "No API key: set the NITO_API_KEY environment variable before starting Jupyter, or in the "
    "notebook without writing the key in it: import os, getpass; "
    "os.environ['NITO_API_KEY'] = getpass.getpass(). Models named sim/... need no key."
)


def error_line(error: BaseException) -> None:
    """One short line on stderr instead of a traceback (the display already shows the banner).

    The whole message, hint included (an APIError's ``str`` ends with what to do, its ``.message``
    is only the gateway's words); a long one loses its middle, never its end.
    """
    print(f"nito: {one_line(error)}", file=sys.stderr)


def usage_error(error: ConfigurationError) -> UsageError:
    """A request refused before it was sent (a user's mistake): one line, in the magic's terms."""
    return UsageError(NO_KEY if isinstance(error, MissingAPIKeyError) else error.message)


def unsplittable_options(line: str) -> str:
    """What to fix in an options line that shlex cannot split: a quote that is not closed, or a
    backslash at its end. It names the option, never the quoted text (which may be anything,
    even a secret given by mistake)."""
    quote, option, escaped = "", "", False
    for index, char in enumerate(line):  # shlex's POSIX rules: \ escapes outside '...' only
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
            before = line[:index].split()
            option = next((word for word in reversed(before) if word.startswith("-")), "")
    if escaped and not quote:
        return "the options line ends with a backslash that escapes nothing: remove it (\\\\ for one backslash)."
    where = f" (after {option.split('=')[0]})" if option else ""
    return (
        f"the options line has a {quote or 'quote'} quote that is not closed{where}: close it, as in "
        '--system "Be brief", or put a quote inside the other kind (\'say "hi"\').'
    )


def start_view(display: Any) -> None:
    """Show the live view now and keep it fresh during stalls (its refresh thread), in a kernel."""
    start = getattr(display, "start", None)
    if start is not None:
        start()


def in_kernel() -> bool:
    from .._display.notebook import in_kernel as in_a_kernel

    return in_a_kernel()


def show_attachments(stream: Any) -> None:
    """Above the answer, the images and files its prompt carried (``_render/attachments.py``):
    thumbnails and links in a notebook, one line of names in a terminal. Nothing if none."""
    from .._render.attachments import attachments_html, attachments_text

    users = [m for m in stream.request.get("messages", []) if m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    text = attachments_text(content)
    if not text:
        return
    if not in_kernel():
        print(text)
        return
    from IPython.display import display

    sent = {key: attachment.part for key, attachment in stream._resend.items()}
    display({"text/html": attachments_html(content, sent), "text/plain": text}, raw=True)
