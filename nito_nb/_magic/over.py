"""``%%nito --over VAR``: the cell is a template run over every row of VAR (``nito_nb.run``),
with ``--score NAME=EXPR`` grading each row and ``--image`` naming the column of its images.

Apart from the cell's flow (``cell.py``): a run has its own checks (no ``--chat``, a column of
images), its own progress panel, and is kept as the Run, not as Streams.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from .._core.errors import ConfigurationError, NitoError
from .._last import remember as _remember_last
from .options import request_params
from .output import in_kernel

if TYPE_CHECKING:
    from .magics import NitoMagics

__all__ = ["run_over"]


def run_over(magics: NitoMagics, args: Any, cell: str, models: list[str]) -> None:
    """``--over VAR``: the cell is a template filled from each row of VAR (``nito_nb.run``)."""
    from .._runs import run as start_run

    if args.chat or args.run_tools:
        raise UsageError("--over runs every row on its own: not with --chat or --run-tools")
    if args.over not in magics.namespace:
        raise UsageError(f"--over {args.over}: no such variable in the namespace")
    template = cell.strip("\n")
    if not template.strip():
        raise UsageError(
            "the cell is empty: write the template below the %%nito line, e.g. Summarise: {text}"
        )
    system = args.system if args.system is not None else magics.settings.system
    rows = magics.namespace[args.over]
    images = _over_images(args, rows)
    score = _scores(args.score)
    try:
        run = start_run(
            rows,
            template=template,
            model=models,
            system=system or None,
            images=images,
            score=score or None,
            **magics._connection(),
            **request_params(magics, args),
        )
    except NitoError as exc:  # a missing column, no key...: one line, nothing was sent
        raise UsageError(f"--over {args.over}: {exc}") from None
    magics.namespace["_nito"] = run
    _remember_last(run)
    if args.out:
        magics.namespace[args.out] = run
    if in_kernel():
        run._ipython_display_()
    run.wait()


def _over_images(args: Any, rows: Any) -> str | None:
    """With ``--over VAR``, ``--image`` names VAR's column of each row's images (a path, an
    http(s) URL, a list of them, or empty), as ``run(images=...)`` takes it: a file named
    for every row would send the same image with each, which a column says as well."""
    if not args.image:
        return None
    columns = [str(c) for c in getattr(rows, "columns", [])]
    if len(args.image) > 1 or args.image[0] not in columns:
        have = (
            f"{args.over} has {', '.join(columns) or 'no columns'}"
            if columns
            else (f"{args.over} is a {type(rows).__name__}, not a DataFrame")
        )
        raise UsageError(
            f"--over {args.over}: --image names the column of each row's images, once "
            f"({have}); for the same image on every row, add a column: "
            f"{args.over}['image'] = 'chart.png'"
        )
    return str(args.image[0])


def _scores(exprs: list[str]) -> dict[str, Any]:
    """``--score NAME=EXPR`` (repeatable): the built-in scores, parsed, never evaluated."""
    from ..scores import parse_score

    out: dict[str, Any] = {}
    for expr in exprs:
        try:
            name, score = parse_score(expr)
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
        if name in out:
            raise UsageError(f"--score {expr!r}: the name {name!r} is given twice")
        out[name] = score
    return out
