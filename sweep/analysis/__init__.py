"""Results folders -> one table per question: runs, per-epoch rows, per-run snapshots, curves over seeds.

Reads only ``runs.csv`` and ``epochs.csv`` (written by `sweep.store.export_csv`);
never the training code, never TensorFlow (pandas, numpy, scipy only). The
statistics are in `sweep.analysis.estimates`, the choice of runs that answer a question
in `sweep.analysis.selection`; docs/report.md explains both to readers of the report.

A group is every run with the same settings; its n is its number of seeds.

The package: this module (loading results folders into tables, per-run summaries); `health` (runs that
did not train, diverged or got stuck); `selection` (the runs that answer a question, paired by seed);
`estimates`, `power`, `sequential` (intervals, seeds for 80% power, seeds until decided);
`readings` (equal epochs, steps, fit or time); `scaling`, `scaling_fit`, `critical` (steps to target,
the critical batch size); `tuning` (batch sizes at their own best lr); `decisions` (decisions.csv);
`timing` (timing.csv read back); `study`, `study_advice` (a batch-size study of the user's model read back,
and what it recommends).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sweep import vocab
from sweep.analysis import timing
from sweep.analysis.estimates import t_multiplier
from sweep.base import atomic
from sweep.config import declared, timing_schema
from sweep.vocab import RunStatus

SOURCE = "source"  # column added by `load`: the results folder a row came from
SOURCE_RANK = "source_rank"  # its position on the command line (0 = first), for tie-breaks
SETTING_PREFIXES = ("data.", "model.", "train.")
BATCH_SIZE, GPUS = "train.batch_size", "train.gpus"
EPOCH_TWO = 2  # the post's "epoch 2"
BACKEND_DEFAULT = vocab.TENSORFLOW  # the backend of results written before runs.csv recorded it

# Where a grid key stands for the claims comes from its declaration (sweep/config/keys.py):
# - POST_DEFAULTS: the post's setting of the toggles; where several groups of runs could
#   answer a question, rows at these values are used (except for the setting compared);
# - CONTROL_DEFAULTS: the control axes (docs/design.md, "Controls") at their defaults; claims
#   read the runs at these values, and an empty cell (results written before a key existed)
#   means the default;
# - CONTROL_COMPANIONS: settings that only accompany a control, or add records, not updates;
# - TOGGLES: the post's suspected causes, in the order of the toggles figure's panels.
POST_DEFAULTS: dict[str, Any] = declared.post_defaults()
CONTROL_DEFAULTS: dict[str, Any] = declared.control_defaults()
CONTROL_COMPANIONS: tuple[str, ...] = declared.control_companions()
TOGGLES: tuple[str, ...] = declared.toggles()
TOGGLE_REFERENCE: dict[str, Any] = {**POST_DEFAULTS}  # samples_per_class: the largest present

# Metrics summarised per run at epoch 2 and at the last epoch.
SNAPSHOT_METRICS: tuple[str, ...] = (
    vocab.TRAIN_ACC,
    vocab.TRAIN_EVAL_ACC,
    vocab.VAL_ACC,
    vocab.GAP,
    vocab.EVAL_GAP,
    vocab.TRAIN_LOSS,
    vocab.TRAIN_EVAL_LOSS,
    vocab.VAL_LOSS,
    vocab.STEP,
)
CURVE_METRICS: tuple[str, ...] = tuple(m for m in vocab.EPOCH_METRICS if m != vocab.EPOCH)


class ResultsError(Exception):
    """A results folder that cannot be read. The message is one line, ready for stderr."""


# --- loading


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


def setting_columns(table: pd.DataFrame) -> list[str]:
    """The dotted setting columns (data.*, model.*, train.*), in table order, and the backend where the
    table has it: runs on different backends are never grouped or paired (sweep/train/backends.py).
    """
    return [c for c in table.columns if c.startswith(SETTING_PREFIXES) or c == vocab.BACKEND]


def varying(table: pd.DataFrame, exclude: Iterable[str] = ()) -> list[str]:
    """Setting columns that take more than one value in the table."""
    skip = set(exclude)
    return [c for c in setting_columns(table) if c not in skip and table[c].nunique(dropna=False) > 1]


def row_key(table: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """One string per row from the given columns; NaN-safe, for grouping and pairing."""
    if not columns or table.empty:  # agg over no rows returns a frame, not a series
        return pd.Series("", index=table.index, dtype=object)
    # Python strings of the cells, joined per row: str() of each cell is what Series.map(str) gives, and
    # joining lists is ~50x faster than concatenating string Series column by column on a 100-run sweep.
    cells = [map(str, table[name].tolist()) for name in columns]
    return pd.Series(["|".join(row) for row in zip(*cells, strict=True)], index=table.index, dtype="str")


# --- curves over seeds


def summarize(
    table: pd.DataFrame, metrics: Sequence[str] = CURVE_METRICS, by: Sequence[str] | None = None
) -> pd.DataFrame:
    """Long table: one row per (group, epoch, metric) with n, mean, sd, ci_low, ci_high.

    A group is every run with the same settings (all setting columns unless `by`).
    """
    by = list(setting_columns(table) if by is None else by)
    present = [m for m in metrics if m in table]
    if table.empty or not present:
        return pd.DataFrame(columns=[*by, vocab.EPOCH, "metric", "n", "mean", "sd", "ci_low", "ci_high"])
    long = table.melt(id_vars=[*by, vocab.EPOCH], value_vars=present, var_name="metric")
    stats = (
        long.groupby([*by, vocab.EPOCH, "metric"], dropna=False, sort=True)["value"]
        .agg(n="count", mean="mean", sd="std")
        .reset_index()
    )
    mult = stats["n"].map(lambda n: t_multiplier(int(n)))
    half = mult * stats["sd"] / np.sqrt(stats["n"])
    return stats.assign(ci_low=stats["mean"] - half, ci_high=stats["mean"] + half)


# --- per-run snapshots


def at_epoch(epochs: pd.DataFrame, epoch: int | None) -> pd.DataFrame:
    """One row per run: the given epoch, or each run's last epoch when epoch is None."""
    if epochs.empty:
        return epochs
    if epoch is not None:
        return epochs[epochs[vocab.EPOCH] == epoch].reset_index(drop=True)
    last = epochs.groupby(vocab.RUN_ID)[vocab.EPOCH].idxmax()
    return epochs.loc[last.values].reset_index(drop=True)


