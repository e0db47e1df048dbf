"""What a run gives a score that grades all its rows at once (a judge: requests of its own).

A score is any callable ``(row, stream) -> bool | float | str`` (docs/SCORES.md). A score that
needs more than one row at a time, or requests of its own, has a ``score_rows`` method instead
(:class:`BatchScore`): the run calls it once, with the rows to grade and a :class:`ScoreContext`
that says how to send (the run's connection, store, concurrency, retries) without the score
reaching into the Run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["BatchScore", "ScoreContext"]


@dataclass(frozen=True)
class ScoreContext:
    """How a batch score of run ``run_id`` sends its own requests, if it has any."""

    #: The graded run's id; a score's own run is ``f"{run_id}.{name}"``.
    run_id: str
    #: The score's name in ``score={name: ...}``: its column is ``score.<name>``.
    name: str
    #: The graded run's store folder (its requests are kept there, with their own keys, and a
    #: second call resumes them), or None.
    store: str | None = None
    #: ``api_key``, ``base_url``, ``timeout`` as given to the graded run (only those given).
    #: Never shown: the key is a secret.
    connection: Mapping[str, Any] = field(default_factory=dict, repr=False)
    concurrency: int | None = None
    max_retries: int = 3
    progress: bool | None = None
    #: Called with each Run the score starts, so that the graded run can show its cost apart
    #: (``run.score_runs``) and wait for it.
    keep: Callable[[Any], None] = field(default=lambda run: None, repr=False, compare=False)


@runtime_checkable
class BatchScore(Protocol):
    """A score that grades every row in one call."""

    def score_rows(
        self, rows: Sequence[Mapping[str, Any]], streams: Sequence[Any], context: ScoreContext
    ) -> list[Any]:
        """One value per row, in order (``bool``, ``float``, ``str`` or None for NA); an
        exception instance in a row's place is that row's error (NA in the score's column, the
        message in ``score_errors``)."""
        ...
