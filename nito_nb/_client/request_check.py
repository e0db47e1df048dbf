"""Checking a request body before it is sent: one clear line for a request that cannot be right.

No I/O. Used by ``Client``/``AsyncClient`` (``BaseClient._build``) and by ``%%nito`` and its
``%config Nito.params`` check, which turn the error into a one-line UsageError.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._core.counts import whole
from .._core.errors import ConfigurationError
from .._core.spelling import did_you_mean
from .._core.tool_schemas import tool_schemas
from .request_fields import REQUEST_FIELDS

__all__ = ["check_keywords", "check_request", "checked_counts", "keyword_options"]

#: The known fields in one fixed order: a tie between two suggestions never depends on the hash seed.
_FIELDS = tuple(sorted(REQUEST_FIELDS))

#: Names that are not body fields: a parameter of that name would clash with how the call is made.
_NOT_PARAMS = {
    "model": "the model is chosen with model=... (in %%nito: -m MODEL), not as a parameter",
    "messages": "the messages are the prompt (the first argument, or the %%nito cell), not a parameter",
    "stream": "nito_nb always streams: leave stream out",
    "api_key": "the API key is not a body field: it comes from NITO_API_KEY or api_key=...",
    "base_url": "the base URL is not a body field: use base_url=... or NITO_BASE_URL",
    "timeout": "the timeout is not a body field: use timeout=... (in %%nito: %config Nito.timeout)",
    "raise_errors": "raise_errors is not a body field",
}
#: Documented fields with a domain (OpenAI's chat completions reference): a value outside it is a
#: mistake to report here, in one line, rather than an HTTP 400 from the gateway or, worse, a
#: request sent with a meaning the user did not intend.
_NUMBERS = {  # name: (lowest, highest); None is no bound (providers differ above 0)
    "temperature": (0.0, None),
    "top_p": (0.0, 1.0),
    "presence_penalty": (None, None),
    "frequency_penalty": (None, None),
}
_COUNTS = ("max_tokens", "max_completion_tokens", "n")  # whole numbers >= 1
_OBJECTS = ("response_format", "reasoning", "stream_options", "metadata", "logit_bias", "sim")
_LISTS = ("tools",)


def check_request(messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    """Refuse, before anything is sent, a request that cannot mean what the caller wants.

    The one check of a request body, used by ``Client``/``AsyncClient`` and by ``%%nito`` (which
    turns the error into a one-line UsageError): parameters named like a call argument, documented
    fields of the wrong type or out of range, and anything JSON cannot carry (NaN and infinities,
    lone surrogates such as ``"\\udcff"``, objects JSON does not know). Raises ConfigurationError.
    Returns ``params`` as they are to be sent: a count given as a numpy integer is an ``int`` there.
    """
    checked = dict(params)
    for name, value in params.items():
        if name in _NOT_PARAMS:  # the value is not shown: an api_key given here is a secret
            raise ConfigurationError(f"{name}: {_NOT_PARAMS[name]}.")
        if value is None:
            continue
        if name in _NUMBERS:
            low, high = _NUMBERS[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigurationError(f"{name} must be a number, not {_shown(value)}.")
            if (
                not math.isfinite(value)
                or (low is not None and value < low)
                or (high is not None and value > high)
            ):
                if low is None:
                    domain = "a finite number"
                else:
                    domain = f"a number from {low:g}" + (
                        f" to {high:g}" if high is not None else ""
                    )
                raise ConfigurationError(f"{name} must be {domain}, not {_shown(value)}.")
        elif name in _COUNTS:
            checked[name] = whole(name, value)
        elif name == "top_logprobs":  # issue 33: the alternatives listed per token (0: none)
            checked[name] = whole(name, value, at_least=0)
        elif name == "logprobs" and not isinstance(value, bool):
            raise ConfigurationError(f"logprobs must be True or False, not {_shown(value)}.")
        elif name in _OBJECTS and not isinstance(value, dict):
            raise ConfigurationError(f"{name} must be an object (a dict), not {_shown(value)}.")
        elif name in _LISTS and not isinstance(value, (list, tuple)):
            raise ConfigurationError(f"{name} must be a list, not {_shown(value)}.")
        if name == "tools":
            checked[name] = _tools(value)
    if checked.get("top_logprobs") is not None and checked.get("logprobs") is not True:
        raise ConfigurationError(
            "top_logprobs needs logprobs=True (add logprobs=True, or leave top_logprobs out)."
        )
    _check_json(messages, "messages")
    for name, value in checked.items():
        _check_json(value, name)
    return checked


def check_keywords(params: Mapping[str, Any], options: Iterable[str], call: str) -> None:
    """Refuse a keyword that is a slip of an option of ``call`` or of a request field nito_nb knows
    (``temprature=``, ``concurency=``): sent as it is, it would be a body field the gateway ignores,
    or a whole batch run at the default. A name far from every known one is still sent (gateways
    have fields of their own); the rule of "a slip" is ``_core/spelling.py``'s. Raises
    ConfigurationError with "Did you mean"."""
    known: tuple[str, ...] | None = None
    for name in params:
        if name in REQUEST_FIELDS:
            continue
        if known is None:
            known = (*options, *_FIELDS)  # the call's own options win a tie
        hint = did_you_mean(name, known, "{}=")
        if hint:
            where = f"{call}: " if call else ""
            raise ConfigurationError(f"{where}no option or request field is named {name}=.{hint}")


@functools.cache
def keyword_options(function: Callable[..., Any]) -> tuple[str, ...]:
    """The named keywords ``function`` takes (not its ``**params``): the options of a call, read
    from its signature so that the list of :func:`check_keywords` is never out of date."""
    return tuple(
        name
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD)
        and name not in ("self", "prompt_or_messages", "prompts")
    )


def checked_counts(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with its counts checked, as ``int``, and its ``tools`` as JSON (a Python function
    made its schema): for a caller that needs them as JSON before :func:`check_request` runs (a
    run's plan hashes each request's parameters into its key)."""
    return {
        name: whole(name, value)
        if name in _COUNTS and value is not None
        else _tools(value)
        if name == "tools" and value is not None
        else value
        for name, value in params.items()
    }


