"""A results folder as export reads it: `load` reads runs.csv and epochs.csv once into `ExportedRuns`, or
says in one line (`ExportError`) why the folder is not one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sweep import vocab

# The metrics each tool shows as a run's result (the last record's value of each, where present): vocab's.
HEADLINE_METRICS = vocab.headline()


class ExportError(Exception):
    """Bad input or a missing extra: the message is one line, ready for stderr (exit code 2)."""


@dataclass(frozen=True)
class ExportedRuns:
    """A results folder as export reads it."""

    folder: Path
    runs: pd.DataFrame  # runs.csv: one row per run
    epochs: pd.DataFrame  # epochs.csv: one row per (run, record)

    @property
    def sweep(self) -> str:
        """The sweep's name (its runs' `sweep` column), else the folder's name."""
        names = self.runs["sweep"].dropna().unique() if "sweep" in self.runs else []
        return str(names[0]) if len(names) == 1 else self.folder.resolve().name

    @property
    def settings(self) -> list[str]:
        """Every setting column of runs.csv: the seed and the dotted grid keys."""
        return [c for c in self.runs.columns if c == vocab.SEED or "." in c]

    @property
    def varying(self) -> list[str]:
        """The settings whose value differs between the folder's runs (empty cells count as a value)."""
        return [c for c in self.settings if self.runs[c].nunique(dropna=False) > 1]

    @property
    def metrics(self) -> list[str]:
        """The per-record metric columns epochs.csv has (vocab's, then any other numeric column)."""
        known = [m for m in (*vocab.EPOCH_METRICS, *vocab.OPTIONAL_METRICS) if m in self.epochs]
        spec = {vocab.RUN_ID, vocab.STATUS, vocab.ROLE, vocab.SEARCH_GROUP, *self.settings}
        numeric = self.epochs.select_dtypes("number").columns
        extra = [c for c in numeric if c not in known and c not in spec and "." not in c]
        x_axis = (vocab.STEP,) if self.by_steps else (vocab.EPOCH, vocab.STEP)  # by steps, the epoch is a metric
        return [m for m in (*known, *extra) if m not in x_axis]

    @property
    def by_steps(self) -> bool:
        """Whether records fall inside epochs (eval_every_steps): then steps, not epochs, are the x axis."""
        epochs = self.epochs[vocab.EPOCH].dropna() if vocab.EPOCH in self.epochs else pd.Series(dtype=float)
        return bool((epochs % 1 != 0).any())

    def records(self, run_id: str) -> pd.DataFrame:
        """The run's records in training order."""
        rows = self.epochs[self.epochs[vocab.RUN_ID] == run_id]
        return rows.sort_values([vocab.STEP, vocab.EPOCH]) if vocab.STEP in rows else rows

    def x(self, record: pd.Series) -> int:
        """A record's step in the tools: its epoch, or, where any run of the folder has records inside
        epochs (eval_every_steps), its optimizer step for every run, so all runs share one x axis.
        """
        return int(record[vocab.STEP] if self.by_steps else record[vocab.EPOCH])


def load(folder: Path) -> ExportedRuns:
    """Read a results folder; ExportError (one line) if it is not one."""
    if not folder.is_dir():
        raise ExportError(f"{folder}: no such folder (give a results folder written by `sweep run`)")
    tables = []
    for name in (vocab.RUNS_CSV, vocab.EPOCHS_CSV):
        path = folder / name
        if not path.is_file():
            raise ExportError(f"{folder}: no {name} (give a results folder written by `sweep run`)")
        try:
            tables.append(pd.read_csv(path))
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
            raise ExportError(f"{path}: not a table ({str(err).splitlines()[0]})") from None
    runs, epochs = tables
    for name, table, needed in ((vocab.RUNS_CSV, runs, ("sweep",)), (vocab.EPOCHS_CSV, epochs, (vocab.EPOCH,))):
        missing = [c for c in (vocab.RUN_ID, *needed) if c not in table]
        if missing:
            raise ExportError(f"{folder / name}: no column {missing[0]} (a results folder written by `sweep run`?)")
    return ExportedRuns(folder, runs, epochs)


def plain(value: Any) -> bool | int | float | str | None:
    """A cell as a plain Python value; None for an empty cell."""
    if hasattr(value, "item"):
        value = value.item()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value if isinstance(value, (bool, int, float)) else str(value)
