"""``run()`` and ``map()``: a plan of requests made into a :class:`~nito_nb._runs.Run`.

The package's functions, below ``runs/__init__.py`` (which only re-exports them) so that
``sweep.py`` can call ``run()`` without importing the package it belongs to.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .. import _last
from .._client import check_keywords, keyword_options
from .._core.attachments import DEFAULT_MAX_IMAGE_SIZE
from .._core.errors import ConfigurationError
from .._core.request import model_names
from .._core.status import Status
from .plan import plan
from .runner import Run
from .schedule import Schedule

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["map", "remember", "run"]

_CONNECTION = ("api_key", "base_url", "timeout")


def run(
    prompts: Any,
    *,
    model: str | Sequence[str],
    template: str | None = None,
    repeats: int = 1,
    concurrency: int | None = None,
    rate: float | None = None,
    schedule: str = "constant",
    burstiness: float = 1.0,
    duration: float | None = None,
    max_requests: int | None = None,
    warmup: float = 0.0,
    cooldown: float = 0.0,
    slo: dict[str, float] | None = None,
    stop_on_error_rate: float | None = None,
    engine: str = "asyncio",
    workers: int | None = None,
    per_worker: int | None = None,
    store: str | None = None,
    system: str | None = None,
    max_retries: int = 3,
    progress: bool | None = None,
    run_id: str | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: Any = None,
    images: str | None = None,
    image_detail: str = "auto",
    max_image_size: int = DEFAULT_MAX_IMAGE_SIZE,
    score: dict[str, Any] | None = None,
    **params: Any,
) -> Run:
    """Send every prompt × model × repeat, ``concurrency`` at a time, in the background.

    ``model``: a model id, a list of them, or several in one string separated by commas (as in
    ``%%nito -m a,b``). A model whose first requests are all answered 404 (not found) is sent no
    more, with one line that says so (``run.refused_models``).

    ``prompts``: a string, a list of strings or message lists, a pandas Series, or a DataFrame
    with ``template`` (its columns fill the ``{name}`` fields, with the ``%%nito`` magic's safe
    interpolation; a list or Series fills ``{value}``). Each request has a stable key (a hash of
    model, messages, parameters and repeat index). ``store=PATH``: a folder with a DuckDB database
    where every finished request is written; the same call again skips the keys already done.
    Other keyword parameters go into each request's body (``temperature``, ``seed``...).
    Returns the :class:`Run` at once: ``run.wait()`` or ``await run``.

    A load run (docs/LOAD.md): ``rate=R`` sends the plan's requests in turn on an open-loop
    ``schedule`` (``"constant"`` or ``"poisson"``, with a gamma ``burstiness``) for ``duration``
    seconds or ``max_requests``; requests scheduled in the first ``warmup`` or last
    ``cooldown`` seconds are kept but left out of the summary; ``slo={"ttft": 1.0, ...}`` gives
    the summary a ``goodput``; ``stop_on_error_rate=0.5`` stops sending once half the ended
    requests failed. ``concurrency`` then caps the requests in flight (default: no cap).

    ``engine="ray"``: the requests are sent by ``workers`` Ray actors (default: one per CPU of the
    cluster; ``ray.init(address=...)`` first for a cluster, else a local one is started), each
    with at most ``per_worker`` streams in flight (default 1,000); the results gain their ``worker`` and ``node``.
    ``engine="processes"``: the same with ``workers`` local processes (default: one per core).

    ``images="column"`` (docs/IMAGES.md): the DataFrame's column of each row's images (a path or
    an http(s) URL, a list of them, or empty), sent as ``stream(images=...)`` sends them, with
    ``image_detail`` and ``max_image_size``; every row's are checked before anything is sent, and
    the key hashes their bytes. The store keeps their descriptors, never their data.
    ``score={name: score}`` grades each answer as it finishes (docs/SCORES.md): a callable
    ``(row, stream) -> bool | float | str`` or a built-in of ``nito_nb.scores``; results() gets a
    ``score.<name>`` column each and ``score_errors``; summary() each score's mean.
    """
    check_keywords(params, keyword_options(run), "nito_nb.run()")  # concurency=4 is no body field
    # A string ("a,b" names two, as in %%nito -m a,b), or any iterable of them (a list, a Series,
    # an array); anything else (None, a number) goes to plan()'s one check of models, which says
    # what model= takes.
    models: list[Any]
    if isinstance(model, str):
        models = model_names(model) or [model]
    elif isinstance(model, bytes | dict) or not isinstance(model, Iterable):
        models = [model]
    else:
        models = [
            name
            for m in model
            for name in (model_names(m) if isinstance(m, str) and "," in m else [m])
        ]
    the_schedule = None
    if rate is not None:
        the_schedule = Schedule(
            rate=rate,
            kind=schedule,
            burstiness=burstiness,
            duration=duration,
            max_requests=max_requests,
            warmup=warmup,
            cooldown=cooldown,
        )
    elif duration is not None or max_requests is not None or warmup or cooldown or slo:
        raise ConfigurationError(
            "duration, max_requests, warmup, cooldown and slo are for load runs: add rate=..."
        )
    schema = None
    # docs/STRUCTURED.md: the requests carry its response_format (JSON, as any engine's worker and
    # the store's keys need); the Run keeps it to check the answers.
    if params.get("schema") is not None:
        from .._structured import schema_of

        schema = schema_of(params.pop("schema"))
        if params.get("response_format") is not None:
            raise ConfigurationError(
                "pass schema= or response_format=, not both (schema= sends its own "
                "response_format of type json_schema)"
            )
        params["response_format"] = schema.response_format()
    params.pop("schema", None)
    planned = None
    if images is not None:
        from .images import row_images

        planned = row_images(prompts, images, image_detail, max_image_size)
    the_plan = plan(
        prompts,
        template=template,
        models=models,
        repeats=repeats,
        params=params,
        system=system,
        images=planned,
    )
    connection = {"api_key": api_key, "base_url": base_url, "timeout": timeout}
    the_run = Run(
        the_plan,
        concurrency=concurrency,
        schedule=the_schedule,
        slo=slo,
        stop_on_error_rate=stop_on_error_rate,
        engine=engine,
        workers=workers,
        per_worker=per_worker,
        store=store,
        connection={k: v for k, v in connection.items() if v is not None},
        max_retries=max_retries,
        progress=progress,
        run_id=run_id,
        schema=schema,
        score=score,
    )
    remember(the_run)
    return the_run


def map(prompts: Any, *, model: str, template: str | None = None, **options: Any) -> pd.Series:
    """The answers of one model as a Series aligned with the input's index (``string`` dtype, NA
    where a request did not end with ``done``). Waits for the run; the Run, with its errors, is
    ``nito_nb.last()``. Takes the options of :func:`run` (``store``, ``concurrency``...).

    With ``schema=`` (a pydantic model or a JSON-schema dict): the objects (``object`` dtype: the
    model's instances, or dicts), NA where the answer did not validate (``results()`` of the Run
    says why, in ``parse_error``)."""
    import pandas as pd

    if not isinstance(model, str) or len(model_names(model)) > 1:
        raise ConfigurationError("map takes one model (model='...'); for several, use nito_nb.run")
    if options.get("repeats", 1) != 1:
        raise ConfigurationError("map gives one answer per row: use nito_nb.run for repeats")
    the_run = run(prompts, model=model, template=template, **options)
    from .._display.marimo import in_marimo
    from .._display.notebook import in_kernel

    if in_kernel():
        the_run._ipython_display_()
    elif in_marimo():  # the table in the cell while the run goes; the Series then replaces it
        the_run._display_()
    the_run.wait()
    answers: dict[str, Any] = {}
    results = the_run.results()
    for key, status, content in zip(
        results["key"], results["status"], results["content"], strict=True
    ):
        # those done in an earlier session too
        answers[key] = content if status == Status.DONE else pd.NA
    schema = the_run.schema
    cells = the_run.plan.cells
    name = prompts.index.name if isinstance(prompts, (pd.Series, pd.DataFrame)) else None
    index = pd.Index([label for label, _, _, _ in cells], name=name)
    if schema is not None:  # the objects: each answer checked as results() checks it

        def parsed(answer: Any) -> Any:
            checked = None if answer is pd.NA else schema.check(answer)
            return pd.NA if checked is None or checked.error is not None else checked.value

        return pd.Series(
            [parsed(answers.get(key, pd.NA)) for _, _, _, key in cells], index=index, dtype="object"
        )
    return pd.Series(
        [answers.get(key, pd.NA) for _, _, _, key in cells], index=index, dtype="string"
    )


def remember(the_run: Run) -> None:
    """``nito_nb.last()`` is the last Run (or the magic's last Stream, whichever came last)."""
    _last.remember(the_run)
