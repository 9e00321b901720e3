"""The outage policy (sweep/store/outage.py): which errors are waited out, for how long, how often it tries, what
it ends with, and a try whose answer was lost. The real server stopped mid-sweep: tests/test_db_outage.py.
"""

from __future__ import annotations

from pathlib import Path

import optuna
import psycopg
import pytest
import sqlalchemy.exc
from conftest import write_grid
from optuna.trial import TrialState

from sweep.config import load_grid
from sweep.config.plan import plan
from sweep.exits import StoreUnreachable
from sweep.store import Store, crash, internals, outage, storage

pytestmark = pytest.mark.unit

URL = "postgresql://u:Pw-secret-9@db.example/sweeps"


def _gone() -> sqlalchemy.exc.OperationalError:
    return sqlalchemy.exc.OperationalError("SELECT 1", {}, psycopg.OperationalError("server closed the connection"))


def _wrapped(err: BaseException) -> optuna.exceptions.StorageInternalError:
    """As Optuna raises it: a StorageInternalError from SQLAlchemy's error."""
    try:
        raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from err
    except optuna.exceptions.StorageInternalError as wrapped:
        return wrapped


def test_only_a_lost_connection_is_waited_out() -> None:
    invalidated = sqlalchemy.exc.DBAPIError("SELECT 1", {}, Exception("gone"), connection_invalidated=True)
    assert all(outage.is_transient(e) for e in (_gone(), _wrapped(_gone()), invalidated, psycopg.OperationalError()))
    refused = sqlalchemy.exc.IntegrityError("INSERT", {}, Exception("duplicate key"))
    still_there = sqlalchemy.exc.DBAPIError("SELECT 1", {}, Exception("bad value"), connection_invalidated=False)
    others = (refused, _wrapped(refused), still_there, ValueError("x"), OSError(28, "No space left on device"))
    assert not any(outage.is_transient(e) for e in others)


def test_a_call_is_tried_again_with_doubling_waits_until_it_goes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr(outage.time, "sleep", waits.append)
    failures = iter([_gone()] * 6)

    def flaky(x: int) -> int:
        err = next(failures, None)
        if err is not None:
            raise _wrapped(err)
        return 2 * x

    assert outage.call(URL, flaky, 21) == 42
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]  # FIRST_WAIT_SECONDS doubled up to LONGEST_WAIT_SECONDS


def test_past_the_bound_it_ends_in_one_line_naming_the_database_without_its_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(outage.BOUND_ENV, "0")
    calls = []

    def down() -> None:
        calls.append(1)
        raise _wrapped(_gone())

    with pytest.raises(StoreUnreachable) as raised:
        outage.call(URL, down)
    assert str(raised.value) == (
        "the database postgresql://u:***@db.example/sweeps could not be reached for 0 s; once it is back, "
        "run the same command again: the runs its workers held are queued again"
    )
    assert len(calls) == 1


def test_any_other_error_is_raised_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outage.time, "sleep", lambda _: pytest.fail("waited on an error that is no outage"))
    refused = sqlalchemy.exc.IntegrityError("INSERT", {}, Exception("duplicate key"))

    def bad() -> None:
        raise _wrapped(refused)

    with pytest.raises(optuna.exceptions.StorageInternalError):
        outage.call(URL, bad)


def test_the_grace_outlasts_the_bound_and_the_longest_wait_by_3_heartbeats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(outage.BOUND_ENV, raising=False)
    assert outage.bound_seconds() == 60  # docs/internals.md: outages up to 60 s are ridden out
    assert outage.grace_seconds(20) == 60 + 8 + 3 * 20
    monkeypatch.setenv(outage.BOUND_ENV, "90")
    assert outage.grace_seconds(1) == 90 + 8 + 3


def test_a_state_change_whose_answer_was_lost_is_taken_as_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server committed the end of a trial, then the connection broke before it answered: the try
    after it finds the trial ended as asked, which is what was asked, not someone else's doing.
    """
    monkeypatch.setattr(outage.time, "sleep", lambda _: None)
    backend = storage.open_storage(f"sqlite:///{tmp_path / 'store.db'}")
    assert isinstance(backend, outage.RidingOut)
    study = optuna.create_study(storage=backend, study_name="s")
    trial = study.ask()
    rdb = backend.rdb
    real = rdb.set_trial_state_values
    lost = []

    def commit_then_break(trial_id: int, state: TrialState, values: object = None) -> bool:
        done = real(trial_id, state, values)
        if not lost:
            lost.append(trial_id)
            raise _wrapped(_gone())
        return done

    monkeypatch.setattr(rdb, "set_trial_state_values", commit_then_break)
    study.tell(trial, 1.0)
    assert lost and study.trials[0].state == TrialState.COMPLETE
    other = study.ask()
    study.tell(other, state=TrialState.FAIL)
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):  # the first try meets it ended: an error
        backend.set_trial_state_values(other._trial_id, TrialState.COMPLETE, [1.0])


def test_once_a_call_gave_up_every_later_one_fails_at_once_and_a_heartbeat_gives_up_without_a_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A heartbeat thread that gave up beats no more: the worker's next call must stop it, even if the
    database is back, or it would train on while its run goes stale.
    """
    monkeypatch.setenv(outage.BOUND_ENV, "0")
    with Store.open(f"sqlite:///{tmp_path / 'store.db'}", "s") as store:
        backend = store.sweep._storage
        assert isinstance(backend, outage.RidingOut)
        trial = store.sweep.ask()
        real = backend.rdb.record_heartbeat
        monkeypatch.setattr(backend.rdb, "record_heartbeat", lambda _: (_ for _ in ()).throw(_wrapped(_gone())))
        backend.record_heartbeat(trial._trial_id)  # gives up, raises nothing
        monkeypatch.setattr(backend.rdb, "record_heartbeat", real)  # the database is back
        with pytest.raises(StoreUnreachable):
            store.sweep.get_trials()


def test_on_a_database_a_dead_worker_of_this_machine_is_found_at_once_and_a_claim_never_completed_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the next `run` finds after an outage past the bound: the runs of its machine's gone workers
    at once; a run claimed with no worker named (a lost answer) only once the heartbeat grace has passed;
    never a run whose worker is on another machine of the same name.
    """
    runs = plan(load_grid(write_grid(tmp_path, "name: s\nseeds: [0, 1, 2]\ngrid: {train.batch_size: [8]}\n")))
    with Store.open(f"sqlite:///{tmp_path / 'store.db'}", "s") as store:
        store.enqueue(runs)
        here, elsewhere = store.claim_next(), store.claim_next()
        assert here is not None and elsewhere is not None
        gone = 2**22 + 17  # above Linux's default pid_max: no process has it
        for lease in (here, elsewhere):
            lease.trial.set_user_attr(crash.WORKER_PID, gone)
        elsewhere.trial.set_user_attr(crash.WORKER_BOOT, "another-machine")
        unnamed = store.sweep.get_trials(deepcopy=False, states=(TrialState.WAITING,))[0]
        assert internals.take(store.sweep, unnamed)  # claimed, and no worker ever said it holds it
        assert [d.run_id for d in store.requeue_dead()] == [here.spec.run_id]
        monkeypatch.setattr(crash, "_seconds_since", lambda _: outage.grace_seconds(storage.heartbeat_seconds()) + 1)
        assert [d.run_id for d in store.requeue_dead()] == [unnamed.user_attrs["run_id"]]
        running = store.sweep.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        assert [t.number for t in running] == [elsewhere.trial.number]
