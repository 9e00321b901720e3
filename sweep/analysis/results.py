"""Results folders read back: each folder's runs.csv and epochs.csv (with its quiet timing, sweep/analysis/timing.py),
concatenated in the order given, each run once (`load`), as a `Results`. pandas only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sweep import vocab
from sweep.analysis import timing
from sweep.vocab import RunStatus

SOURCE = "source"  # column added by `load`: the results folder a row came from
SOURCE_RANK = "source_rank"  # its position on the command line (0 = first), for tie-breaks
BACKEND_DEFAULT = vocab.TENSORFLOW  # the backend of results written before runs.csv recorded it


class ResultsError(Exception):
    """A results folder that cannot be read. The message is one line, ready for stderr."""


@dataclass(frozen=True)
class Results:
    """Runs of one or more results folders; `epochs` holds only finished (done) runs of the grid.

    Learning-rate search trials and the re-runs of their best lr (the `role` column)
    answer their own question (sweep/analysis/tuning.py), so the claims never see them.
    """

    folders: tuple[Path, ...]
    runs: pd.DataFrame  # every run, every status, every role; one row per (spec, role)
    epochs: pd.DataFrame  # one row per (done grid run, epoch)
    tuned: pd.DataFrame = field(default_factory=pd.DataFrame)  # one row per (done tuned run, epoch)
    # `epochs` before runs shared between folders are counted once: each folder's figures show its own sweep whole
    folder_epochs: pd.DataFrame = field(default_factory=pd.DataFrame)


def load(folders: Sequence[str | Path]) -> Results:
    """Read and concatenate results folders, in the order given.

    A run is its resolved spec: two rows with the same spec hash and role are the
    same run (training is deterministic) even when their slugs differ, e.g.
    ``bs32-s0-62721535`` in a sweep that varies the batch size and ``s0-62721535``
    in one that does not. The first folder's copy is kept.
    """
    paths = tuple(Path(f) for f in folders)
    pairs = [tuple(t.assign(**{SOURCE_RANK: rank}) for t in _read_folder(p)) for rank, p in enumerate(paths)]
    runs = pd.concat([r for r, _ in pairs], ignore_index=True) if pairs else pd.DataFrame()
    epochs = _with_role(pd.concat([e for _, e in pairs], ignore_index=True) if pairs else pd.DataFrame())
    grid, tuned = _done_by_role(_first_copies(epochs, vocab.EPOCH))
    return Results(
        folders=paths,
        runs=_first_copies(_with_role(runs)),
        epochs=grid,
        tuned=tuned,
        folder_epochs=_done_by_role(epochs)[0],
    )


def _done_by_role(epochs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The done runs' rows of the grid and of the tuned re-runs, without the role column."""
    if vocab.RUN_ID in epochs and len(epochs):
        epochs = epochs[epochs[vocab.STATUS] == RunStatus.DONE].reset_index(drop=True)
    by_role = (
        {role: rows.drop(columns=vocab.ROLE).reset_index(drop=True) for role, rows in epochs.groupby(vocab.ROLE)}
        if vocab.ROLE in epochs
        else {}
    )
    empty = epochs.drop(columns=vocab.ROLE, errors="ignore").iloc[0:0]
    return by_role.get(vocab.GRID, empty), by_role.get(vocab.TUNED, empty)


def spec_hash(run_ids: pd.Series) -> pd.Series:
    """The hash of each run's resolved spec: the part of its id after the last '-' (`sweep.config.plan.RunSpec.run_id`).

    The slug before it only names the settings its sweep varies, so it is a label, not an identity.
    """
    return run_ids.astype(str).str.rsplit("-", n=1).str[-1]


def _first_copies(table: pd.DataFrame, *per_run: str) -> pd.DataFrame:
    """The rows of each run's copy in the first folder that has it (one row per run, or per run and `per_run`).

    A run is its spec hash within its role; a search slot whose lr is not drawn yet
    shows its slot id (``<group>-t<k>``), so its search group is part of its identity too.
    All of a run's rows come from one folder: a copy cut short in one folder never
    lends its epochs to another folder's copy.
    """
    if vocab.RUN_ID not in table or table.empty:
        return table
    identity = ["_spec", *(c for c in (vocab.ROLE, vocab.SEARCH_GROUP) if c in table)]
    keyed = table.assign(_spec=spec_hash(table[vocab.RUN_ID]))
    if vocab.BACKEND in table:  # the same spec on another backend is another run (an empty cell: tensorflow)
        keyed = keyed.assign(_backend=table[vocab.BACKEND].fillna(BACKEND_DEFAULT))
        identity.append("_backend")
    first = keyed.groupby(identity, dropna=False)[SOURCE_RANK].transform("min")
    kept = keyed[keyed[SOURCE_RANK] == first]
    kept = kept[~kept.duplicated([*identity, *per_run], keep="first")]
    return table.loc[kept.index].reset_index(drop=True)


def _with_role(table: pd.DataFrame) -> pd.DataFrame:
    """A `role` column; results written before learning-rate searches existed hold grid runs only."""
    if table.empty and not len(table.columns):
        return table
    role = table[vocab.ROLE].fillna(vocab.GRID) if vocab.ROLE in table else vocab.GRID
    return table.assign(**{vocab.ROLE: role})


def _read_folder(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    missing = [n for n in (vocab.RUNS_CSV, vocab.EPOCHS_CSV) if not (folder / n).is_file()]
    if missing:
        raise ResultsError(
            f"{folder}: no {' or '.join(missing)} here; make it with `sweep run GRID --results {folder}`"
        )
    runs, epochs = (_read_csv(folder / n).assign(**{SOURCE: str(folder)}) for n in (vocab.RUNS_CSV, vocab.EPOCHS_CSV))
    return runs, timing.attach(folder, _with_backend(epochs, runs))


def _with_backend(epochs: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """`epochs` with each run's backend from runs.csv, so it counts as a setting (`setting_columns`).
    Results written before the column existed are left as they are: their runs ran on tensorflow.
    """
    return with_run_column(epochs, runs, vocab.BACKEND)


def with_run_column(table: pd.DataFrame, runs: pd.DataFrame, column: str) -> pd.DataFrame:
    """`table` with runs.csv's `column` for each row's run; `table` as it is where runs.csv lacks it."""
    if column not in runs or vocab.RUN_ID not in table or table.empty:
        return table
    values = runs.drop_duplicates(vocab.RUN_ID).set_index(vocab.RUN_ID)[column]
    return table.assign(**{column: table[vocab.RUN_ID].map(values)})


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:  # a sweep with no runs writes an empty file
        return pd.DataFrame()
