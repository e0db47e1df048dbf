"""The shape of a request's messages: the one rule for turning what a caller passes into them;
and how several models are named in one string."""

from __future__ import annotations

from typing import Any

from .errors import ConfigurationError

__all__ = ["as_messages", "model_names"]


def model_names(value: str) -> list[str]:
    """The models of ``"a,b"``: comma-separated ids, stripped, empty ones dropped. The one rule
    of ``%%nito -m a,b`` and of ``nito_nb.run(model="a,b")`` (there it was one literal model name,
    sent to the gateway and refused)."""
    return [name.strip() for name in value.split(",") if name.strip()]


def as_messages(prompt_or_messages: Any) -> list[dict[str, Any]]:
    """A string becomes one user message; a list of message dicts is taken as it is."""
    if isinstance(prompt_or_messages, str):
        return [{"role": "user", "content": prompt_or_messages}]
    if isinstance(prompt_or_messages, dict):
        return [prompt_or_messages]
    if isinstance(prompt_or_messages, (list, tuple)) and all(
        isinstance(m, dict) for m in prompt_or_messages
    ):
        return list(prompt_or_messages)
    what = type(prompt_or_messages).__name__
    # "not list" said nothing of what was wrong in it
    if isinstance(prompt_or_messages, (list, tuple)):
        odd = next(m for m in prompt_or_messages if not isinstance(m, dict))
        what = f"a {what} holding a {type(odd).__name__} ({odd!r:.40})"
        if isinstance(odd, str):
            what += "; for several prompts, one request each, use nito_nb.run"
    raise ConfigurationError(
        "the prompt must be a string or a list of messages like "
        '[{"role": "user", "content": "..."}], not ' + what
    )
