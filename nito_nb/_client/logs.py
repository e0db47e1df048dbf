"""The key, taken out of what httpx and httpcore log.

With ``logging.basicConfig(level=logging.DEBUG)`` httpcore logs every step of a request, and
with it the response's headers as they came (``receive_response_headers.complete
return_value=(..., [(b'x-echo', b'Bearer sk-...')])``): a gateway that echoes the key in a
header put it in the notebook's log. (httpcore does not log the request's headers, nor a body's
bytes; hpack, for HTTP/2, logs headers it encodes and decodes.) So the loggers of those libraries
get a filter that redacts, from each record they emit, every key a nito_nb Stream is protecting
(``_core.errors.redact``, the one rule: as it is, JSON-escaped, percent-encoded). A logger's
filter runs only for the records it emits, so it costs nothing while their level is off.

Which keys: those of the Streams alive (:func:`protect_in_logs`, held weakly: a key leaves the
filter with the last Stream that carried it), and ``NITO_API_KEY``.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref

from .._core.errors import Secret, redact

__all__ = ["LOGGERS", "protect_in_logs"]

#: The loggers that can show what a server sent back: nito_nb's own (``_transport/direct.py``),
#: httpx's, httpcore's (one per module: a filter is not inherited by a logger's children), hpack's;
#: and httpx2's and httpcore2's, which a capturing httpx2 client uses (naming a logger imports
#: nothing).
LOGGERS = (
    "nito_nb.http",
    "httpx",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "hpack.hpack",
    "hpack.table",
    "httpx2",
    "httpcore2.connection",
    "httpcore2.http11",
    "httpcore2.http2",
    "httpcore2.proxy",
    "httpcore2.socks",
)

_secrets: weakref.WeakSet[Secret] = weakref.WeakSet()
_lock = threading.Lock()  # a Stream made in one thread while another thread's record is filtered


def protect_in_logs(secret: Secret | None) -> None:
    """Take ``secret`` out of those libraries' log records while it is alive."""
    if secret is not None:
        with _lock:
            _secrets.add(secret)


class _RedactedKeys(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        with _lock:
            secrets = {secret.value: secret for secret in list(_secrets)}
        from_env = Secret.of(os.environ.get("NITO_API_KEY"))
        if from_env is not None:
            secrets.setdefault(from_env.value, from_env)
        if not secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a record that cannot be formatted: the handler says so, not this filter
            return True
        shown = message
        for secret in secrets.values():
            shown = redact(shown, secret)
        if shown != message:  # the message as it will be shown, with its arguments in it
            record.msg, record.args = shown, None
        return True


for _name in LOGGERS:  # once per logger, also after a reload of this module
    _logger = logging.getLogger(_name)
    if not any(type(f).__name__ == "_RedactedKeys" for f in _logger.filters):
        _logger.addFilter(_RedactedKeys())
