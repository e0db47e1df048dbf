"""The plan of a run: prompts × models × repeats → requests, each with a stable key. Pure.

A template is filled with the magic's safe interpolation (``_interpolate.interpolate``), never
``str.format``: a DataFrame's columns (or ``{value}`` for a list or Series) are the namespace.
A ``{name}`` that is not a column is an error here, before anything is sent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._client import as_messages
from .._client.request_check import checked_counts
from .._core.attachments import PlannedImage, keyed_messages
from .._core.counts import whole
from .._core.errors import ConfigurationError
from .._interpolate import interpolate

__all__ = ["Plan", "Request", "missing_fields", "plan", "request_key"]

#: Characters of the hex digest kept as a key: 80 bits, no collision in any plausible store.
KEY_CHARS = 20


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a run."""

    key: str
    row: Any  # the input's index label (0, 1... for a string or a list)
    model: str
    repeat: int
    messages: list[dict[str, Any]]
    params: dict[str, Any]
    #: its row's images (``images=``), read again where it is sent; the key hashes their bytes
    images: tuple[PlannedImage, ...] = ()

    @property
    def call(self) -> dict[str, Any]:
        """The keywords of its ``stream()`` call besides the messages and the model: its body's
        parameters, and its images (a worker process reads them where it sends)."""
        return {**self.params, "images": list(self.images)} if self.images else self.params


@dataclass(frozen=True, slots=True)
class Plan:
    """The distinct requests to send, and every (row label, model, repeat, key) of the input,
    duplicates included (two rows with the same text share one request); ``inputs``: each
    request's input row (a DataFrame's columns; ``value`` and a Series' name for a list or a
    Series), by key, that a run's scores read (docs/SCORES.md). Two rows that share a request
    share the first one's."""

    requests: list[Request]
    cells: list[tuple[Any, str, int, str]]
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)


def request_key(
    model: str, messages: list[dict[str, Any]], params: Mapping[str, Any], repeat: int
) -> str:
    """A hash of what is sent: the same request has the same key in every process and session."""
    text = json.dumps(
        [model, messages, dict(params), repeat],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:KEY_CHARS]


class _Recorder(Mapping[str, Any]):
    """A namespace that remembers the names a template asks for and does not have."""

    def __init__(self, names: Sequence[str]) -> None:
        self._names = set(names)
        self.missing: list[str] = []

    def __contains__(self, name: object) -> bool:
        if name in self._names:
            return True
        if isinstance(name, str) and name not in self.missing:
            self.missing.append(name)
        return False

    def __getitem__(self, name: str) -> Any:
        return ""  # a value to format or slice: only the names matter here

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def missing_fields(template: str, names: Sequence[str]) -> list[str]:
    """The ``{name}`` fields of ``template`` that ``names`` do not provide (in order of use)."""
    recorder = _Recorder(names)
    interpolate(template, recorder)
    return recorder.missing


def _prompts(prompts: Any, template: str | None) -> list[tuple[Any, Any, dict[str, Any]]]:
    """(row label, prompt: a string or a message list, the row's columns) for every input row."""
    if template is not None and not isinstance(template, str):
        raise ConfigurationError(
            f"template= is a string with {{fields}}, like 'Summarise: {{text}}', not {template!r}"
        )
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(prompts, pd.DataFrame):
        if template is None:
            raise ConfigurationError(
                "a DataFrame needs template=..., e.g. template='Summarise: {text}' (its columns fill the {fields})"
            )
        columns = [str(c) for c in prompts.columns]
        _check(
            template, columns, "column", f"the DataFrame has {', '.join(columns) or 'no columns'}"
        )
        rows = []
        for label, record in zip(prompts.index, prompts.to_dict("records"), strict=True):
            values = {str(k): v for k, v in record.items()}
            rows.append((label, interpolate(template, values), values))
        return rows
    if pd is not None and isinstance(prompts, pd.Series):
        items = list(zip(prompts.index, prompts.tolist(), strict=True))
        name = (
            str(prompts.name)
            if prompts.name is not None and str(prompts.name).isidentifier()
            else None
        )
    elif isinstance(prompts, str) or (
        isinstance(prompts, (list, tuple)) and prompts and all(isinstance(m, dict) for m in prompts)
    ):
        items, name = [(0, prompts)], None  # one prompt, or one conversation
    elif isinstance(prompts, (list, tuple)):
        items, name = list(enumerate(prompts)), None
    else:
        raise ConfigurationError(
            "prompts must be a string, a list of strings or message lists, a pandas Series, or a "
            f"DataFrame with template=..., not {type(prompts).__name__}"
        )
    if not items:
        raise ConfigurationError("no prompts: the input is empty")
    names = ["value", *([name] if name else [])]
    if template is None:
        return [(label, value, {n: value for n in names}) for label, value in items]
    _check(
        template,
        names,
        "field",
        "a list or a Series fills {value}" + (f" and {{{name}}}" if name else ""),
    )
    rows = []
    for label, value in items:
        if not isinstance(value, str):
            raise ConfigurationError(
                f"template= fills strings; row {label!r} is a {type(value).__name__} (send message "
                "lists without a template)"
            )
        values = {n: value for n in names}
        rows.append((label, interpolate(template, values), values))
    return rows


def _check(template: str, names: Sequence[str], what: str, have: str) -> None:
    missing = missing_fields(template, names)
    if missing:
        fields = ", ".join("{" + m + "}" for m in missing)
        raise ConfigurationError(
            f"the template asks for {fields}: no such {what} ({have}); write {{{{ and }}}} for literal braces"
        )


def plan(
    prompts: Any,
    *,
    template: str | None,
    models: Sequence[str],
    repeats: int,
    params: Mapping[str, Any],
    system: str | None = None,
    images: Sequence[tuple[PlannedImage, ...]] | None = None,
) -> Plan:
    """Every prompt × model × repeat, in that order (row-major: a row's models are together).

    The same request twice (two rows with the same text, say) has one key and is sent once.
    ``images``: each row's (``_runs/images.py``), in the input's order; the key hashes their
    descriptors (the bytes' sha256), so a changed image is a new request.
    """
    repeats = whole("repeats", repeats)
    if not models or not all(isinstance(m, str) and m for m in models):
        raise ConfigurationError(
            "model= is required: a model id or a list of them, e.g. model=['sim/chat']"
        )
    # Counts as ints before the JSON below: max_tokens=np.int64(256) is taken, with the key of 256.
    params = checked_counts({k: v for k, v in params.items() if v is not None})
    for name, value in params.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise ConfigurationError(
                f"the parameter {name}= is not JSON ({type(value).__name__}): body parameters are sent as JSON"
            ) from None
    requests: list[Request] = []
    cells: list[tuple[Any, str, int, str]] = []
    seen: set[str] = set()
    inputs: dict[str, dict[str, Any]] = {}
    for index, (label, prompt, columns) in enumerate(_prompts(prompts, template)):
        messages = as_messages(prompt)
        if system:
            messages = [{"role": "system", "content": system}, *messages]
        row_images = images[index] if images is not None else ()
        keyed = keyed_messages(messages, [image.descriptor for image in row_images])
        for model in models:
            for repeat in range(repeats):
                key = request_key(model, keyed, params, repeat)
                cells.append((label, model, repeat, key))
                if key in seen:
                    continue
                seen.add(key)
                inputs[key] = columns
                requests.append(Request(key, label, model, repeat, messages, params, row_images))
    return Plan(requests, cells, inputs)
