"""The Run: every request of a plan, sent in the background; what the user holds.

A Run is the user's side (``wait``, ``stop``, ``results``, ``summary``, ``frame``, ``stats``) over
three collaborators, each owning its state and each in a module of one concern:

- the *dispatcher* (``dispatch.py``) sends: its loop thread, the client, the engine, the slots
  behind the shared 429 backoff (``gate.py``), the requests in flight, the schedule's origin;
- the *writer* (``writer.py``) keeps the results: its thread turns each finished request into a
  result row, writes batches to the store when there is one, keeps the Streams otherwise, and
  updates the progress display (``progress.py``);
- the *stats* (``stats.py``) count attempts, retries and errors, hold the client's health and a
  load run's achieved rates, and make ``run.stats()``.

Two threads, so that a run works the same in a script and in a notebook whose kernel already
runs an event loop (the magic's ``-m a,b`` does the same): the dispatcher's loop thread and the
writer's thread. The Run checks what it is given, opens the store, starts the engine last, and
ends when the writer's thread has written the last batch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime as _dt
import sys
import time
import uuid
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._client import AsyncClient, BaseClient
from .._client.endpoint import is_embedded, simulator_apart
from .._core.counts import whole
from .._core.errors import ConfigurationError, one_line, shown_as_line
from .._core.fields import SLO
from .._core.status import Status
from .._core.waiting import wait_or_stop
from .backoff import Backoff
from .client_load import ClientMonitor
from .dispatch import Dispatcher, check_requests, start_engine
from .plan import Plan, Request, request_key
from .results import LoadInfo, results_frame, summary, with_structured
from .schedule import Schedule
from .score_context import ScoreContext
from .score_store import store_scores
from .scoring import SCORES, Scorer, check_scores, streams_of, with_scores
from .stats import RunStats
from .store import Store
from .store_errors import StoreError
from .writer import RunWriter, frame_of

if TYPE_CHECKING:
    import pandas as pd

    from .compare import Comparison

__all__ = ["Run", "runs_frame", "score_cost"]

#: An open-loop run keeps at most this many requests in flight unless ``concurrency`` says less.
OPEN_LOOP_MAX_IN_FLIGHT = 100_000
#: The metrics an ``slo`` may bound (seconds; ``*_from_schedule`` include the send delay).
SLO_METRICS = (*SLO, "ttft_from_schedule", "e2e_from_schedule")  # SLO: _core/fields.py


def _check_slo(slo: dict[str, float] | None) -> dict[str, float]:
    if slo is None:
        return {}
    if not isinstance(slo, dict):
        raise ConfigurationError(f"slo is a dict like {{'ttft': 1.0, 'itl': 0.05}}, not {slo!r}")
    for name, bound in slo.items():
        if name not in SLO_METRICS:
            raise ConfigurationError(f"slo: unknown metric {name!r}; use {', '.join(SLO_METRICS)}")
        if isinstance(bound, bool) or not isinstance(bound, int | float) or not bound > 0:
            raise ConfigurationError(f"slo[{name!r}] is a bound in seconds > 0, not {bound!r}")
    return {name: float(bound) for name, bound in slo.items()}


def _load_requests(plan: Plan, n: int, run_id: str) -> list[Request]:
    """The plan's requests taken in turn until the schedule's ``n`` sends. ``repeat`` counts
    the turns; the key also hashes the run id, so that every rate of a sweep (and every load run
    on one store) keeps its own rows."""
    base = plan.requests
    if not base:
        return []
    out = []
    for i in range(n):
        r = base[i % len(base)]
        turn = i // len(base)
        key = request_key(
            r.model, r.messages, {"params": r.params, "load_run": run_id, "seq": i}, turn
        )
        out.append(Request(key, r.row, r.model, turn, r.messages, r.params, r.images))
    return out


class Run:
    """Many requests (prompts × models × repeats), running in the background.

    ``run.wait()`` (or ``await run``) waits for the end; ``results()``, ``summary()``, ``frame()``
    give what has finished so far; ``stop()`` ends it (in-flight requests are recorded as
    stopped, the others are not sent: running the same call on the same store resumes). A run
    with ``score=`` also has ``compare()`` and ``rescore()`` (docs/SCORES.md).
    """

    def __init__(
        self,
        plan: Plan,
        *,
        concurrency: int | None = None,
        schedule: Schedule | None = None,
        slo: dict[str, float] | None = None,
        stop_on_error_rate: float | None = None,
        engine: str = "asyncio",
        workers: int | None = None,
        per_worker: int | None = None,
        store: str | None = None,
        connection: dict[str, Any] | None = None,
        max_retries: int = 3,
        max_retry_wait: float = 30.0,
        progress: bool | None = None,
        run_id: str | None = None,
        schema: Any = None,
        score: Any = None,
    ) -> None:
        # closed loop: 16 at a time; open loop: as many as the schedule asks
        if concurrency is None:
            concurrency = 16 if schedule is None else OPEN_LOOP_MAX_IN_FLIGHT
        concurrency = whole("concurrency", concurrency)
        # Now, before the simulator's process and the store are started (the engines check them
        # again, for whoever makes one directly).
        workers = None if workers is None else whole("workers", workers)
        per_worker = None if per_worker is None else whole("per_worker", per_worker)
        self.slo = _check_slo(slo)
        if stop_on_error_rate is not None and (
            isinstance(stop_on_error_rate, bool)
            or not isinstance(stop_on_error_rate, int | float)
            or not 0 < stop_on_error_rate <= 1
        ):
            raise ConfigurationError(
                f"stop_on_error_rate is a share in (0, 1], not {stop_on_error_rate!r}"
            )
        self.stop_on_error_rate = stop_on_error_rate
        self.run_id = (
            run_id
            or _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:6]
        )
        self.plan = plan
        #: The run's ``schema=`` (``nito_nb._structured.Schema``): results() checks each answer
        #: against it (its requests carry its response_format). None: free answers.
        self.schema = schema
        self.concurrency = concurrency
        #: The run's ``score=`` (docs/SCORES.md): name -> score; ``rescore`` adds to it.
        self.scores: dict[str, Any] = check_scores(score)
        #: The Runs that the batch scores (a judge) started, by score name: their cost is theirs.
        self.score_runs: dict[str, Run] = {}
        self.schedule = schedule
        self._offsets: list[float] = schedule.offsets() if schedule is not None else []
        phases = self.load_info(client=False)  # the measured window, for each row's phase
        self.store_path = store
        connection = dict(connection or {})
        client = AsyncClient(max_retries=0, **connection)
        # Decides whether (and how long after) an attempt is retried: the client's own rule.
        retry_rule = BaseClient(max_retries=max_retries, max_retry_wait=max_retry_wait)
        base_url = connection.get("base_url")
        embedded = any(is_embedded(request.model, base_url) for request in plan.requests)
        # sim/ models go to a simulator in a process of its own: in this one, its work would be
        # the run's (with Ray, only the actors on this node use it: ray.py).
        with simulator_apart() if embedded else contextlib.nullcontext() as simulator:
            check_requests(client, connection, plan.requests)
        if engine not in ("asyncio", "processes", "ray"):
            raise ConfigurationError(
                f"engine must be 'asyncio', 'processes' or 'ray', not {engine!r}"
            )
        self.engine = engine
        if engine == "asyncio" and (workers is not None or per_worker is not None):
            # (per_worker was taken and ignored: a run that meant a worker engine got none)
            name = "workers" if workers is not None else "per_worker"
            raise ConfigurationError(f"{name}= is for engine='processes' or engine='ray'")
        requests = (
            plan.requests
            if schedule is None
            else _load_requests(plan, len(self._offsets), self.run_id)
        )
        inputs = plan.inputs
        if schedule is not None and plan.requests:  # each load request reads its plan row's input
            inputs = {
                r.key: plan.inputs.get(plan.requests[i % len(plan.requests)].key, {})
                for i, r in enumerate(requests)
            }
        # What a batch score's context says of this run (score_context.py); the key stays here.
        self._score_options = (connection, max_retries, progress)
        self._scorer = Scorer(self.scores, inputs, schema)
        writer = RunWriter(
            store,
            self.run_id,
            phases,
            resumable=schedule is None,
            scorer=self._scorer if self.scores else None,
        )
        # A load run measures; it never resumes (its keys hold its run id: see _load_requests).
        skipped = writer.done_keys() if schedule is None else set()
        self.skipped = [r for r in requests if r.key in skipped]
        writer.keep_done_before(self.skipped)  # results() and summary() cover every key of the plan
        todo = [r for r in requests if r.key not in skipped]
        self._order = {r.key: i for i, r in enumerate(requests)}
        #: The error that ended the run early (a 401, 402 or 403, or a failure of the store), or None.
        self.error: BaseException | None = None
        self.stopped = False
        self.started = time.monotonic()
        self.ended: float | None = None
        #: The client's own health while it sends (docs/LOAD.md).
        self.client = ClientMonitor(simulator=embedded and simulator is None)
        self._stats = RunStats(
            todo, None if schedule is None else float(schedule.rate), self.skipped, self.client
        )
        # Resolved with None, not the Run: a Run that held a future of itself was a reference
        # cycle, freed only by a full GC pass once dropped (test_gc.py).
        self._finished: concurrent.futures.Future[None] = concurrent.futures.Future()
        # The workers start last, once nothing else can fail (a busy store, a bad option).
        try:
            the_engine = start_engine(
                engine,
                workers,
                per_worker,
                connection,
                sorted({request.model for request in todo}),
                simulator,
                self.client,
            )
        except BaseException:
            writer.close()
            raise
        self._writer = writer
        self._dispatcher = Dispatcher(
            client=client,
            connection=connection,
            retry_rule=retry_rule,
            simulator=simulator,
            engine=the_engine,
            ray=engine == "ray",
            todo=todo,
            offsets=None if schedule is None else self._offsets,
            concurrency=concurrency,
            stop_on_error_rate=stop_on_error_rate,
            started=self.started,
            stats=self._stats,
            writer=writer,
            fail=self._fail_run,
        )
        #: The run's shared 429 backoff (its limit on requests in flight, its pauses).
        self.backoff: Backoff = self._dispatcher.gate.backoff
        from .progress import progress_for

        self.progress = progress_for(self, progress)
        writer.start(self.progress, fail=self._fail_run, ended=self._writer_ended)
        self._dispatcher.start()

    def _fail_run(self, error: BaseException) -> None:
        """End the run now (a 401/402/403, or the store failed): one clear message."""
        if self.error is None:
            self.error = error
            message = getattr(error, "message", None) or str(error)
            print(f"nito: the run stopped: {message}", file=sys.stderr)
        self._dispatcher.cancel()

    def _writer_ended(self) -> None:
        # On the writer's thread, after its last batch: the batch scores grade what ended (a
        # score's failure is its rows' error, never the run's: wait() must end), then the run
        # has ended.
        if self._scorer.batch:
            try:
                self._grade_batches(self._scorer, self._writer.rows(), only_missing=True)
            except Exception as exc:
                print(f"nito: the run's batch scores failed: {one_line(exc)}", file=sys.stderr)
        self.ended = time.monotonic()
        if self.progress is not None:
            self.progress.finish()
        self._finished.set_result(None)

    # -- the user's side -------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._finished.done()

    @property
    def total(self) -> int:
        """Requests this run sends (the plan's, without those a store already had done)."""
        return self._stats.total

    @property
    def stop_reason(self) -> str | None:
        """Why the run stopped sending before its end (the error rate), or None."""
        return self._dispatcher.stop_reason

    @property
    def refused_models(self) -> dict[str, str]:
        """The models sent no more requests, because their first ones were all answered 404 (not
        found), each with the gateway's message; their other requests are not sent (nor recorded)."""
        return dict(self._dispatcher.refused_models)

    @property
    def n_attempts(self) -> int:
        """Attempts sent so far (retries included)."""
        return self._stats.n_attempts

    @property
    def n_retries(self) -> int:
        """Attempts that were retried."""
        return self._stats.n_retries

    def wait(self, timeout: float | None = None) -> Run:
        """Wait for the run to end, or ``timeout`` seconds at most (then it goes on: check
        ``done``); a KeyboardInterrupt stops it, waits for the clean end, and goes on up saying in
        one line what was kept and how to resume (a kernel shows that line alone)."""
        try:
            wait_or_stop(self._finished, self.stop, timeout)
        except KeyboardInterrupt as interrupt:
            # A kernel showed nine frames of threading and concurrent.futures; IPython shows the
            # line alone (as the magic's own interrupt), and a script the message.
            line = self._interrupted()
            interrupt.args = (line,)
            shown_as_line(interrupt, f"KeyboardInterrupt: {line}")
            raise interrupt.with_traceback(None) from None
        return self

    def _interrupted(self) -> str:
        """What a KeyboardInterrupt in ``wait()`` says: the run stopped, what it kept, how to resume."""
        rows = self._writer.rows()
        done = sum(row["status"] == Status.DONE for row in rows)
        stopped = sum(row["status"] == Status.STOPPED for row in rows)
        text = f"nito stopped the run: {done} of {self.total + len(self.skipped)} requests done"
        if stopped:
            text += f", {stopped} stopped as they streamed (what arrived is kept)"
        if self.schedule is not None:
            how = "a load run is not resumed: run it again"
        elif self.store_path is not None:
            how = f"to resume, run the same call again with store={self.store_path!r} (what is done is skipped)"
        else:
            how = "run.results() holds what ended; with store='folder' the same call again would resume it"
        return f"{text}; {how}."

    def __await__(self) -> Generator[Any, None, Run]:
        yield from asyncio.wrap_future(self._finished).__await__()
        return self

    def stop(self) -> None:
        """End the run: in-flight requests are closed and recorded as ``stopped``, the rest are
        not sent. Returns at once; ``wait()`` for the end."""
        self.stopped = True
        self._dispatcher.cancel()

    def results(self) -> pd.DataFrame:
        """One row per finished request, in the plan's order (row, model, repeat); see
        docs/RUNS.md for the columns. A resumed run's requests done before it (in its store)
        are there too, ``done_before`` True."""
        rows = self._writer.rows()
        order = self._order
        rows.sort(key=lambda row: order[row["key"]])
        df = results_frame(rows)
        df["done_before"] = df["key"].isin([r.key for r in self.skipped]).astype(bool)
        if self.schema is not None:
            df = with_structured(df, self.schema)
        return with_scores(df, [row.get(SCORES) for row in rows], list(self.scores))

    def summary(self) -> pd.DataFrame:
        """One row per model: counts by status, p50/p90/p99 of ttft, itl, e2e, tokens, cost. A
        load run (``rate=``) summarises only the requests scheduled between warmup and cooldown
        and adds the achieved rate, throughput, goodput, send delay and the client's health.
        A scored run adds each score's mean (a boolean's: the share of True) and, when a batch
        score started runs of its own (a judge), their cost apart: ``score_cost``, never in
        ``cost`` (docs/SCORES.md)."""
        results = self.results()
        out = summary(results, load=self.load_info())
        if self.score_runs:
            out["score_cost"] = score_cost(results, self.score_runs).reindex(out.index)
        return out

    def compare(self) -> Comparison:
        """The models side by side: each score's mean with its 95% interval, p50 and p90 of ttft
        and e2e, cost per request, the best value of each column marked; ``.frame``,
        ``.plot(x="cost", y="exact")`` (docs/SCORES.md)."""
        from .compare import compare

        results = self.results()
        costs = score_cost(results, self.score_runs) if self.score_runs else None
        return compare(results, list(self.scores), costs)

    def rescore(self, score: dict[str, Any]) -> Run:
        """Grade the run's rows again with ``score`` (name -> score, as ``score=`` takes), from
        the Streams it kept or its store, without sending any request: a score of a name the
        run has is replaced, a new one added (its column, its stored rows). Returns the Run."""
        if not self.done:
            raise ConfigurationError("run.rescore() grades a run that has ended: run.wait() first")
        scores = check_scores(score)
        if not scores:
            raise ConfigurationError(
                "run.rescore() takes the scores to compute, like run.rescore({'exact': "
                "nito_nb.scores.equals('content', column='truth')})"
            )
        self.scores.update(scores)
        inputs = self._scorer.inputs
        self._scorer = Scorer(self.scores, inputs, self.schema)
        scorer = Scorer(scores, inputs, self.schema)
        rows = self._writer.rows()
        graded: dict[str, dict[str, Any]] = {}
        if scorer.plain:
            copies = [{**row, SCORES: {}} for row in rows]
            keys = [row["key"] for row in rows]
            with streams_of(keys, self._writer.kept_streams(), self._open_store()) as streams:
                scorer.grade(copies, streams, scorer.plain)
            graded = {row["key"]: row[SCORES] for row in copies}
        self._keep_scores(rows, graded)
        if scorer.batch:
            self._grade_batches(scorer, rows, only_missing=False)
        return self

    def _grade_batches(
        self, scorer: Scorer, rows: list[dict[str, Any]], *, only_missing: bool
    ) -> None:
        """Each batch score of ``scorer``, once, over ``rows`` (``only_missing``: those that do
        not have it yet: a resumed run's stored ones are kept); their Runs kept in ``score_runs``."""
        connection, max_retries, progress = self._score_options
        for name, score in scorer.batch.items():
            todo = [r for r in rows if not only_missing or name not in (r.get(SCORES) or {})]
            if not todo:
                continue

            def keep(run: Any, name: str = name) -> None:
                self.score_runs[name] = run

            context = ScoreContext(
                run_id=self.run_id,
                name=name,
                store=self.store_path,
                connection=connection,
                concurrency=None if self.schedule is not None else self.concurrency,
                max_retries=max_retries,
                progress=progress,
                keep=keep,
            )
            keys = [r["key"] for r in todo]
            with streams_of(keys, self._writer.kept_streams(), self._open_store()) as streams:
                graded = scorer.grade_batch(name, score, todo, streams, context)
            self._keep_scores(todo, {key: {name: triple} for key, triple in graded.items()})

    def _keep_scores(self, rows: list[dict[str, Any]], graded: dict[str, dict[str, Any]]) -> None:
        """Scores computed after the rows were written: in the rows, and in the store."""
        if not graded:
            return
        self._writer.set_scores(graded)
        opener = self._open_store()
        if opener is None:
            return
        import duckdb

        try:
            with opener() as store:
                store_scores(
                    store.con,
                    [
                        {"key": r["key"], "run_id": r.get("run_id"), SCORES: graded[r["key"]]}
                        for r in rows
                        if r["key"] in graded
                    ],
                )
        except duckdb.Error as exc:  # a Store of it open read-only in this process, a full disk
            path = str(self.store_path)
            raise StoreError(
                f"the scores could not be written to the store {path!r} ({one_line(exc)}); "
                "run.results() has them meanwhile: close any Store of it (nito_nb.open_store), "
                "then rescore again",
                path=Path(path),
            ) from None

    def _open_store(self) -> Callable[[], Store] | None:
        """How the run's store is opened once the run has ended (to rebuild its Streams, to write
        scores), with the writer's settings: None without a store."""
        path = self.store_path
        if path is None:
            return None
        return lambda: Store(path, shared=True)

    def load_info(self, client: bool = True) -> LoadInfo | None:
        """What the summary of a load run needs: the measured window, the SLO, the client."""
        if self.schedule is None:
            return None
        start = float(self.schedule.warmup)
        end = self.schedule.end(self._offsets) - self.schedule.cooldown
        if end <= start:
            raise ConfigurationError(
                f"warmup={self.schedule.warmup:g} s and cooldown={self.schedule.cooldown:g} s leave no time"
                f" to measure in a schedule of {self.schedule.end(self._offsets):g} s"
            )
        return LoadInfo(
            rate=float(self.schedule.rate),
            start=start,
            end=end,
            slo=self.slo,
            client=self.client.report() if client else {},
        )

    def frame(self) -> pd.DataFrame:
        """The chunk-level frame of every finished stream (``stream`` = the request key). With a
        store it is read from the store once the run has ended (and, if the store failed, what
        it could not take from memory)."""
        return runs_frame([self])

    def stats(self) -> dict[str, Any]:
        """Counts so far, per model and in total (what the progress display shows)."""
        dispatcher = self._dispatcher
        return self._stats.report(
            self._writer.rows(),
            in_flight=dispatcher.in_flight_models(),
            started=self.started,
            origin=dispatcher.origin,
            ended=self.ended,
            state=self._state(),
            error=self.error,
            stop_reason=dispatcher.stop_reason,
            backoff=self.backoff,
            summary=self.summary,
            refused_models=dispatcher.refused_models,
        )

    def _state(self) -> str:
        if self.ended is not None:
            return "stopped" if self.stopped or self.error else "done"
        return "stopping" if self.stopped else "running"

    def __repr__(self) -> str:
        state = "done" if self.done else ("stopping" if self.stopped else "running")
        return f"<nito_nb.Run {self.run_id} {state}: {self._writer.n_rows}/{self.total + len(self.skipped)} requests>"

    def _ipython_display_(self) -> None:
        from .progress import show

        show(self)

    def _display_(self) -> Any:
        """marimo's display protocol (only marimo calls it): the progress table, live in the cell
        until the run ends (``progress.show_in_cell``)."""
        from .progress import show_in_cell

        return show_in_cell(self, mark=lambda: (self._writer.n_rows, self.n_attempts))


def runs_frame(runs: list[Run]) -> pd.DataFrame:
    """The chunk-level frame of the finished streams of ``runs`` (one run's, or a sweep's): the
    writers' ``frame_of``, the one rule of ``Run.frame()`` and ``Sweep.frame()``."""
    return frame_of([run._writer for run in runs])


def score_cost(results: pd.DataFrame, score_runs: dict[str, Run]) -> pd.Series:
    """The cost of the runs that the batch scores started (a judge's), per graded model: a score
    run's request is put on the model of the graded request whose key is its row label (how a
    judge labels what it grades); its cost never counts in the graded run's ``cost``."""
    import pandas as pd

    model_of = dict(
        zip(results["key"].astype(object), results["model"].astype(object), strict=True)
    )
    totals: dict[Any, float] = {model: 0.0 for model in model_of.values()}
    for run in score_runs.values():
        theirs = run.results()
        for label, cost in zip(theirs["row"], theirs["cost"].astype("float64"), strict=True):
            model = model_of.get(label)
            if model is not None and cost == cost:
                totals[model] += float(cost)
    return pd.Series(totals, dtype="float64", name="score_cost")
