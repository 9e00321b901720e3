"""Opening a store: a journal file (recognised, then repaired or only read: sweep/store/journal.py) or a
database URL (with Optuna's heartbeats), and the sweep study with its store-format version. No TensorFlow.

Plain Optuna reads every store: ``optuna.load_study(study_name=NAME,
storage=JournalStorage(JournalFileBackend("results/NAME/journal.log")))``.
"""

from __future__ import annotations

import errno
import os
import time
import warnings
from pathlib import Path

import optuna

from sweep import vocab
from sweep.store import outage
from sweep.store.journal import ReadOnlyJournal, RepairingJournal, Say, recognise
from sweep.store.params import SpecSampler

STORAGE_ENV = vocab.STORAGE_ENV
DISK_FULL_ADVICE = (
    "free some space, then run the same command again: the store reopens "
    "(a record cut off mid-line is removed, a copy kept beside the journal) and keeps every finished epoch"
)

# What a sweep study holds, as a number: 1 = runs only (no `format` attribute); 2 = roles and
# learning-rate searches. A newer harness may read an older store, never the other way round.
STORE_FORMAT = 2
FORMAT_ATTR = "batchsweep_format"
VERSION_ATTR = "batchsweep_version"


class NewerStoreError(Exception):
    """The sweep was written by a newer batchsweep. The message is one line, ready for stderr."""


def is_disk_full(err: BaseException) -> bool:
    """ENOSPC or EDQUOT: the store (or the results folder) cannot grow; nothing else can go on."""
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)


def is_database(target: str) -> bool:
    return "://" in target


def heartbeat_seconds() -> int:
    """How often a worker on a database store proves it is alive ($BATCHSWEEP_HEARTBEAT, default 20).

    A RUNNING trial whose heartbeat is older than the grace (`outage.grace_seconds`: the outage bound, the
    longest wait between two tries and 3 of these) is taken as dead and re-queued.
    """
    return max(1, int(os.environ.get("BATCHSWEEP_HEARTBEAT", "20")))


def open_storage(target: str | Path, read_only: bool = False, say: Say | None = None) -> optuna.storages.BaseStorage:
    """A journal file path, or a database URL (postgresql://...) whose running trials keep heartbeats:
    one whose heartbeat is older than the grace lost its worker (`crash.requeue_dead`). Once open, every
    call to a database rides out an outage up to the bound (`outage.RidingOut`).

    A journal is recognised before anything is written (NotAJournal) and repaired (`say` hears what was
    removed); `read_only` (`status`, `export`) reads it without writing anything, not even a repair.
    """
    text = str(target)
    if is_database(text):
        if text.startswith("postgresql://"):  # the psycopg 3 driver, whatever SQLAlchemy's default
            text = "postgresql+psycopg://" + text[len("postgresql://") :]
        rdb = _database(text, heartbeat_seconds())  # opened: a wrong URL or password is said at once
        return outage.RidingOut(optuna.storages.get_storage(rdb), rdb, str(target))
    if read_only:
        return optuna.storages.JournalStorage(ReadOnlyJournal(text))
    recognise(Path(text))  # before its folder is made: a file that is no journal is refused untouched
    Path(text).parent.mkdir(parents=True, exist_ok=True)
    return optuna.storages.JournalStorage(RepairingJournal(text, say))


SCHEMA_TRIES = 5  # processes that open a new database at once: all but one find Optuna's tables half made


def _database(url: str, beat: int) -> optuna.storages.RDBStorage:
    """Optuna's storage on a database. The first open creates Optuna's tables; several processes opening a
    new database at the same moment (the tasks of a Slurm array) race to create them, and the losers fail
    on a table or type that now exists. They try again a moment later, when the tables are there.
    """
    import sqlalchemy.exc

    for attempt in range(1, SCHEMA_TRIES):
        try:
            return _rdb(url, beat)
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError) as err:
            if isinstance(err, sqlalchemy.exc.ProgrammingError) and "already exists" not in str(err):
                raise  # a bad connection option, say: no other process will make it right
            time.sleep(0.2 * attempt)
    return _rdb(url, beat)  # the last try: its error, if any, is the user's to see


def _rdb(url: str, beat: int) -> optuna.storages.RDBStorage:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(url, heartbeat_interval=beat, grace_period=outage.grace_seconds(beat))


def sweep_names(storage: optuna.storages.BaseStorage) -> list[str]:
    """The sweeps a store holds: its studies that are not a sweep's learning-rate searches."""
    names = optuna.study.get_all_study_names(storage)
    return sorted(name for name in names if vocab.LR_SEARCH_MARK not in name)


def open_study(storage: optuna.storages.BaseStorage, name: str, create: bool = True) -> optuna.Study:
    """Load the sweep study (KeyError if missing and not `create`); refuse one a newer version wrote."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:  # load first: opening an existing sweep writes nothing (a newer one is refused untouched)
        study = optuna.load_study(study_name=name, storage=storage, sampler=SpecSampler())
    except KeyError:
        if not create:
            raise
        study = optuna.create_study(
            study_name=name, storage=storage, sampler=SpecSampler(), direction="maximize", load_if_exists=True
        )
    attrs = study.user_attrs
    found = int(attrs.get(FORMAT_ATTR, 1))
    if found > STORE_FORMAT:
        raise NewerStoreError(
            f"sweep {name!r} was written by batchsweep {attrs.get(VERSION_ATTR, '?')} (store format {found}); "
            f"this is batchsweep {_version()} (store format {STORE_FORMAT}): upgrade batchsweep to read or extend it"
        )
    if create and FORMAT_ATTR not in attrs and not study.get_trials(deepcopy=False):
        study.set_user_attr(FORMAT_ATTR, STORE_FORMAT)  # a new sweep: say what wrote it
        study.set_user_attr(VERSION_ATTR, _version())
    return study


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("batchsweep")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
