"""Where a call goes and with which key: the base URL, the embedded simulator, the API key.

No I/O: the environment is read per call (so that a changed ``NITO_BASE_URL`` or ``NITO_API_KEY``
applies at once), the simulator is started by what the package root registers. A call to the
embedded simulator carries the simulator's own token, never ``NITO_API_KEY``.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import re
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import httpx

from .._core.credentials import is_credential_parameter
from .._core.errors import REDACTED, ConfigurationError

__all__ = [
    "DEFAULT_BASE_URL",
    "Simulator",
    "api_url",
    "base_url_of",
    "checked_base_url",
    "checked_key",
    "embedded_simulator",
    "endpoint",
    "find_key",
    "is_embedded",
    "is_nito",
    "register_simulator",
    "shown_origin",
    "shown_url",
    "simulator_apart",
    "target",
    "use_simulator",
]

DEFAULT_BASE_URL = "https://api.trynito.ai/v1"


# -- the embedded simulator: passed in, never imported here ------------------------------------


class Simulator(NamedTuple):
    """An embedded simulator: its base URL, and the token it asks for (sent as the call's key,
    never shown: not in this repr; it crosses to a Run's workers with the URL, pickled, never on
    a command line)."""

    base_url: str
    token: str | None = None

    def __repr__(self) -> str:
        return f"Simulator(base_url={self.base_url!r}, token={REDACTED if self.token else None})"


#: Starts the embedded simulator if needed and returns it. The package root registers it
#: (``nito_nb/__init__.py``): the client sits below the simulator and never imports it.
_simulator: Callable[[], Simulator] | None = None
#: The same in a process of its own: returns (the simulator, whether it is apart: False where it
#: could not start and the in-process one serves instead).
_apart: Callable[[], tuple[Simulator, bool]] | None = None
#: Where the ``sim/`` models of this context go (a Run's tasks: the simulator apart), resolved
#: once for the run, not per request; None: ``_simulator()``.
_simulator_here: contextvars.ContextVar[Simulator | None] = contextvars.ContextVar(
    "nito_nb_simulator", default=None
)


def register_simulator(
    start: Callable[[], Simulator] | None, apart: Callable[[], tuple[Simulator, bool]] | None = None
) -> None:
    """Where ``sim/...`` models without a base URL are sent: ``start()`` returns the simulator
    (base URL and token); ``apart()`` one in a process of its own (see :func:`simulator_apart`)."""
    global _simulator, _apart
    _simulator, _apart = start, apart


@contextlib.contextmanager
def simulator_apart() -> Iterator[Simulator | None]:
    """Within it (this thread's or task's context, and the tasks it starts), ``sim/`` models go to
    the simulator in a process of its own, started now: a Run's measure must not include the
    simulator's work on its own loop (``nito_nb/sim/_process.py``). Yields that simulator, or None
    where it could not start (the in-process one serves instead)."""
    found = None
    if _apart is not None:
        simulator, separate = _apart()
        found = simulator if separate else None
    before = _simulator_here.set(found)
    try:
        yield found
    finally:
        _simulator_here.reset(before)


def use_simulator(simulator: Simulator | None) -> None:
    """From now on in this context (a task and those it starts), ``sim/`` models go to
    ``simulator`` (what :func:`simulator_apart` yielded for a whole run; None: the registered
    simulator)."""
    _simulator_here.set(simulator)


def embedded_simulator(model: str) -> Simulator:
    """The simulator that serves ``model`` (a ``sim/`` model without a base URL) here: this
    context's (a Run's), else the registered one, started if need be."""
    here = _simulator_here.get()
    if here is not None:
        return here
    if _simulator is None:
        raise ConfigurationError(
            f"{model!r} runs on the embedded simulator, which is not available here: "
            "import nito_nb (it registers it), or pass base_url=... of a running one."
        )
    return _simulator()


# -- the base URL --------------------------------------------------------------------------------

#: How a base URL should look, in every message that refuses one.
URL_EXAMPLE = '"https://host/v1"'


def base_url_of(configured: Any) -> str:
    """The base URL given in code, else ``NITO_BASE_URL``, else Nito's (no trailing slash), checked
    (:func:`checked_base_url`): the environment is read per call, so it is checked per call."""
    if configured is not None and configured != "":  # "" is "not given", as None
        return checked_base_url(configured, "base_url")
    env = os.environ.get("NITO_BASE_URL")
    if env:
        return checked_base_url(env, "NITO_BASE_URL")
    return DEFAULT_BASE_URL


def checked_base_url(url: Any, source: str) -> str:
    """``url`` without its trailing slash if a request can be sent to it, else a
    ConfigurationError that names ``source`` (``base_url``, ``NITO_BASE_URL``, ``Nito.base_url``)
    and shows the URL as :func:`shown_url` does. The one check of a base URL: the clients (made,
    and per call), ``models()`` and the magic's setting all come here.

    Without it a wrong type failed on ``rstrip`` (AttributeError), a URL that does not parse
    failed deep inside httpx when the request was built (InvalidURL) or in ``urllib`` (ValueError),
    and a password with a "/" in it was shown in part in the parser's error, or (when what came
    before the "/" was a number) the request went to a host named like its user.
    """
    if not isinstance(url, str):
        raise ConfigurationError(
            f"{source} must be a URL string like {URL_EXAMPLE}, not {type(url).__name__}."
        )
    problem = _url_problem(url)
    if problem:
        raise ConfigurationError(f"{source} {shown_url(url)!r} {problem}.")
    return url.rstrip("/")


@functools.lru_cache(maxsize=256)
def _url_problem(url: str) -> str | None:
    """What makes ``url`` unusable as a base URL, or None. Cached: every request of a run checks
    its base URL (the environment may have changed), and parsing it each time is not free. Each
    problem ends with what to do."""
    if _MISREAD_USERINFO.match(url):
        # Which of the three characters it is would tell something of the password: none is named.
        return (
            'has a "/", "?" or "#" in its password, which ends the host there: percent-encode it '
            '("/" as %2F, "?" as %3F, "#" as %23), or better, take the password out of the URL and '
            'pass the key as api_key=... or NITO_API_KEY (no password: write the "@" after the port as %40)'
        )
    example = f"give a URL like {URL_EXAMPLE}"
    if _parse_error(url) is not None:
        # The parser's words come from the URL with its secrets replaced, so that none can be
        # quoted in them (the marker without brackets, which urllib would read as an IPv6 host).
        return f"is not a valid URL ({_parse_error(_shown(url, 'redacted')) or 'it does not parse'}): {example}"
    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https"):
        return f"must start with http:// or https://: {example}"
    if not parsed.host:
        return f"has no host: {example}"
    if parsed.path.rstrip("/").endswith("/chat/completions"):  # the endpoint, pasted whole
        return (
            "ends in /chat/completions, which nito_nb adds to each call: give the base before it, "
            f"like {URL_EXAMPLE}"
        )
    return None


def _parse_error(url: str) -> str | None:
    """Why ``url`` does not parse, or None. Both parsers that read it must accept it: httpx, which
    builds the request, and the standard library's, which :func:`is_nito` uses (and which says
    "Invalid IPv6 URL" where httpx says "Invalid port: ':1'", and refuses a port over 65535)."""
    try:
        urllib.parse.urlsplit(url).port  # noqa: B018 - .port is where urllib checks the port
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as exc:
        return str(exc)
    return None


#: RFC 3986's expression for the parts of a URI (appendix B): scheme, authority, path, query,
#: fragment. It matches any string, so showing a URL never fails, even one that does not parse.
_URI = re.compile(
    r"(?P<scheme>[^:/?#]+:)?(?://(?P<authority>[^/?#]*))?(?P<path>[^?#]*)(?:\?(?P<query>[^#]*))?(?:#(?P<fragment>.*))?",
    re.DOTALL,
)

#: A user name and password whose password holds a "/", "?" or "#" as it is
#: (``https://user:pa/ss@host/v1``): both parsers end the host at that character, so the user name
#: was read as the host, the password's start as its port (a request went there when it was a
#: number) and the rest as the path, shown as it is. The ":" before it and the "@" after it are
#: what a password looks like; a host with a port and an "@" in its path or query
#: (``https://host:8443/@me``) looks the same and is read so: written %40, the "@" means the same.
#: (Each part ends where the next begins, so matching takes linear time whatever the URL.)
_MISREAD_USERINFO = re.compile(r"(?P<scheme>[^:/?#]+:)?//[^:/?#@]*:[^/?#@]*[/?#][^@]*@", re.DOTALL)


@functools.lru_cache(maxsize=256)
def shown_url(url: str) -> str:
    """``url`` as it may be shown, logged or saved: a user name and password in it
    (``https://user:pass@host``, which httpx sends as Basic auth; also one whose password holds a
    "/", "?" or "#" that the parsers take for the host's end, ``_MISREAD_USERINFO``) and the
    values of query (or fragment) parameters named like a credential (``?api-key=...``,
    ``?token=...``, ``?sig=...``) become ``[redacted]``. The one rule for every message, repr,
    log and saved request that names a base URL; the call itself uses the URL as given. Kept for
    the URLs seen last: every request's record names its base URL (a run's, the same each time)."""
    return _shown(url, REDACTED)


def shown_origin(url: str) -> str:
    """Where an absolute ``url`` points and nothing of what it asks there: its scheme, host and
    port as :func:`shown_url` shows them (a user name and password redacted), without its path,
    query or fragment. For a URL that someone else chose (a redirect's ``Location``), whose path or
    query may hold a credential, a signed URL's token."""
    parts = _URI.fullmatch(shown_url(url))
    scheme, authority = ("", "") if parts is None else parts.group("scheme", "authority")
    return f"{scheme or ''}//{authority or ''}"


def _shown(url: str, marker: str) -> str:
    misread = _MISREAD_USERINFO.match(url)
    if misread:  # its user name and password end at that "@", not where the parsers end the host
        url = f"{misread['scheme'] or ''}//{marker}@{url[misread.end() :]}"
    elif "@" in url and "://" not in url:  # no scheme (``user:secret@host/v1``, refused): the
        # parsers take "user:" for a scheme and the rest for a path, so nothing before its last
        # "@" is shown, whatever it is
        return f"{marker}@{url.rpartition('@')[2]}"
    parts = _URI.fullmatch(url)
    if parts is None:  # cannot happen (every part is optional): show nothing rather than a secret
        return marker
    scheme, authority, path, query, fragment = parts.group(
        "scheme", "authority", "path", "query", "fragment"
    )
    shown = scheme or ""
    if authority is not None:
        shown += "//" + (
            f"{marker}@" + authority.rpartition("@")[2] if "@" in authority else authority
        )
    shown += path
    if query is not None:
        shown += "?" + _shown_parameters(query, marker)
    if fragment is not None:  # never sent, but an OAuth redirect's #access_token= is one too
        shown += "#" + _shown_parameters(fragment, marker)
    return shown


def _shown_parameters(query: str, marker: str) -> str:
    return "&".join(_shown_parameter(item, marker) for item in query.split("&"))


def _shown_parameter(item: str, marker: str) -> str:
    name, eq, _ = item.partition("=")
    if eq and is_credential_parameter(name):
        return f"{name}={marker}"
    return item


def api_url(base_url: str, path: str) -> str:
    """The URL of ``path`` (``/chat/completions``, ``/models``) under ``base_url``, before the
    base URL's query: Azure OpenAI's deployments take ``?api-version=...`` on every call, and
    ``f"{base_url}{path}"`` put the path inside the query (``/v1?api-version=1/chat/completions``
    went to ``/v1``). The one rule for every call's URL."""
    base, sep, query = base_url.partition("?")
    if not sep:
        return base_url + path
    return f"{base.rstrip('/')}{path}?{query}"


def is_embedded(model: str, base_url: str | None) -> bool:
    """``sim/`` models go to the embedded simulator unless a base URL was given in code (``base_url``:
    the call's, else the client's)."""
    return model.startswith("sim/") and not base_url


def endpoint(model: str, base_url: str | None) -> str:
    """The base URL of a call (``base_url``: the call's, else the client's), checked."""
    return target(model, base_url)[0]


def target(model: str, base_url: str | None) -> tuple[str, Simulator | None]:
    """(the base URL of a call, checked; the embedded simulator it goes to, whose token it sends,
    or None for a gateway)."""
    # a falsy one (0, []) is no "not given"
    if base_url is not None and not isinstance(base_url, str):
        checked_base_url(base_url, "base_url")
    if is_embedded(model, base_url):
        simulator = embedded_simulator(model)
        return simulator.base_url.rstrip("/"), simulator
    return base_url_of(base_url), None


def is_nito(url: str) -> bool:
    """True for Nito's own gateway, the only one that needs a key: an OpenAI-compatible server of
    one's own (vLLM, Ollama, llama.cpp, ``python -m nito_nb.sim``) may need none."""
    try:
        host = (urllib.parse.urlsplit(url).hostname or "").lower()
    except ValueError:  # not a URL (checked_base_url says why where it matters): not Nito's
        return False
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
    elif len(key.split()) > 1:  # stripped already: a split finds what isspace() would
        problem = "contains whitespace"
    elif not key.isascii():
        problem = (
            "contains a non-ASCII character (a typographic quote, dash or space from copying it?)"
        )
    elif not key.isprintable():
        problem = "contains a control character"
    else:
        return key
    raise ConfigurationError(
        f"The API key from {source} {problem}: set it again with the key's characters only. "
        "(The key is not shown.)"
    )
