"""One sweep's store: `Store`, the object the orchestrator, the workers and the tests hold. It opens the sweep's
Optuna study once and each learning-rate search's study once, and offers the queue (enqueue, claim, record,
finish, requeue, retry), crash detection, the search lifecycle and the tables, each through the module that
does it (`queue`, `crash`, `search`, `params`, `tables`, `storage`, `internals`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
from optuna.trial import FrozenTrial, TrialState

from sweep import vocab
from sweep.config.plan import RunSpec, SearchGroup
from sweep.store import crash, internals, outage, params, queue, search, storage, tables
from sweep.store.crash import Dead
from sweep.store.journal import Say
from sweep.store.queue import DEFAULT_POLICY, Lease, RetryPolicy, epochs_of, latest_by_run, status_of
from sweep.store.search import Search
from sweep.store.secrets import redact
from sweep.vocab import RunStatus

QUEUE_LOCK = 0x62617463685F71  # the advisory lock taken while queueing: "batch_q" as a number


class Store:
    """One sweep's store. `Store.open(target, name)`; the target is a journal path or a database URL."""

    def __init__(self, target: str, backend: optuna.storages.BaseStorage, sweep: optuna.Study) -> None:
        self.target = target
        self.database = storage.is_database(target)
        self._backend = backend
        self.sweep = sweep
        self._searches = {gid: search.open_search(backend, gid, s) for gid, s in search.listed(sweep).items()}

    @classmethod
    def open(
        cls, target: str | Path, name: str, create: bool = True, read_only: bool = False, say: Say | None = None
    ) -> Store:
        """Open (or with `create`, start) the sweep `name`. KeyError if it is missing and not `create`;
        NewerStoreError if a newer batchsweep wrote it; NotAJournal if the file is no journal. `read_only`:
        nothing is written to a journal (`status`, `export`); `say` hears a journal's repair.
        """
        backend = storage.open_storage(target, read_only=read_only, say=say)
        return cls(str(target), backend, storage.open_study(backend, name, create=create and not read_only))

    def close(self) -> None:
        """Hand a database store's pooled connections back to the server now, not when the garbage
        collector gets to them: a process that opens stores in a loop would otherwise run the server
        out of connections. A journal holds nothing open; closing it does nothing.
        """
        if isinstance(self._backend, outage.RidingOut):
            self._backend.rdb.remove_session()  # the thread's session gives its connection back to the pool
            self._backend.rdb.engine.dispose()  # and the pool closes them all

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def name(self) -> str:
        return self.sweep.study_name

    @property
    def shown(self) -> str:
        """The target as it may be printed: a password masked."""
        return redact(self.target, self.target)

    @property
    def searches(self) -> list[Search]:
        return list(self._searches.values())

    def _studies(self) -> list[optuna.Study]:
        return [self.sweep, *(s.study for s in self._searches.values())]

    # --- queueing (the orchestrator's side)

    def enqueue(self, runs: list[RunSpec], role: str = vocab.GRID, **attrs: Any) -> int:
        """A WAITING attempt for every run that has none pending, running or final; returns how many."""
        params.list_varying(self.sweep, runs)
        items = [(s.run_id, s.to_json()) for s in runs]
        with self._queueing():
            return queue.enqueue_items(self.sweep, items, {vocab.ROLE: role, **attrs})

    def register_searches(self, groups: list[SearchGroup]) -> list[Search]:
        """List each group's search on the sweep study, open its study, enqueue its trial slots."""
        for group_id, settings in search.list_searches(self.sweep, groups).items():
            if group_id not in self._searches:
                self._searches[group_id] = search.open_search(self._backend, group_id, settings)
        with self._queueing():
            for group in groups:
                search.enqueue_slots(self._searches[group.group_id], group.slot_template)
        return [self._searches[g.group_id] for g in groups]

    def widen_searches(self, groups: list[SearchGroup]) -> list[str]:
        """Once every search has settled: widen each whose best lr sits at an edge of its range (`search.widen`)
        and give every search the same extra trials, queued (the others draw theirs in their own range), so every
        point is tuned with the same number of trials; return one line per widened search and one for the rest.
        """
        found = [self._searches[g.group_id] for g in groups if g.group_id in self._searches]
        if not found or not all(search.settled(s) for s in found):
            return []
        rounds = max(s.rounds() for s in found)  # before a widening adds a range (an old store counts ranges)
        widened = {s.group_id: w for s in found if (w := search.widen(s))}
        if not widened:
            return []
        lines, added = [], 0
        for group in groups:
            found_one = self._searches[group.group_id]
            search.set_rounds(found_one, rounds + 1)
            with self._queueing():
                added = search.enqueue_slots(found_one, group.slot_template)
            if group.group_id in widened:
                (low, high), (new_low, new_high) = widened[group.group_id]
                lines.append(
                    f"{group.group_id}: best lr at the edge of [{low:.3g}, {high:.3g}]; "
                    f"{added} more trial(s) over [{new_low:.3g}, {new_high:.3g}]"
                )
        others = len(groups) - len(widened)
        if others:
            lines.append(f"{others} other search(es): {added} more trial(s) each in their own range, the same number")
        return lines

    @contextlib.contextmanager
    def _queueing(self) -> Iterator[None]:
        """One process queues at a time on PostgreSQL. Queueing reads what is queued, then adds what is
        missing, so processes queueing at once (a Slurm array's tasks starting together) would each add
        it. They take turns on an advisory lock, which the server releases if its process dies (taking it
        rides out a database outage, as every call to the store does: `outage.call`).
        """
        if not isinstance(self._backend, outage.RidingOut) or self._backend.rdb.engine.dialect.name != "postgresql":
            yield
            return
        import sqlalchemy

        connection = outage.call(self.target, _locked, self._backend.rdb.engine)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):  # a connection lost meanwhile: the server released the lock
                connection.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), {"key": QUEUE_LOCK})
            connection.close()

    def tuned_runs(self, groups: list[SearchGroup], seeds: tuple[int, ...]) -> dict[str, list[RunSpec]]:
        """group id -> its best lr's run at every seed, then (`search.rerun` above 1) the runner-up lrs' runs, for
        each search with a finished trial, once every search has settled (a later round may still change a
        settled one's best lr; reads only).
        """
        result: dict[str, list[RunSpec]] = {}
        if not all(search.settled(s) for g in groups if (s := self._searches.get(g.group_id))):
            return result
        for group in groups:
            found = self._searches.get(group.group_id)
            lrs = search.ranked_lrs(found)[: group.search.rerun] if found else []
            if lrs:
                result[group.group_id] = [spec for lr in lrs for spec in group.tuned_runs(lr, seeds)]
        return result

    def enqueue_tuned(self, groups: list[SearchGroup], seeds: tuple[int, ...]) -> list[RunSpec]:
        """Queue each finished search's best lr at every seed (role tuned) and its runner-ups (role runner_up);
        return every such run known so far.
        """
        tuned = self.tuned_runs(groups, seeds)
        for group_id, runs in tuned.items():
            best, rest = runs[: len(seeds)], runs[len(seeds) :]
            self.enqueue(best, role=vocab.TUNED, **{vocab.SEARCH_GROUP: group_id})
            if rest:
                self.enqueue(rest, role=vocab.RUNNER_UP, **{vocab.SEARCH_GROUP: group_id})
        return [spec for runs in tuned.values() for spec in runs]

    # --- leases and records (the worker's side)

    def claim_next(self, accept: Callable[[RunSpec], bool] | None = None) -> Lease | None:
        """Atomically take the next queued run (the next that `accept`s, if given): the sweep's own
        first, then the searches' trials in order. A search slot's lr is drawn by `start`, once the
        worker knows it can train it.
        """
        identity = crash.worker_identity()
        for study, found in [(self.sweep, None), *((s.study, s) for s in self._searches.values())]:
            lease = queue.claim_next(study, identity, found, accept)
            if lease is not None:
                return lease
        return None

    def start(self, lease: Lease) -> Lease:
        """A search slot: its lr is drawn now. A run of the sweep: its varying settings become Optuna params."""
        if lease.search:
            return lease.search.start(lease)
        params.record(lease.trial, lease.spec)
        return lease

    def heartbeat(self, lease: Lease) -> AbstractContextManager[None]:
        """Optuna's heartbeat for the lease while it trains (database stores; nothing on a journal)."""
        return internals.heartbeat(lease.trial) if self.database else contextlib.nullcontext()

    record_info = staticmethod(queue.record_info)
    record_epoch = staticmethod(queue.record_epoch)
    record_fact = staticmethod(queue.record_fact)

    @staticmethod
    def earlier_records(lease: Lease) -> list[list[dict[str, Any]]]:
        """The records of each earlier attempt at the lease's run (its checkpoint may continue one),
        the latest attempt first.
        """
        run_id, number = lease.trial.user_attrs.get(vocab.RUN_ID), lease.trial.number
        earlier = [
            t
            for t in lease.study.get_trials(deepcopy=False)
            if t.user_attrs.get(vocab.RUN_ID) == run_id and t.number < number
        ]
        return [epochs_of(t) for t in sorted(earlier, key=lambda t: -t.number)]

    def finish(self, lease: Lease, status: RunStatus, value: float | None = None, error: str | None = None) -> None:
        """End the attempt: done (with the metric's value), pruned, or failed/diverged with its error,
        any password in it masked (a driver's error text may echo the store's URL).
        """
        queue.finish(lease, status, value, redact(error, self.target) if error else None)

    @staticmethod
    def requeue(lease: Lease, reason: str) -> bool:
        """End the attempt unfinished and queue the next one (False if the store had already ended it)."""
        return queue.requeue(lease.study, lease.trial, reason)

    @staticmethod
    def retry(lease: Lease, policy: RetryPolicy, retryable: bool) -> bool:
        """Queue another attempt of a failed run if the policy allows it now. Returns whether it did."""
        if not policy.again_now(lease.attempt, retryable):
            return False
        queue.enqueue_next(lease.study, lease.trial.user_attrs)
        return True

    def requeue_dead(self, policy: RetryPolicy = DEFAULT_POLICY, causes: dict[int, str] | None = None) -> list[Dead]:
        """Queue again the runs (and search trials) whose worker died, or leave failed those whose worker
        died more often than the policy allows; `causes`: how a worker ended, by pid, where this process
        saw it end.
        """
        return [dead for study in self._studies() for dead in crash.requeue_dead(study, self.database, policy, causes)]

    def ended_by_death(self, pid: int) -> bool:
        """Whether a run of the worker `pid` on this host was ended by its death (queued again, or failed)."""
        return any(crash.ended_by_death(study, pid) for study in self._studies())

    def may_come_back(self) -> bool:
        """Whether a running attempt could still return to the queue (its worker may yet die)."""
        return any(crash.may_come_back(study, self.database) for study in self._studies())

    # --- reading

    def trials(self) -> list[FrozenTrial]:
        """The sweep's trials and those of its searches (their run ids never collide)."""
        return [t for study in self._studies() for t in study.get_trials(deepcopy=False)]

    def current(self) -> dict[str, FrozenTrial]:
        """run id -> the attempt that speaks for it."""
        return latest_by_run(self.trials())

    def queued(self) -> list[RunSpec]:
        """The spec (a search slot's template) of every WAITING attempt."""
        return self._specs(TrialState.WAITING)

    def running(self) -> list[RunSpec]:
        """The spec (a search slot's template) of every RUNNING attempt: what the workers train now."""
        return self._specs(TrialState.RUNNING)

    def _specs(self, state: TrialState) -> list[RunSpec]:
        return [
            queue.spec_of(t)
            for study in self._studies()
            for t in study.get_trials(deepcopy=False, states=(state,))
            if queue.SPEC in t.user_attrs
        ]

    def search_slots(self) -> dict[str, RunSpec]:
        """slot id -> its template spec, for every trial slot of the sweep's searches."""
        slots: dict[str, RunSpec] = {}
        for found in self._searches.values():
            for trial in found.study.get_trials(deepcopy=False):
                slots.setdefault(trial.user_attrs[vocab.RUN_ID], queue.spec_of(trial))
        return slots

    def unplanned(self, runs: list[RunSpec]) -> list[str]:
        """The runs this store holds at settings `runs` do not plan (an earlier version of the grid file?).
        A planned point at another seed is planned: `run --until-decided` added it.
        """
        planned = {s.run_id for s in runs} | set(self.search_slots())
        points = {s.settings_hash for s in runs}
        return [
            run_id
            for run_id, trial in self.current().items()
            if run_id not in planned and queue.spec_of(trial).settings_hash not in points
        ]

    def pending(self, runs: list[RunSpec]) -> list[RunSpec]:
        """The runs of `runs` and the search slots that are queued or running."""
        current = self.current()
        planned = [s for s in runs if s.run_id in current and not status_of(current[s.run_id]).ended]
        return planned + [spec for slot, spec in self.search_slots().items() if not status_of(current[slot]).ended]

    def counts(self, run_ids: Iterable[str] | None = None) -> dict[RunStatus, int]:
        """Runs per status; with run_ids, only those runs, and unplanned ones count as pending."""
        return tables.counts(self.trials(), run_ids)

    def runs_table(self) -> pd.DataFrame:
        return tables.runs_table(self.trials(), self._search_settings())

    def epochs_table(self) -> pd.DataFrame:
        return tables.epochs_table(self.trials())

    def export_csv(self, folder: Path) -> tuple[Path, Path]:
        """Write runs.csv and epochs.csv into `folder` atomically; return their paths."""
        return tables.export_csv(self.trials(), folder, self._search_settings())

    def _search_settings(self) -> dict[str, dict[str, Any]]:
        """Each search's settings, with the range it ended with (widened, if it was)."""
        settings = {}
        for group_id, found in self._searches.items():
            low, high = found.lr_range
            settings[group_id] = {**found.settings, "lr_low": low, "lr_high": high}
        return settings


def _locked(engine: Any) -> Any:
    """A connection of `engine` that holds the queueing lock (`Store._queueing`)."""
    import sqlalchemy

    connection = engine.connect()
    try:
        connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": QUEUE_LOCK})
    except Exception:
        connection.close()
        raise
    return connection