def _tools(value: Any) -> list[dict[str, Any]]:
    """The request's ``tools``: Python functions become their schema (``_core/tool_schemas.py``,
    the builder of ``%%nito --tools`` and ``ChatWidget(tools=...)``), JSON tools stay as given."""
    if not isinstance(value, (list, tuple)):
        raise ConfigurationError(f"tools must be a list, not {_shown(value)}.")
    try:
        return tool_schemas(value)
    except ValueError as exc:
        raise ConfigurationError(f"{exc}.") from None


def _check_json(value: Any, where: str) -> None:
    """What httpx's strict JSON encoding (no NaN, UTF-8) would refuse, named by its place."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")  # C speed: a long prompt is not scanned in Python
        except UnicodeEncodeError as exc:
            bad = exc.start
            raise ConfigurationError(
                f"{where} holds a lone surrogate {value[bad]!r} at character {bad} (text decoded with "
                "errors='surrogateescape', or cut inside a pair), which UTF-8 cannot carry: fix the "
                "text, e.g. text.encode('utf-8', 'replace').decode('utf-8')."
            ) from None
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError(f"{where} is {value!r}: JSON carries only finite numbers.")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigurationError(
                    f"{where} has a key {key!r}: JSON object keys are strings."
                )
            _check_json(key, f"{where} key")
            _check_json(item, f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_json(item, f"{where}[{index}]")
    elif not (value is None or isinstance(value, (bool, int))):
        raise ConfigurationError(
            f"{where} is a {type(value).__name__}, which JSON cannot carry: give strings, numbers, "
            "booleans, None, lists and dicts."
        )


def _shown(value: Any) -> str:
    text = repr(value)
    return (text[:60] + "…") if len(text) > 60 else text
