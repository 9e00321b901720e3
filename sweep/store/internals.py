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
- ``optuna.storages._heartbeat.BaseHeartbeat``, as a base class, and ``_get_stale_trial_ids``: a storage
  that hands every call to another (`ForwardingStorage`; `outage.RidingOut` rides out a database
  outage) keeps heartbeats as the RDBStorage under it does;
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
from typing import Any

import optuna
from optuna.storages._heartbeat import BaseHeartbeat
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
    from optuna.storages._heartbeat import is_heartbeat_enabled

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
    from optuna.storages._heartbeat import is_heartbeat_enabled

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


class ForwardingStorage(optuna.storages.BaseStorage, BaseHeartbeat):
    """A storage that hands each call of Optuna's storage interface (and of its heartbeats) to `forward`, by
    name. A method Optuna adds to the interface makes it abstract, so `verify` fails on it.
    """

    def forward(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        raise NotImplementedError

    def create_new_study(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("create_new_study", args, kwargs)

    def delete_study(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("delete_study", args, kwargs)

    def set_study_user_attr(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("set_study_user_attr", args, kwargs)

    def set_study_system_attr(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("set_study_system_attr", args, kwargs)

    def get_study_id_from_name(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("get_study_id_from_name", args, kwargs)

    def get_study_name_from_id(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("get_study_name_from_id", args, kwargs)

    def get_study_directions(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("get_study_directions", args, kwargs)

    def get_study_user_attrs(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("get_study_user_attrs", args, kwargs)

    def get_study_system_attrs(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("get_study_system_attrs", args, kwargs)

    def get_all_studies(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("get_all_studies", args, kwargs)

    def create_new_trial(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("create_new_trial", args, kwargs)

    def set_trial_param(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("set_trial_param", args, kwargs)

    def get_trial_id_from_study_id_trial_number(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("get_trial_id_from_study_id_trial_number", args, kwargs)

    def get_best_trial(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("get_best_trial", args, kwargs)

    def set_trial_state_values(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("set_trial_state_values", args, kwargs)

    def set_trial_intermediate_value(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("set_trial_intermediate_value", args, kwargs)

    def set_trial_user_attr(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("set_trial_user_attr", args, kwargs)

    def set_trial_system_attr(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("set_trial_system_attr", args, kwargs)

    def get_trial(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("get_trial", args, kwargs)

    def get_all_trials(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("get_all_trials", args, kwargs)

    def record_heartbeat(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("record_heartbeat", args, kwargs)

    def _get_stale_trial_ids(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward("_get_stale_trial_ids", args, kwargs)

    def get_heartbeat_interval(self) -> int | None:
        return self.forward("get_heartbeat_interval", (), {})

    def get_heartbeat_stale_trial_callback(self) -> Any:
        return self.forward("get_heartbeat_stale_trial_callback", (), {})


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
        _expect(_forwards(), f"{where}: a storage that forwards every call misses one of Optuna's storage methods")
        _expect(stale_trials(study) == [], f"{where}: a storage without heartbeats reports stale trials")
        with tempfile.TemporaryDirectory() as folder:
            backend = file_backend_locked_by_caller(f"{folder}/journal.log")
            backend.append_logs([{"op_code": 0}])
            _expect(list(backend.read_logs(0)) == [{"op_code": 0}], f"{where}: the journal file backend changed")
    except AttributeError as err:
        raise OptunaChanged(f"{where}: {err}") from None
    except (ImportError, TypeError) as err:
        raise OptunaChanged(f"{where}: {type(err).__name__}: {err}") from None


def _forwards() -> bool:
    """Whether `ForwardingStorage` has every method of Optuna's storage interface (none left abstract)."""

    class Plain(ForwardingStorage):
        def forward(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            return name

    try:
        return Plain().get_trial(0) == "get_trial"
    except TypeError:  # "Can't instantiate abstract class"
        return False


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise OptunaChanged(message)