def column(metric: str, when: str) -> str:
    """Name of a per-run snapshot column: column("gap", "epoch2") -> "gap_epoch2"."""
    return f"{metric}_{when}"


def run_summary(epochs: pd.DataFrame) -> pd.DataFrame:
    """One row per done run: settings, seed, metrics at epoch 2 and at the last epoch, speed.

    Epoch time and samples/s average epochs 2.. because epoch 1 includes graph tracing
    (epoch 1 is used only when it is the only one).
    """
    if epochs.empty:
        return pd.DataFrame()
    rank = [SOURCE_RANK] if SOURCE_RANK in epochs else []
    head = [vocab.RUN_ID, SOURCE, *rank, vocab.SEED, *setting_columns(epochs)]
    last = at_epoch(epochs, None)
    table = last[head].assign(epochs=last[vocab.EPOCH].astype(int))
    for when, snap in (("epoch2", at_epoch(epochs, EPOCH_TWO)), ("last", last)):
        optional = (*vocab.RECAL_METRICS, *vocab.BALANCED_METRICS)  # where measured
        present = [m for m in (*SNAPSHOT_METRICS, *optional) if m in snap]
        values = snap.set_index(vocab.RUN_ID)[present].add_suffix(f"_{when}")
        table = table.join(values, on=vocab.RUN_ID)
    best = epochs.groupby(vocab.RUN_ID)[vocab.VAL_ACC].max().rename("best_val_acc")
    # copy(): one block per dtype instead of one per joined column; the claims filter this table's rows
    # thousands of times, and each filter takes every block
    return table.join(best, on=vocab.RUN_ID).join(_speed(epochs), on=vocab.RUN_ID).copy()


def _timed_epochs(epochs: pd.DataFrame) -> pd.DataFrame:
    """The records that time a whole epoch, epoch 1 left out (it includes graph tracing) unless it is the only one."""
    later = epochs[(epochs[vocab.EPOCH] > 1) | (epochs.groupby(vocab.RUN_ID)[vocab.EPOCH].transform("max") == 1)]
    return later[later[vocab.EPOCH] % 1 == 0]  # records inside an epoch (eval_every_steps) time part of one


