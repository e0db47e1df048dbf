"""The ``Nito`` configurable: the magic's defaults and the checks of each setting.

``%config Nito.model = "..."``, ``c.Nito.x`` in ``ipython_config.py``, ``NITO_MODEL``. Every setting
with a domain is checked on assignment, so a wrong value is one line and the old value stays.
The API key is not a setting: it only ever comes from ``NITO_API_KEY``.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

from traitlets import Bool, CFloat, CInt, Dict, TraitError, Unicode, default, validate
from traitlets.config import Configurable

from .._core.attachments import DEFAULT_IMAGES_BACK
from .._core.errors import ConfigurationError
from .._core.spelling import did_you_mean
from .._display.throttle import MAX_RATE
from .._runs.store_open import DB_NAME

__all__ = [
    "REASONING_EFFORTS",
    "Nito",
    "format_or_raise",
    "save_problem",
    "settings_for",
    "store_problem",
]

REASONING_EFFORTS = ("low", "medium", "high")


class Nito(Configurable):
    """Defaults of the ``%%nito`` magic: ``%config Nito.model = "z-ai/glm-5.2"``, or
    ``c.Nito.model = ...`` in ``ipython_config.py``. The API key is not a setting: it comes from
    the ``NITO_API_KEY`` environment variable only, so no configuration display can show it."""

    model = Unicode(
        help="Model(s) when -m is not given; comma-separated for several (env NITO_MODEL)."
    ).tag(config=True)
    system = Unicode(None, allow_none=True, help="System prompt when --system is not given.").tag(
        config=True
    )
    temperature = CFloat(
        None, allow_none=True, help="Sampling temperature when --temperature is not given."
    ).tag(config=True)
    max_tokens = CInt(
        None, allow_none=True, help="Answer length limit when --max-tokens is not given."
    ).tag(config=True)
    reasoning = Unicode(
        None,
        allow_none=True,
        help="Reasoning effort (low, medium, high) when --reasoning is not given.",
    ).tag(config=True)
    history = CInt(
        20,
        help="Turns (a prompt and its answer) kept per --chat; older ones are dropped. 0: no limit.",
    ).tag(config=True)
    images_back = CInt(
        DEFAULT_IMAGES_BACK,
        help="Turns of a --chat whose images are sent again with the next prompt (1: the last "
        "turn's; 0: none); older ones become a note of what was sent.",
    ).tag(config=True)
    format = Unicode(
        "markdown", help="How the answer is shown: markdown, text, code or code:LANG."
    ).tag(config=True)
    max_rate = CFloat(MAX_RATE, help="Most display updates per second while streaming.").tag(
        config=True
    )
    base_url = Unicode(
        None,
        allow_none=True,
        help="Gateway URL (else NITO_BASE_URL, else Nito's). sim/ models then go there too.",
    ).tag(config=True)
    timeout = CFloat(
        None,
        allow_none=True,
        help="Seconds for each of connect, first byte, between chunks and write (default: the engine's).",
    ).tag(config=True)
    interpolate = Bool(
        True, help="Fill {name} / {expr.attr} / {In[3]} in prompts from the namespace."
    ).tag(config=True)
    params = Dict(help="Extra request body fields sent with every prompt, e.g. {'seed': 1}.").tag(
        config=True
    )
    store = Unicode(
        None,
        allow_none=True,
        help="A run store folder (nito_nb.open_store): every %%nito stream is also written there, "
        "and %nito history lists the streams stored by earlier kernels.",
    ).tag(config=True)

    def _load_config(self, cfg: Any, section_names: Any = None, traits: Any = None) -> None:
        # A name that is no setting (``%config Nito.tempreature = 0.2``): traitlets warns with
        # difflib's guess through warnings.warn, which shows IPython's file path and a line of its
        # source. One line instead, by nito_nb's one rule of a slip; the name is dropped from what
        # is loaded, so that it is neither merged into the config nor warned about again.
        known = self.traits(config=True) if traits is None else traits
        mine = cfg["Nito"] if isinstance(cfg, dict) and "Nito" in cfg else {}
        for name in [n for n in mine if n not in known and not n[:1].isupper()]:
            del mine[name]
            hint = (
                did_you_mean(name, sorted(known), "Nito.{}")
                or " See %config Nito for the settings."
            )
            print(f"nito: Nito has no setting {name!r}; it is ignored.{hint}", file=sys.stderr)
        super()._load_config(cfg, section_names, traits)

    @default("model")
    def _default_model(self) -> str:
        return os.environ.get("NITO_MODEL", "").strip() or "sim/chat"

    # Every setting with a domain is checked on assignment: a TraitError makes traitlets keep the
    # old value (it rolls back what it was loading), and %config prints its message on one line.

    @validate("model")
    def _check_model(self, proposal: Any) -> str:
        value = proposal["value"]
        names = [name.strip() for name in value.split(",")]
        if not all(names) or any(len(name.split()) != 1 for name in names):
            raise _refused(
                "model",
                "a model id, or several separated by commas (no spaces inside an id)",
                value,
            )
        return ",".join(names)

    @validate("format")
    def _check_format(self, proposal: Any) -> str:
        try:
            return format_or_raise(proposal["value"], ValueError)
        except ValueError as exc:
            raise TraitError(f"Nito.{exc}: the setting is unchanged.") from None

    @validate("reasoning")
    def _check_reasoning(self, proposal: Any) -> str | None:
        value = proposal["value"]
        if value not in (None, "", *REASONING_EFFORTS):
            raise _refused("reasoning", f"one of {', '.join(REASONING_EFFORTS)} (or None)", value)
        return value or None

    @validate("temperature", "max_tokens")
    def _check_body_field(self, proposal: Any) -> Any:
        name, value = proposal["trait"].name, proposal["value"]
        if value is not None:
            _check_params(name, {name: value})
        return value

    @validate("params")
    def _check_params(self, proposal: Any) -> dict[str, Any]:
        _check_params("params", proposal["value"])
        return proposal["value"]

    @validate("history")
    def _check_history(self, proposal: Any) -> int:
        if proposal["value"] < 0:
            raise _refused(
                "history", "a number of turns, 0 or more (0: no limit)", proposal["value"]
            )
        return proposal["value"]

    @validate("images_back")
    def _check_images_back(self, proposal: Any) -> int:
        if proposal["value"] < 0:
            raise _refused(
                "images_back", "a number of turns, 0 or more (0: none)", proposal["value"]
            )
        return proposal["value"]

    @validate("max_rate")
    def _check_rate(self, proposal: Any) -> float:
        value = proposal["value"]
        if not (math.isfinite(value) and value > 0):
            raise _refused("max_rate", "a positive number of updates per second", value)
        return float(value)

    @validate("timeout")
    def _check_timeout(self, proposal: Any) -> float | None:
        value = proposal["value"]
        if value is not None and not (math.isfinite(value) and value > 0):
            raise _refused(
                "timeout", "a positive number of seconds (or None for the engine's)", value
            )
        return value

    @validate("base_url")
    def _check_base_url(self, proposal: Any) -> str | None:
        # The client's own check (one rule for every path): a URL that does not parse was taken,
        # or refused only after changing the setting (urllib's ValueError escaped the validator).
        from .._client import checked_base_url

        value = proposal["value"]
        if not value or not value.strip():
            return None
        try:
            checked_base_url(value.strip(), "Nito.base_url")
        except ConfigurationError as exc:
            raise TraitError(f"{exc.message} The setting is unchanged.") from None
        return value.strip()

    @validate("store")
    def _check_store(self, proposal: Any) -> str | None:
        value = proposal["value"]
        if not value or not value.strip():
            return None
        why = store_problem(value.strip())
        if why:
            raise TraitError(
                f"Nito.store must be a folder for the run store (or None), not {value!r}: {why}. "
                "The setting is unchanged."
            )
        # Absolute from now on: a later os.chdir in the notebook does not start a second store.
        return str(Path(value.strip()).expanduser().resolve())


def store_problem(value: str) -> str | None:
    """Why ``value`` cannot be a store folder (a file, under a file, not writable), or None.

    The folder need not exist: the first write makes it (as ``nito_nb.run(store=...)`` does)."""
    path = Path(value).expanduser()
    if path.exists():
        if not path.is_dir():
            return f"{str(path)!r} is a file"
        db = path / DB_NAME
        if db.exists() and not db.is_file():
            return f"{str(db)!r} is a folder"
        if not os.access(path, os.W_OK | os.X_OK):
            return f"the folder {str(path)!r} is not writable"
        return None
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"{str(parent)!r} is a file, so no folder can be made under it"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"the folder {str(parent)!r} is not writable, so {str(path)!r} cannot be made"
    return None


def save_problem(value: str) -> str | None:
    """Why the chunk log cannot be saved at ``value`` (``--save``), or None: its folder must exist
    and be writable, and the path must not be a folder. Said before the request is sent."""
    path = Path(value).expanduser()
    if path.is_dir():
        return "is a folder: give a file name, like answer.jsonl"
    parent = path.absolute().parent
    if not parent.exists():
        return (
            f"the folder {str(parent)!r} does not exist: make it first, or save in an existing one"
        )
    if not parent.is_dir():
        return f"{str(parent)!r} is a file, not a folder"
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"cannot write there: no permission in {str(parent)!r}"
    return None


def _refused(name: str, domain: str, value: Any) -> TraitError:
    return TraitError(f"Nito.{name} must be {domain}, not {value!r}: the setting is unchanged.")


def _check_params(name: str, params: dict[str, Any]) -> None:
    """A setting that ends in the request body: the client's own check of a request."""
    from .._client import check_keywords, check_request

    try:
        check_request([], params)
        check_keywords(params, (), "")
    except ConfigurationError as exc:
        raise TraitError(f"Nito.{name}: {exc.message} The setting is unchanged.") from None


def format_or_raise(value: str, error: type[Exception]) -> str:
    from .._render import check_format

    try:
        check_format(value)
    except ValueError as exc:
        raise error(str(exc)) from None
    return value


# -- small helpers -------------------------------------------------------------------------------


def settings_for(ipython: Any) -> Nito:
    """The Nito configurable with the IPython configuration's values (``c.Nito.x`` in
    ``ipython_config.py``); a value a setting refuses is left out with one line, not a traceback
    that would stop ``%load_ext``."""
    try:
        return Nito(parent=ipython)
    except TraitError:
        settings = Nito()
    for name, value in dict(ipython.config.get("Nito", {})).items():
        try:
            setattr(settings, name, value)
        except (TraitError, AttributeError) as exc:
            print(f"nito: ipython config: {exc}", file=sys.stderr)
    return settings
