"""A results folder as a command's argument (`status`, `export`): its store, and the sweep it holds."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sweep import vocab
from sweep.exits import UsageError
from sweep.store import storage
from sweep.store.journal import NotAJournal
from sweep.store.secrets import redact


def store_of(folder: Path, given: str | None) -> str:
    """The folder's store: --storage (or $BATCHSWEEP_STORAGE) where given, else its journal.log."""
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder (give a grid file or a results folder written by `sweep run`)")
    return existing(given or str(folder / vocab.JOURNAL_FILE))


def existing(target: str) -> str:
    """`target`, refused (one line) where it names a journal file that is not there."""
    if not storage.is_database(target) and not Path(target).is_file():
        raise UsageError(
            redact(
                f"{target}: no such journal file; give the sweep's store with --storage "
                "(or queue the runs first: `sweep run GRID --no-train`)",
                target,
            )
        )
    return target


def sweep_of(folder: Path, target: str, study: str | None = None) -> str:
    """The sweep to read: --study, else the one named in the folder's runs.csv, else the one sweep its store
    holds (whatever the folder is called); a store of several sweeps needs --study.
    """
    if study:
        return study
    named = _named_in_runs(folder)
    if named:
        return named
    try:
        found = storage.sweep_names(storage.open_storage(target, read_only=True))
    except NotAJournal as err:
        raise UsageError(str(err)) from None
    if len(found) == 1:
        return found[0]
    if not found:
        raise UsageError(redact(f"{target} holds no sweep yet; queue one with `sweep run GRID`", target))
    raise UsageError(redact(f"{target} holds several sweeps ({', '.join(found)}); name one with --study", target))


def _named_in_runs(folder: Path) -> str | None:
    runs = folder / vocab.RUNS_CSV
    if not runs.is_file():
        return None
    try:
        names = pd.read_csv(runs, usecols=["sweep"])["sweep"].dropna().unique()
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return None
    return str(names[0]) if len(names) == 1 else None