def _speed(epochs: pd.DataFrame) -> pd.DataFrame:
    """Mean epoch time and images/s per run, and the spread of its epoch times (min, median, max)."""
    later = _timed_epochs(epochs)
    means = later.groupby(vocab.RUN_ID)[[vocab.EPOCH_SECONDS, vocab.SAMPLES_PER_SECOND]].mean()
    spread = later.groupby(vocab.RUN_ID)[vocab.EPOCH_SECONDS].agg(["min", "median", "max"])
    speed = means.join(spread.add_prefix(f"{vocab.EPOCH_SECONDS}_"))
    quiet_step = timing_schema.QUIET_STEP_SECONDS
    if quiet_step in epochs:  # a quiet epoch: steps per epoch (step / epoch at any record) x s per step
        ordered = epochs.assign(fraction=epochs[vocab.EPOCH] % 1).sort_values("fraction", kind="stable")
        rate = ordered[quiet_step] * ordered[vocab.STEP] / ordered[vocab.EPOCH]  # whole epochs first:
        speed = speed.join(rate.groupby(ordered[vocab.RUN_ID]).first().rename(QUIET_EPOCH_SECONDS))  # exact there
    if timing_schema.QUIET_REPEATS in epochs:  # C6's quiet reading: every repeat of the run's configuration
        speed = speed.join(epochs.groupby(vocab.RUN_ID)[timing_schema.QUIET_REPEATS].first())
    return speed


QUIET_EPOCH_SECONDS = "quiet_epoch_seconds"  # from timing.csv where the results folder has one
PACK_SIZE = "pack_size"  # runs.csv: how many runs trained as towers of one model (1: alone)
TIMED_COPIES = "epoch_seconds_copies"  # timing_copies' column: every folder's timing of a run stored more than once


def timing_copies(results: Results) -> pd.DataFrame:
    """Runs stored in more than one results folder, with each copy's median epoch time (epochs 2 onwards).

    `load` keeps the first folder's copy; training is deterministic but timing is not, so the
    copies left out would give another speed: the report names them rather than hide them.
    """
    epochs = results.folder_epochs
    if epochs.empty or SOURCE not in epochs:
        return pd.DataFrame(columns=[vocab.RUN_ID, TIMED_COPIES])
    later = _timed_epochs(epochs.assign(**{vocab.RUN_ID: spec_hash(epochs[vocab.RUN_ID])}))
    per_copy = later.groupby([vocab.RUN_ID, SOURCE], sort=False)[vocab.EPOCH_SECONDS].median().reset_index()
    shared = per_copy[per_copy.groupby(vocab.RUN_ID)[SOURCE].transform("nunique") > 1]
    kept = dict(zip(spec_hash(results.epochs[vocab.RUN_ID]), results.epochs[SOURCE], strict=True))
    rows = []
    for spec, copies in shared.groupby(vocab.RUN_ID, sort=True):
        words = [
            f"{c[vocab.EPOCH_SECONDS]:.2f} s ({c[SOURCE]}{', used' if kept.get(spec) == c[SOURCE] else ''})"
            for _, c in copies.iterrows()
        ]
        rows.append((spec, "; ".join(words)))
    return pd.DataFrame(rows, columns=["spec", TIMED_COPIES])


def with_timing_copies(summary: pd.DataFrame, copies: pd.DataFrame) -> pd.DataFrame:
    """`summary` with the other folders' timings of its runs (empty where a run was timed once)."""
    if summary.empty:
        return summary
    spec = spec_hash(summary[vocab.RUN_ID])
    return summary.assign(**{TIMED_COPIES: spec.map(dict(zip(copies["spec"], copies[TIMED_COPIES], strict=True)))})


def gap_table(epochs: pd.DataFrame) -> pd.DataFrame:
    """gap and eval_gap (and the accuracies behind them) at epoch 2 and at the last epoch, per group."""
    metrics = (vocab.GAP, vocab.EVAL_GAP, vocab.TRAIN_ACC, vocab.TRAIN_EVAL_ACC, vocab.VAL_ACC)
    parts = [
        summarize(at_epoch(epochs, e), metrics).assign(at=label)
        for label, e in (("epoch 2", EPOCH_TWO), ("last", None))
    ]
    return pd.concat(parts, ignore_index=True)


# --- tables on disk


def write_tables(results: Results, out: Path, trained: pd.DataFrame | None = None) -> list[Path]:
    """curves.csv (every metric at every epoch), gaps.csv, run_summary.csv into out/tables/.

    The curves and gaps summarise over seeds the records of `trained` (default: every done run's), the
    runs that trained (`sweep.analysis.health.trained`): an interval over seeds at chance says nothing of a setting;
    run_summary.csv keeps one row per run, every run.
    """
    folder = out / "tables"
    folder.mkdir(parents=True, exist_ok=True)
    trained = results.epochs if trained is None else trained
    tables = {
        "curves.csv": summarize(trained),
        "gaps.csv": gap_table(trained),
        "run_summary.csv": run_summary(results.epochs),
    }
    paths = []
    for name, table in tables.items():
        atomic.write_csv(table, folder / name)
        paths.append(folder / name)
    return paths
