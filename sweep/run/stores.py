"""Where a sweep's results and store are (`locations`), and its store opened, or why not in one line
(`open_store`, `same_backend`): what `run`, `status`, `export`, `--until-decided` and the study open first.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Protocol

from sweep import vocab
from sweep.config import GridFile
from sweep.exits import UsageError
from sweep.store import Store, storage
from sweep.store.journal import NotAJournal
from sweep.store.queue import INFO
from sweep.store.secrets import redact, secrets_of
from sweep.train import backends


class Where(Protocol):
    """Where a sweep's results go and its store is: the fields of `orchestrate.Options` read here."""

    @property
    def results(self) -> Path | None: ...

    @property
    def storage(self) -> str | None: ...


def locations(grid: GridFile, options: Where) -> tuple[Path, str]:
    """The results folder and the store's target."""
    results = options.results or Path("results") / grid.name
    target = options.storage or str(results / vocab.JOURNAL_FILE)
    if not storage.is_database(target) and secrets_of(target):  # not a file name: a libpq key=value string
        raise UsageError(
            "--storage: a key=value connection string is not a store; give a URL, "
            "postgresql://USER:PASSWORD@HOST/DB, or a journal file"
        )
    return results, target


def same_backend(store: Store) -> None:
    """Refuse a store whose runs trained on another backend: it would count them as this one's finished
    runs (a run id names the settings, not the backend). Runs recorded before the backend was: tensorflow.
    """
    here = backends.current()
    for trial in store.trials():
        info = trial.user_attrs.get(INFO)
        theirs = info.get(vocab.BACKEND, backends.TENSORFLOW) if isinstance(info, dict) else here
        if theirs != here:
            raise UsageError(
                f"{store.shown}: its runs trained on {theirs} and this process trains on {here} "
                f"(KERAS_BACKEND); give the {here} runs a results folder of their own (--results DIR)"
            )


def open_store(target: str, name: str, create: bool, read_only: bool = False) -> Store:
    """The sweep's store, or UsageError (one line, password masked) saying why it cannot be opened.
    `read_only`: a command that only reads it writes nothing to a journal, not even its repair.
    A journal's repair is said on stderr, where a worker's lines go to its log.
    """
    try:
        return Store.open(target, name, create=create, read_only=read_only, say=_say_repaired)
    except NotAJournal as err:
        raise UsageError(str(err)) from None
    except storage.NewerStoreError as err:
        raise UsageError(f"{redact(target, target)}: {err}") from None
    except KeyError:
        raise UsageError(f"the store {redact(target, target)} has no sweep named {name!r}") from None
    except Exception as err:  # a bad URL, an unreachable database, a corrupt journal
        detail = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise UsageError(redact(f"cannot open the store {target}: {type(err).__name__}: {detail}", target)) from None


def _say_repaired(line: str) -> None:
    print(line, file=sys.stderr)
