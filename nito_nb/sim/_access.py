"""Who may talk to a simulator: the Host it is addressed by, the type of a POST body, the key.

Standard library only, no I/O: the app (``_app.py``) hands in header values and the address the
connection arrived on, and gets back None (let it through) or the refusal to send; :func:`token`
is the key of the simulators nito_nb starts itself.

The three guards, and whom each keeps out:
- **Host.** A web page can make the user's browser send requests to a loopback port by pointing a
  DNS name of its own at 127.0.0.1 (DNS rebinding); the browser then sends ``Host: that-name``. A
  request is answered only when its Host is a loopback name (``localhost``), a loopback address
  (127.0.0.0/8, ``::1``) or the very address the connection arrived on: an address, never a
  name. So a simulator bound to a wildcard (``--host 0.0.0.0``) answers ``http://<its IP>:PORT``
  from another machine, but not a name that resolves to it.
- **Body type.** A page can POST ``text/plain`` (or a form, or a typeless body) to any URL without
  asking the server first (no CORS preflight); JSON needs the preflight, which the simulator never
  grants. A POST whose body is not ``application/json`` is refused before it is read.
- **Key.** Another local user can reach any loopback port. The simulators nito_nb starts for
  ``sim/`` models ask for a random key made for the process that started them (:func:`token`),
  which only nito_nb's own client sends (a Run's workers get it with the simulator's URL, never
  on a command line); ``python -m nito_nb.sim`` asks for its ``--api-key`` if given one.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import threading

from ._reply import ErrorReply, error_reply

__all__ = [
    "LOOPBACK_NAMES",
    "TOKEN_HINT",
    "host_refusal",
    "is_json",
    "key_refusal",
    "token",
    "type_refusal",
]

#: Where a client refused by a simulator that nito_nb started is told to find the key.
TOKEN_HINT = "the token of nito_nb.sim.token() in the Python process that started this simulator"

_token_lock = threading.Lock()
_token: str | None = None


def token() -> str:
    """The key the simulators that nito_nb starts for ``sim/`` models in this process ask for
    (``ensure_server``, ``ensure_process``): random, made on first use, the same until the
    process ends. nito_nb's own client sends it; give it to another client as its API key."""
    global _token
    with _token_lock:
        if _token is None:
            _token = secrets.token_urlsafe(32)
        return _token


#: Names that mean this machine without asking DNS (RFC 6761: resolvers and browsers keep them
#: on loopback), with and without the root's trailing dot.
LOOPBACK_NAMES = frozenset({"localhost", "localhost."})


def _host_part(host: str) -> str:
    """The host of a Host header without its port (``[::1]:8765`` -> ``::1``), lowercased."""
    host = host.strip().lower()
    if host.startswith("["):  # an IPv6 literal: the port, if any, follows the bracket
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        return host.partition(":")[0]
    return host  # no port, or a bare IPv6 address


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.partition("%")[0])  # without an IPv6 zone (fe80::1%eth0)
    except ValueError:
        return None


def host_allowed(host: str | None, local_address: str | None) -> bool:
    """Whether a request addressed to ``host`` (its Host header) may be answered, when its
    connection arrived on ``local_address`` (None: unknown)."""
    if not host:
        return (
            False  # HTTP/1.1 requires one (h11 refuses a request without it); 1.0 gets no exception
        )
    name = _host_part(host)
    if name in LOOPBACK_NAMES:
        return True
    address = _address(name)
    if address is None:
        return False  # a DNS name: what a rebinding page controls
    if address.is_loopback or (
        isinstance(address, ipaddress.IPv6Address)
        and address.ipv4_mapped
        and address.ipv4_mapped.is_loopback
    ):
        return True
    here = _address(local_address) if local_address else None
    return here is not None and here == address


def host_refusal(host: str | None, local_address: str | None) -> ErrorReply | None:
    """None when the Host may be answered, else a 403 that says which hosts are."""
    if host_allowed(host, local_address):
        return None
    return error_reply(
        403,
        "This simulator answers only requests addressed to localhost, a loopback address such as "
        "127.0.0.1, or the address it listens on (not a DNS name: a guard against DNS rebinding): "
        "use http://127.0.0.1:PORT/v1.",
    )


def is_json(content_type: str | None) -> bool:
    """Whether a body's Content-Type is JSON (``application/json``, with parameters or not)."""
    if not content_type:
        return False
    return content_type.partition(";")[0].strip().lower() == "application/json"


def type_refusal(content_type: str | None) -> ErrorReply | None:
    """None for a JSON body, else a 415 that says what to send."""
    if is_json(content_type):
        return None
    return error_reply(
        415, "The request body must be JSON: send it with `Content-Type: application/json`."
    )


def key_refusal(authorization: str | None, key: str | None, where: str) -> ErrorReply | None:
    """None when ``key`` is None or the ``Authorization`` header carries ``Bearer <key>``, else a
    401 that says where the key is (``where``, e.g. "nito_nb.sim.token() in the process that
    started it"). The comparison takes no longer for a key that is nearly right (``hmac``)."""
    if key is None:
        return None
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), key.encode()):
        return None
    what = "Invalid API key" if authorization else "Missing Authorization header"
    return error_reply(401, f"{what}: send `Authorization: Bearer <key>` with {where}.")
