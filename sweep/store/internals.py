"""Every use of Optuna's private API in batchsweep, and a check that it still holds.

Checked against Optuna 5.1.0 (`CHECKED_VERSIONS`). What is private, and why it is needed:

- ``Study._storage``: the storage a study reads and writes (no public getter);
- ``FrozenTrial._trial_id``: the storage's id of a trial, needed to act on a trial
  this process did not create (claim it, mark it, hand it to ``optuna.Trial``);
- ``storage.set_trial_state_values(id, RUNNING)``: the atomic WAITING -> RUNNING step
  that ``Study.ask`` uses through its private ``_pop_waiting_trial_id``. ``ask()`` itself
  is no use here: on an empty queue it creates a new, unplanned trial;
- ``optuna.storages.journal._file.BaseJournalFileLock``: a lock that the caller already
  holds, so `storage.RepairingJournal` can repair the file and append under one hold of
  Optuna's (non-re-entrant) journal lock, through Optuna's own file backend;
- ``optuna.storages._heartbeat.get_heartbeat_thread``: the thread that
  ``Study.optimize`` runs beside a trial to record its heartbeat (database stores);
  ``BaseHeartbeat`` and ``is_heartbeat_enabled``: whether a storage keeps heartbeats, so a
  lease records its first one at once;
- ``storage._get_stale_trial_ids``: the RUNNING trials whose heartbeat is stale, which
  ``fail_stale_trials`` fails without a word; a dead worker's run must first have its death
  counted and said (`crash.requeue_dead`).

`verify()` exercises each of them on a throwaway in-memory study and raises
`OptunaChanged` with a one-line message naming what broke; a test calls it, so an
Optuna upgrade that moves any of them fails loudly instead of corrupting queues.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator

import optuna
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

CHECKED_VERSIONS = ("5.1.0",)


class OptunaChanged(Exception):
    """Optuna's private API no longer behaves as this module expects."""


def storage_of(study: optuna.Study) -> optuna.storages.BaseStorage:
    return study._storage


def handle(study: optuna.Study, frozen: FrozenTrial) -> optuna.Trial:
    """A live `optuna.Trial` for a trial of `study` that another process may have created."""
    return optuna.Trial(study, frozen._trial_id)


def take(study: optuna.Study, frozen: FrozenTrial) -> bool:
    """Atomically move a WAITING trial to RUNNING, with a first heartbeat where the storage keeps them;
    False if another process took it first.

    The first heartbeat is what lets a lease survive its worker: Optuna fails only a stale heartbeat
    (`fail_stale_trials`) and ignores a RUNNING trial that never had one, so a worker killed between
    claiming it and its heartbeat thread's start would leave the run RUNNING for ever.
    """
    from optuna.storages._heartbeat import BaseHeartbeat, is_heartbeat_enabled

    storage = study._storage
    try:
        taken = bool(storage.set_trial_state_values(frozen._trial_id, state=TrialState.RUNNING))
    except optuna.exceptions.UpdateFinishedTrialError:
        return False
    if taken and isinstance(storage, BaseHeartbeat) and is_heartbeat_enabled(storage):
        storage.record_heartbeat(frozen._trial_id)
    return taken


def stale_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The RUNNING trials whose heartbeat is older than the storage's grace period (none without heartbeats)."""
    from optuna.storages._heartbeat import BaseHeartbeat, is_heartbeat_enabled

    storage = study._storage
    if not (isinstance(storage, BaseHeartbeat) and is_heartbeat_enabled(storage)):
        return []
    return [storage.get_trial(trial_id) for trial_id in storage._get_stale_trial_ids(study._study_id)]


@contextlib.contextmanager
def heartbeat(trial: optuna.Trial) -> Iterator[None]:
    """Optuna's own heartbeat thread for `trial` while the block runs (a no-op without heartbeats)."""
    from optuna.storages._heartbeat import get_heartbeat_thread

    with get_heartbeat_thread(trial._trial_id, trial.study._storage):
        yield


def file_backend_locked_by_caller(path: str) -> JournalFileBackend:
    """Optuna's journal file backend whose appends take no lock: the caller holds Optuna's lock."""
    from optuna.storages.journal._file import BaseJournalFileLock

    class HeldByCaller(BaseJournalFileLock):
        def acquire(self) -> bool:
            return True

        def release(self) -> None:
            pass

    return JournalFileBackend(path, lock_obj=HeldByCaller())


def verify() -> None:
    """Raise OptunaChanged (one line) if any private name above is gone or behaves differently."""
    where = f"Optuna {optuna.__version__} (sweep/store/internals.py was checked against {', '.join(CHECKED_VERSIONS)})"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study()
    study.enqueue_trial({"x": 1.0})
    try:
        frozen = study.get_trials(deepcopy=False)[0]
        _expect(isinstance(storage_of(study), optuna.storages.BaseStorage), f"{where}: Study._storage is gone")
        _expect(isinstance(frozen._trial_id, int), f"{where}: FrozenTrial._trial_id is gone")
        _expect(take(study, frozen), f"{where}: set_trial_state_values no longer claims a WAITING trial")
        _expect(not take(study, frozen), f"{where}: set_trial_state_values let a RUNNING trial be claimed twice")
        trial = handle(study, frozen)
        _expect(trial.number == frozen.number, f"{where}: optuna.Trial(study, _trial_id) names another trial")
        with heartbeat(trial):
            pass
        _expect(stale_trials(study) == [], f"{where}: a storage without heartbeats reports stale trials")
        with tempfile.TemporaryDirectory() as folder:
            backend = file_backend_locked_by_caller(f"{folder}/journal.log")
            backend.append_logs([{"op_code": 0}])
            _expect(list(backend.read_logs(0)) == [{"op_code": 0}], f"{where}: the journal file backend changed")
    except AttributeError as err:
        raise OptunaChanged(f"{where}: {err}") from None
    except (ImportError, TypeError) as err:
        raise OptunaChanged(f"{where}: {type(err).__name__}: {err}") from None


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise OptunaChanged(message)
