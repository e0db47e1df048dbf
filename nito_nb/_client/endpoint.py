"""Where a call goes and with which key: the base URL, the embedded simulator, the API key.

No I/O: the environment is read per call (so that a changed ``NITO_BASE_URL`` or ``NITO_API_KEY``
applies at once), the simulator is started by what the package root registers.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

from .._core.errors import ConfigurationError

__all__ = [
    "DEFAULT_BASE_URL",
    "base_url_of",
    "checked_key",
    "endpoint",
    "find_key",
    "is_embedded",
    "is_nito",
    "register_simulator",
    "simulator_apart",
    "use_simulator",
]

DEFAULT_BASE_URL = "https://api.trynito.ai/v1"


# -- the embedded simulator: passed in, never imported here ------------------------------------

#: Starts the embedded simulator if needed and returns its base URL. The package root registers it
#: (``nito_nb/__init__.py``): the client sits below the simulator and never imports it.
_simulator: Callable[[], str] | None = None
#: The same in a process of its own: returns (base URL, whether it is apart: False where it could
#: not start and the in-process one serves instead).
_apart: Callable[[], tuple[str, bool]] | None = None
#: Where the ``sim/`` models of this context go (a Run's tasks: the simulator apart), resolved
#: once for the run, not per request; None: ``_simulator()``.
_simulator_here: contextvars.ContextVar[str | None] = contextvars.ContextVar("nito_nb_simulator", default=None)


def register_simulator(start: Callable[[], str] | None, apart: Callable[[], tuple[str, bool]] | None = None) -> None:
    """Where ``sim/...`` models without a base URL are sent: ``start()`` returns a base URL;
    ``apart()`` the base URL of one in a process of its own (see :func:`simulator_apart`)."""
    global _simulator, _apart
    _simulator, _apart = start, apart


@contextlib.contextmanager
def simulator_apart() -> Iterator[str | None]:
    """Within it (this thread's or task's context, and the tasks it starts), ``sim/`` models go to
    the simulator in a process of its own, started now: a Run's measure must not include the
    simulator's work on its own loop (``nito_nb/sim/_apart.py``). Yields that simulator's base
    URL, or None where it could not start (the in-process one serves instead)."""
    url = None
    if _apart is not None:
        found, separate = _apart()
        url = found if separate else None
    token = _simulator_here.set(url)
    try:
        yield url
    finally:
        _simulator_here.reset(token)


def use_simulator(url: str | None) -> None:
    """From now on in this context (a task and those it starts), ``sim/`` models go to ``url``
    (what :func:`simulator_apart` yielded for a whole run; None: the registered simulator)."""
    _simulator_here.set(url)


# -- the base URL --------------------------------------------------------------------------------


def base_url_of(configured: str | None) -> str:
    """The base URL given in code, else ``NITO_BASE_URL``, else Nito's (no trailing slash)."""
    return (configured or os.environ.get("NITO_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def shown_url(url: str) -> str:
    """``url`` as it may be shown or saved: a user name and password in it (``https://user:pass@host``,
    which httpx sends as Basic auth) become ``[redacted]``. The one rule for every message, repr
    and saved request that names a base URL; the call itself uses the URL as given."""
    split = urllib.parse.urlsplit(url)
    if "@" not in split.netloc:
        return url
    return urllib.parse.urlunsplit(split._replace(netloc="[redacted]@" + split.netloc.rpartition("@")[2]))


def is_embedded(model: str, base_url: str | None) -> bool:
    """``sim/`` models go to the embedded simulator unless a base URL was given in code (``base_url``:
    the call's, else the client's)."""
    return model.startswith("sim/") and not base_url


def endpoint(model: str, base_url: str | None) -> str:
    """The base URL of a call (``base_url``: the call's, else the client's)."""
    if is_embedded(model, base_url):
        if _simulator is None:
            raise ConfigurationError(
                f"{model!r} runs on the embedded simulator, which is not available here: "
                "import nito_nb (it registers it), or pass base_url=... of a running one."
            )
        return (_simulator_here.get() or _simulator()).rstrip("/")
    url = base_url_of(base_url)
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"base_url must start with http:// or https://, got {url!r}")
    return url


def is_nito(url: str) -> bool:
    """True for Nito's own gateway, the only one that needs a key: an OpenAI-compatible server of
    one's own (vLLM, Ollama, llama.cpp, ``python -m nito_nb.sim``) may need none."""
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    return host == "trynito.ai" or host.endswith(".trynito.ai")


# -- the key ---------------------------------------------------------------------------------------


def find_key(api_key: str | None, client_key: str | None) -> str | None:
    """The key of a call (the argument, else the client's, else ``NITO_API_KEY``), checked."""
    if api_key:
        return checked_key(api_key, "the api_key argument")
    if client_key:
        return checked_key(client_key, "the client's api_key")
    key = os.environ.get("NITO_API_KEY")
    return checked_key(key, "NITO_API_KEY") if key else None


def checked_key(key: Any, source: str) -> str:
    """``key`` if it can go in an ``Authorization`` header as it is, else a ConfigurationError
    that says what is wrong with it and never shows it (nor any part of it).

    httpx would otherwise print the whole header in its error (``Illegal header value b'Bearer
    sk-...\\n'``), or fail with a bare UnicodeEncodeError.
    """
    if not isinstance(key, str):
        raise ConfigurationError(f"{source} must be a string, not {type(key).__name__}")
    if key.endswith(("\n", "\r")):
        problem = "ends with a newline (as when it is read from a file)"
    elif key != key.strip():
        problem = "starts or ends with whitespace"
    elif any(char.isspace() for char in key):
        problem = "contains whitespace"
    elif not key.isascii():
        problem = "contains a non-ASCII character (a typographic quote, dash or space from copying it?)"
    elif not key.isprintable():
        problem = "contains a control character"
    else:
        return key
    raise ConfigurationError(
        f"The API key from {source} {problem}: set it again with the key's characters only. "
        "(The key is not shown.)"
    )
