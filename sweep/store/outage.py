"""Database outages ridden out: every call a process makes to a database store, once the store is open, is
tried again with exponential backoff while its error says the connection to the server is gone. No TensorFlow.

Why: a database restart (`pg_ctl restart`, a failover, a network cut of a minute) used to end the sweep: the
coordinator and every worker died on the first failed call, and their runs stayed RUNNING until a manual
rerun. Now a process waits the outage out, up to `bound_seconds()` (BOUND_SECONDS, 60 s: longer than a
restart takes, short enough that a sweep whose database is gone for good ends within about a minute, not
hours later). Waits start at FIRST_WAIT_SECONDS and double up to LONGEST_WAIT_SECONDS, so the server is not
flooded while it starts and a call goes on within seconds of its return.

Only errors that say the connection is gone are waited out (`is_transient`): SQLAlchemy's OperationalError
(it wraps the driver's), a DBAPIError whose connection SQLAlchemy invalidated, psycopg's OperationalError;
Optuna re-raises each as a StorageInternalError, so the error's causes are read too. A wrong query, a full
disk or a refused value fails at once, as before. Opening the store is not retried: a wrong URL or password
is said at once.

An outage longer than the bound ends the process with StoreUnreachable: one line naming the database, its
password masked. A worker's runs stay RUNNING in the store it cannot reach; the next `run` (or any worker,
by its heartbeat) queues them again (sweep/store/crash.py).

The grace: a worker that waits out an outage sends no heartbeat meanwhile. `grace_seconds` is the bound, the
longest wait between two tries and 3 heartbeat intervals, so a worker that rode out an outage within the
bound has beaten again before any process may judge its runs stale (`crash.requeue_dead`; Optuna's own
`fail_stale_trials` runs only inside `Study.optimize`, which batchsweep never calls).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import TrialState

from sweep.exits import StoreUnreachable
from sweep.store import internals
from sweep.store.secrets import redact

BOUND_SECONDS = 60.0  # the longest outage ridden out
BOUND_ENV = "BATCHSWEEP_OUTAGE_SECONDS"  # a shorter or longer bound (the tests shorten it)
FIRST_WAIT_SECONDS = 0.5
LONGEST_WAIT_SECONDS = 8.0
HEARTBEATS_OF_GRACE = 3  # a run is stale once its worker missed this many heartbeats past the outage bound

T = TypeVar("T")


def bound_seconds() -> float:
    """The longest outage a process waits out ($BATCHSWEEP_OUTAGE_SECONDS, default BOUND_SECONDS)."""
    return max(0.0, float(os.environ.get(BOUND_ENV, BOUND_SECONDS)))


def grace_seconds(beat: int) -> int:
    """How old a RUNNING trial's last heartbeat may be before it is stale, for heartbeats every `beat` s."""
    return math.ceil(bound_seconds() + LONGEST_WAIT_SECONDS) + HEARTBEATS_OF_GRACE * beat


def is_transient(err: BaseException) -> bool:
    """Whether `err` (or an error it was raised from) says the connection to the database is gone."""
    import sqlalchemy.exc

    kinds: tuple[type[BaseException], ...] = (sqlalchemy.exc.OperationalError,)
    try:
        import psycopg

        kinds += (psycopg.OperationalError,)
    except ImportError:  # another driver: SQLAlchemy's own classes still say it
        pass
    return any(
        isinstance(cause, kinds) or (isinstance(cause, sqlalchemy.exc.DBAPIError) and cause.connection_invalidated)
        for cause in _causes(err)
    )


def _causes(err: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    found: BaseException | None = err
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        yield found
        found = found.__cause__ or found.__context__


def call(target: str, action: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`action(*args, **kwargs)`, tried again while the database `target` is unreachable, for up to the bound;
    then StoreUnreachable. Any other error is raised at once.
    """
    deadline = time.monotonic() + bound_seconds()
    wait = FIRST_WAIT_SECONDS
    while True:
        try:
            return action(*args, **kwargs)
        except Exception as err:
            left = deadline - time.monotonic()
            if not is_transient(err):
                raise
            if left <= 0:
                raise unreachable(target) from None
        time.sleep(min(wait, left))
        wait = min(2 * wait, LONGEST_WAIT_SECONDS)


def unreachable(target: str) -> StoreUnreachable:
    """The one line a process ends with when its database stays away past the bound (password masked)."""
    return StoreUnreachable(
        f"the database {redact(target, target)} could not be reached for {bound_seconds():.0f} s; "
        "once it is back, run the same command again: the runs its workers held are queued again"
    )


class RidingOut(internals.ForwardingStorage):
    """A database storage whose every call rides out an outage (`call`): what a sweep's store, its searches
    and Optuna's heartbeat thread call. `inner` is Optuna's (cached) storage; `rdb` the RDBStorage under it,
    whose engine, session and heartbeat settings are read through this object.
    """

    def __init__(self, inner: Any, rdb: Any, target: str) -> None:
        self._inner, self.rdb, self.target = inner, rdb, target
        self._lost = False  # a call gave up: every later one fails at once, the database is deemed gone

    def __getattr__(self, name: str) -> Any:  # engine, grace_period, heartbeat_interval: the RDBStorage's
        if name == "rdb":  # not set yet (a copy being made): no attribute to forward to
            raise AttributeError(name)
        return getattr(self.rdb, name)

    def forward(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self._ride(getattr(self._inner, name), *args, **kwargs)

    def remove_session(self) -> None:
        self.rdb.remove_session()

    def _ride(self, action: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`call`, once no call of this storage has given up; after one has, StoreUnreachable at once."""
        if self._lost:
            raise unreachable(self.target)
        try:
            return call(self.target, action, *args, **kwargs)
        except StoreUnreachable:
            self._lost = True
            raise

    def record_heartbeat(self, trial_id: int) -> None:
        """Optuna's heartbeat thread's call. Past the bound it gives up without a word (a thread that raised
        would print a traceback and beat no more); the worker's next call to the store raises StoreUnreachable,
        so a worker whose heartbeat stopped never trains on unseen while its run goes stale.
        """
        with contextlib.suppress(StoreUnreachable):
            self._ride(self._inner.record_heartbeat, trial_id)

    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Any = None) -> bool:
        """As Optuna's, where a try after the first finds the trial already ended as asked: the server had
        committed the try before, whose answer the outage lost.
        """
        tries = 0

        def attempt() -> bool:
            nonlocal tries
            tries += 1
            try:
                return bool(self._inner.set_trial_state_values(trial_id, state, values))
            except UpdateFinishedTrialError:
                if tries == 1 or not state.is_finished() or self._inner.get_trial(trial_id).state != state:
                    raise
                return True

        return self._ride(attempt)

    def get_heartbeat_interval(self) -> int | None:
        return self.rdb.get_heartbeat_interval()

    def get_heartbeat_stale_trial_callback(self) -> Any:
        return self.rdb.get_heartbeat_stale_trial_callback()
