"""Results folders -> tables with confidence intervals, paired differences and 3-valued checks.

Reads only ``runs.csv`` and ``epochs.csv`` (written by `sweep.store.export_csv`);
never the training code, never TensorFlow (pandas, numpy, scipy only).

Statistics (docs/report.md says the same for readers of the report):

- The unit of replication is the seed. A group is every run with the same
  settings; its n is its number of seeds (usually 3).
- The 95% interval is Student's t over seeds: mean +- t(0.975, n-1) * sd / sqrt(n).
  It assumes the seed-to-seed values are roughly normal and independent; with
  n = 3 the multiplier is 4.30 (not 1.96), so intervals are wide on purpose. A
  bootstrap over 3 seeds would be narrower only because it cannot see the tails.
- Settings that share a seed share initial weights and data order, so two
  settings are compared by pairing runs with the same seed and the same other
  settings and taking the t-interval of the per-seed differences.
- A check says where a number must lie for a claim to hold. It is True when the
  whole interval lies there, False when the whole interval lies outside, and
  None (undecided) otherwise; `seeds_needed` estimates how many seeds would
  decide it from the observed SD.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
from scipy.special import stdtrit  # the t quantile; scipy.stats would add a second of import time

from sweep import vocab

CONFIDENCE = 0.95
SOURCE = "source"  # column added by `load`: the results folder a row came from
SOURCE_RANK = "source_rank"  # its position on the command line (0 = first), for tie-breaks
SEED = "seed"
RUN_ID = "run_id"
ROLE = "role"  # grid | search | tuned (sweep.vocab); missing in results written before searches existed
SETTING_PREFIXES = ("data.", "model.", "train.")
BATCH_SIZE, GPUS = "train.batch_size", "train.gpus"
EPOCH_TWO = 2  # the post's "epoch 2"

# The post's setting for the toggles: where several groups of runs could answer a
# question, rows at these values are used (except for the setting being compared).
POST_DEFAULTS: dict[str, Any] = {
    "data.shuffle": True, "data.imbalance": 0.0, "data.preprocess_mismatch": "none",
    "model.width": 1.0, GPUS: 1,
}
# The control axes (docs/design.md, "Controls") at their defaults. Claims read the
# runs at these values; results written before a key existed lack its column or
# leave it empty, which means the default.
CONTROL_DEFAULTS: dict[str, Any] = {
    "model.batchnorm": True, "model.bn_momentum": 0.99, "model.ghost_batch_size": None,
    "train.budget": "epochs", "train.lr_scaling": "none", "train.warmup_epochs": 0.0,
}
# Settings that only accompany a control (train.steps with budget: steps, ...) or
# do not change training (eval_every_steps adds records, not updates).
CONTROL_COMPANIONS: tuple[str, ...] = ("train.steps", "train.reference_batch_size", "train.eval_every_steps")
TOGGLES: tuple[str, ...] = ("data.shuffle", "data.imbalance", "data.preprocess_mismatch",
                            "model.width", "data.samples_per_class")
TOGGLE_REFERENCE: dict[str, Any] = {**POST_DEFAULTS}  # samples_per_class: the largest present

# Metrics summarised per run at epoch 2 and at the last epoch.
SNAPSHOT_METRICS: tuple[str, ...] = (
    vocab.TRAIN_ACC, vocab.TRAIN_EVAL_ACC, vocab.VAL_ACC, vocab.GAP, vocab.EVAL_GAP,
    vocab.TRAIN_LOSS, vocab.TRAIN_EVAL_LOSS, vocab.VAL_LOSS, vocab.STEP,
)
CURVE_METRICS: tuple[str, ...] = tuple(m for m in vocab.EPOCH_METRICS if m != vocab.EPOCH)


class ResultsError(Exception):
    """A results folder that cannot be read. The message is one line, ready for stderr."""


# --- loading


@dataclass(frozen=True)
class Results:
    """Runs of one or more results folders; `epochs` holds only finished (done) runs of the grid.

    Learning-rate search trials and the re-runs of their best lr (the `role` column)
    answer their own question (sweep/tuning.py), so the claims never see them.
    """

    folders: tuple[Path, ...]
    runs: pd.DataFrame  # every run, every status, every role; one row per (run_id, role)
    epochs: pd.DataFrame  # one row per (done grid run, epoch)
    tuned: pd.DataFrame = field(default_factory=pd.DataFrame)  # one row per (done tuned run, epoch)


def load(folders: Sequence[str | Path]) -> Results:
    """Read and concatenate results folders, in the order given.

    A run_id is a hash of the whole spec, so the same id in two folders is the same
    run (training is deterministic); the first folder's copy is kept.
    """
    paths = tuple(Path(f) for f in folders)
    pairs = [tuple(t.assign(**{SOURCE_RANK: rank}) for t in _read_folder(p)) for rank, p in enumerate(paths)]
    runs = pd.concat([r for r, _ in pairs], ignore_index=True) if pairs else pd.DataFrame()
    epochs = pd.concat([e for _, e in pairs], ignore_index=True) if pairs else pd.DataFrame()
    runs, epochs = _with_role(runs), _with_role(epochs)
    if RUN_ID in runs:
        runs = runs.drop_duplicates([RUN_ID, ROLE], keep="first").reset_index(drop=True)
    if RUN_ID in epochs and len(epochs):
        epochs = epochs.drop_duplicates([RUN_ID, ROLE, vocab.EPOCH], keep="first")
        epochs = epochs[epochs["status"] == vocab.DONE].reset_index(drop=True)
    by_role = {role: rows.drop(columns=ROLE).reset_index(drop=True) for role, rows in epochs.groupby(ROLE)} \
        if ROLE in epochs else {}
    empty = epochs.drop(columns=ROLE, errors="ignore").iloc[0:0]
    return Results(folders=paths, runs=runs, epochs=by_role.get(vocab.GRID, empty),
                   tuned=by_role.get(vocab.TUNED, empty))


def _with_role(table: pd.DataFrame) -> pd.DataFrame:
    """A `role` column; results written before learning-rate searches existed hold grid runs only."""
    if table.empty and not len(table.columns):
        return table
    role = table[ROLE].fillna(vocab.GRID) if ROLE in table else vocab.GRID
    return table.assign(**{ROLE: role})


def _read_folder(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    missing = [n for n in (vocab.RUNS_CSV, vocab.EPOCHS_CSV) if not (folder / n).is_file()]
    if missing:
        raise ResultsError(f"{folder}: no {' or '.join(missing)} here; "
                           f"make it with `python -m sweep run GRID --results {folder}`")
    return tuple(_read_csv(folder / n).assign(**{SOURCE: str(folder)})  # type: ignore[return-value]
                 for n in (vocab.RUNS_CSV, vocab.EPOCHS_CSV))


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:  # a sweep with no runs writes an empty file
        return pd.DataFrame()


def setting_columns(table: pd.DataFrame) -> list[str]:
    """The dotted setting columns (data.*, model.*, train.*), in table order."""
    return [c for c in table.columns if c.startswith(SETTING_PREFIXES)]


def varying(table: pd.DataFrame, exclude: Iterable[str] = ()) -> list[str]:
    """Setting columns that take more than one value in the table."""
    skip = set(exclude)
    return [c for c in setting_columns(table) if c not in skip and table[c].nunique(dropna=False) > 1]


def _key(table: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """One string per row from the given columns; NaN-safe, for grouping and pairing."""
    if not columns or table.empty:  # agg over no rows returns a frame, not a series
        return pd.Series("", index=table.index, dtype=object)
    key = table[columns[0]].map(str)
    for name in columns[1:]:  # column by column: a row-wise join is 10x slower on a 100-run sweep
        key = key + "|" + table[name].map(str)
    return key


# --- estimates over seeds


@dataclass(frozen=True)
class Estimate:
    """Mean over seeds (or over per-seed differences) with a Student-t interval."""

    mean: float
    sd: float
    n: int
    low: float
    high: float


def fmt_estimate(e: Estimate) -> str:
    """"0.147 [0.116, 0.179] (n=3)", as the report writes every estimate."""
    if e.n == 0:
        return "no data"
    if e.n == 1:
        return f"{e.mean:.3f} (1 seed, no interval)"
    return f"{e.mean:.3f} [{e.low:.3f}, {e.high:.3f}] (n={e.n})"


def t_multiplier(n: int, confidence: float = CONFIDENCE) -> float:
    """t(1 - alpha/2, n - 1): 12.71 at n=2, 4.30 at n=3, 2.26 at n=10."""
    return float(stdtrit(n - 1, 0.5 + confidence / 2)) if n > 1 else math.nan


def estimate(values: Iterable[float], confidence: float = CONFIDENCE) -> Estimate:
    x = np.asarray(list(values), dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return Estimate(math.nan, math.nan, 0, math.nan, math.nan)
    mean = float(x.mean())
    sd = float(x.std(ddof=1)) if n > 1 else math.nan
    half = t_multiplier(n, confidence) * sd / math.sqrt(n) if n > 1 else math.nan
    return Estimate(mean, sd, n, mean - half, mean + half)


def summarize(table: pd.DataFrame, metrics: Sequence[str] = CURVE_METRICS,
              by: Sequence[str] | None = None) -> pd.DataFrame:
    """Long table: one row per (group, epoch, metric) with n, mean, sd, ci_low, ci_high.

    A group is every run with the same settings (all setting columns unless `by`).
    """
    by = list(setting_columns(table) if by is None else by)
    present = [m for m in metrics if m in table]
    if table.empty or not present:
        return pd.DataFrame(columns=[*by, vocab.EPOCH, "metric", "n", "mean", "sd", "ci_low", "ci_high"])
    long = table.melt(id_vars=[*by, vocab.EPOCH], value_vars=present, var_name="metric")
    stats = (long.groupby([*by, vocab.EPOCH, "metric"], dropna=False, sort=True)["value"]
             .agg(n="count", mean="mean", sd="std").reset_index())
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
    last = epochs.groupby(RUN_ID)[vocab.EPOCH].idxmax()
    return epochs.loc[last.values].reset_index(drop=True)


def column(metric: str, when: str) -> str:
    """Name of a per-run snapshot column: column("gap", "epoch2") -> "gap_epoch2"."""
    return f"{metric}_{when}"


STUCK_MIN_RECORDS = 3  # fewer records cannot tell a stuck model from a slow one


def run_health(results: Results) -> pd.DataFrame:
    """Runs whose numbers cannot answer a claim, with the reason: run_id, status, problem.

    - diverged: the loss became NaN or infinite (never in `epochs`; listed so nothing vanishes);
    - stuck: a done run whose val_acc and train_eval_acc never changed over 3 or more
      records while val_acc sits at 1 / classes, i.e. the model predicts one class;
    - a validation set of one class (from results of other tools; our loaders refuse it),
      where accuracy says nothing about generalisation.
    """
    problems = []
    runs = results.runs
    if "status" in runs:
        for _, run in runs[runs["status"] == vocab.DIVERGED].iterrows():
            problems.append((run[RUN_ID], vocab.DIVERGED, f"diverged: {run.get('error') or 'loss became NaN or infinite'}"))
    if "num_classes" in runs:
        for _, run in runs[(runs["status"] == vocab.DONE) & (runs["num_classes"] < 2)].iterrows():
            problems.append((run[RUN_ID], vocab.DONE, "validation holds a single class: accuracy cannot compare settings"))
    epochs = results.epochs
    if not epochs.empty:
        for run_id, rows in epochs.groupby(RUN_ID, sort=True):
            if _stuck(rows, runs):
                problems.append((run_id, vocab.DONE, f"stuck: val_acc {rows[vocab.VAL_ACC].iloc[0]:.3f} and "
                                 f"train_eval_acc unchanged over {len(rows)} records (the model predicts one class)"))
    return pd.DataFrame(problems, columns=[RUN_ID, "status", "problem"]).drop_duplicates(RUN_ID)


def _stuck(rows: pd.DataFrame, runs: pd.DataFrame) -> bool:
    if len(rows) < STUCK_MIN_RECORDS or rows[vocab.VAL_ACC].nunique() > 1 or rows[vocab.TRAIN_EVAL_ACC].nunique() > 1:
        return False
    classes = runs.loc[runs[RUN_ID] == rows[RUN_ID].iloc[0], "num_classes"] if "num_classes" in runs else pd.Series()
    return classes.empty or abs(rows[vocab.VAL_ACC].iloc[0] - 1.0 / float(classes.iloc[0])) < 1e-6


def without(epochs: pd.DataFrame, health: pd.DataFrame) -> pd.DataFrame:
    """`epochs` without the runs `run_health` lists: claims are never decided on them."""
    return epochs[~epochs[RUN_ID].isin(health[RUN_ID])] if not epochs.empty and len(health) else epochs


def run_summary(epochs: pd.DataFrame) -> pd.DataFrame:
    """One row per done run: settings, seed, metrics at epoch 2 and at the last epoch, speed.

    Epoch time and samples/s average epochs 2.. because epoch 1 includes graph tracing
    (epoch 1 is used only when it is the only one).
    """
    if epochs.empty:
        return pd.DataFrame()
    head = [RUN_ID, SOURCE, *([SOURCE_RANK] if SOURCE_RANK in epochs else []), SEED, *setting_columns(epochs)]
    last = at_epoch(epochs, None)
    table = last[head].assign(epochs=last[vocab.EPOCH].astype(int))
    for when, snap in (("epoch2", at_epoch(epochs, EPOCH_TWO)), ("last", last)):
        values = snap.set_index(RUN_ID)[list(SNAPSHOT_METRICS)].add_suffix(f"_{when}")
        table = table.join(values, on=RUN_ID)
    best = epochs.groupby(RUN_ID)[vocab.VAL_ACC].max().rename("best_val_acc")
    return table.join(best, on=RUN_ID).join(_speed(epochs), on=RUN_ID)


def _speed(epochs: pd.DataFrame) -> pd.DataFrame:
    later = epochs[(epochs[vocab.EPOCH] > 1) | (epochs.groupby(RUN_ID)[vocab.EPOCH].transform("max") == 1)]
    later = later[later[vocab.EPOCH] % 1 == 0]  # records inside an epoch (eval_every_steps) time part of one
    return later.groupby(RUN_ID)[[vocab.EPOCH_SECONDS, vocab.SAMPLES_PER_SECOND]].mean()


def gap_table(epochs: pd.DataFrame) -> pd.DataFrame:
    """gap and eval_gap (and the accuracies behind them) at epoch 2 and at the last epoch, per group."""
    metrics = (vocab.GAP, vocab.EVAL_GAP, vocab.TRAIN_ACC, vocab.TRAIN_EVAL_ACC, vocab.VAL_ACC)
    parts = [summarize(at_epoch(epochs, e), metrics).assign(at=label)
             for label, e in (("epoch 2", EPOCH_TWO), ("last", None))]
    return pd.concat(parts, ignore_index=True)


# --- choosing and pairing rows


@dataclass(frozen=True)
class Selection:
    """The rows that answer a question about one setting (axis), and why these."""

    axis: str
    rows: pd.DataFrame
    context: dict[str, Any]  # the fixed settings of the chosen group that differ between candidates
    candidates: int  # how many groups could have answered

    def describe(self) -> str:
        fixed = ", ".join(f"{k}={fmt_value(v)}" for k, v in self.context.items() if not pd.isna(v))
        fixed = fixed or "the only candidate"
        seeds = self.rows[SEED].nunique()
        values = ", ".join(fmt_value(v) for v in sorted_values(self.rows[self.axis]))
        chosen = f"chosen from {self.candidates} candidate groups: " if self.candidates > 1 else ""
        return f"{self.axis} in {{{values}}}, {seeds} seeds; {chosen}{fixed}"


def sorted_values(series: pd.Series) -> list[Any]:
    """Distinct values in natural order (numbers numerically, False before True)."""
    values = series.dropna().unique().tolist()
    try:
        return sorted(values)
    except TypeError:  # mixed types
        return sorted(values, key=str)


def fmt_value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) and not math.isnan(value) else str(value)


def is_default(series: pd.Series, default: Any) -> pd.Series:
    """Rows at a control's default; an empty cell (a run from before the key existed, or null) counts as default."""
    return series.isna() | (matches(series, default) if default is not None else False)


def matches(series: pd.Series, value: Any) -> pd.Series:
    if isinstance(value, (bool, str)):
        return series.astype(str) == str(value)
    return pd.to_numeric(series, errors="coerce").sub(value).abs() < 1e-9


def choose_context(table: pd.DataFrame, axis: str, values: Sequence[Any] = (),
                   min_values: int = 2) -> Selection | None:
    """The one group of runs that compares `axis`, chosen by a fixed rule.

    1. Keep runs whose other toggles are at the post's setting (POST_DEFAULTS)
       and whose controls are at their defaults (CONTROL_DEFAULTS).
    2. Group by every other setting; a group qualifies when it has all `values`
       of the axis (or at least `min_values` of them).
    3. Prefer the most axis values (only `values` count when given), then the most seeds, then the earliest
       results folder on the command line, then the first settings in sort order.
    """
    if table.empty or axis not in table:
        return None
    rows = table
    for key, value in POST_DEFAULTS.items():
        if key != axis and key in rows:
            rows = rows[matches(rows[key], value)]
    for key, value in CONTROL_DEFAULTS.items():
        if key != axis and key in rows:
            rows = rows[is_default(rows[key], value)]
    others = [c for c in setting_columns(rows) if c != axis]
    keyed = rows.assign(_ctx=_key(rows, others))
    groups = [g for _, g in keyed.groupby("_ctx", sort=True) if _qualifies(g, axis, values, min_values)]
    if not groups:
        return None
    def folder_rank(group: pd.DataFrame) -> int:
        return int(group[SOURCE_RANK].min()) if SOURCE_RANK in group else 0

    # With named values (C1: 8 and 64) every qualifying group has them all: the other
    # batch sizes a group also has do not make it a better answer, so they do not count.
    breadth = (lambda g: len(values)) if values else (lambda g: g[axis].nunique())
    best = min(groups, key=lambda g: (-breadth(g), -g[SEED].nunique(),
                                      folder_rank(g), g["_ctx"].iloc[0]))
    differing = [c for c in others if keyed[c].nunique(dropna=False) > 1]
    context = {c: best[c].iloc[0] for c in differing}
    return Selection(axis, best.drop(columns="_ctx").reset_index(drop=True), context, len(groups))


def _qualifies(group: pd.DataFrame, axis: str, values: Sequence[Any], min_values: int) -> bool:
    if values:
        return all(matches(group[axis], v).any() for v in values)
    return group[axis].nunique(dropna=False) >= min_values


def toggle_values(rows: pd.DataFrame, toggle: str) -> list[Any]:
    """A toggle's values, reference first: the post's default, or the most samples per class."""
    values = sorted_values(rows[toggle])
    if toggle in TOGGLE_REFERENCE:
        reference = [v for v in values if matches(pd.Series([v]), TOGGLE_REFERENCE[toggle]).iloc[0]]
        return reference + [v for v in values if v not in reference]
    return values[::-1]


def where(rows: pd.DataFrame, axis: str, value: Any) -> pd.DataFrame:
    """Rows whose axis equals value (floats compared to 1e-9, bools and strings as text)."""
    return rows[matches(rows[axis], value)]


def paired_values(rows: pd.DataFrame, axis: str, reference: Any, value: Any, metric: str) -> pd.Series:
    """Per pair (same seed and other settings): metric at `value` minus metric at `reference`."""
    others = [c for c in setting_columns(rows) if c != axis] + [SEED]
    keyed = rows.assign(_pair=_key(rows, others))
    base = where(keyed, axis, reference).groupby("_pair")[metric].mean()
    other = where(keyed, axis, value).groupby("_pair")[metric].mean()
    return (other - base).dropna()


def paired(rows: pd.DataFrame, axis: str, reference: Any, value: Any, metric: str) -> Estimate:
    """Mean paired difference (value - reference) with its t-interval; n = number of pairs."""
    return estimate(paired_values(rows, axis, reference, value, metric))


def paired_relative(rows: pd.DataFrame, axis: str, reference: Any, value: Any, metric: str) -> Estimate:
    """Mean paired relative change (value / reference - 1), e.g. -0.4 = 40% less."""
    diff = paired_values(rows, axis, reference, value, metric)
    others = [c for c in setting_columns(rows) if c != axis] + [SEED]
    keyed = rows.assign(_pair=_key(rows, others))
    base = where(keyed, axis, reference).groupby("_pair")[metric].mean()
    return estimate(diff / base.reindex(diff.index))


# --- checks: where must a number lie for a claim to hold?

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
NOT_TESTED = "not tested by this sweep"
MAX_SEEDS = 1000


@dataclass(frozen=True)
class Check:
    """The claim holds for this number when it lies in the open interval (low, high)."""

    label: str
    estimate: Estimate
    low: float = -math.inf
    high: float = math.inf

    def outcome(self) -> bool | None:
        """True: the whole CI is inside; False: the whole CI is outside; None: undecided."""
        e = self.estimate
        if not (math.isfinite(e.low) and math.isfinite(e.high)):
            return None
        if e.low > self.low and e.high < self.high:
            return True
        if e.high <= self.low or e.low >= self.high:
            return False
        return None

    def region(self) -> str:
        if math.isinf(self.low):
            return f"< {self.high:.3g}"
        if math.isinf(self.high):
            return f"> {self.low:.3g}"
        return f"in ({self.low:.3g}, {self.high:.3g})"

    def margin(self) -> float:
        """Distance from the mean to the nearest boundary: the CI half-width that would decide."""
        bounds = [b for b in (self.low, self.high) if math.isfinite(b)]
        return min(abs(self.estimate.mean - b) for b in bounds)

    def seeds_needed(self) -> int | None:
        """Smallest n with t(n-1) * sd / sqrt(n) < margin, from the observed SD (None: > MAX_SEEDS or unknown)."""
        return seeds_to_decide(self.estimate.sd, self.margin())


def seeds_to_decide(sd: float, margin: float) -> int | None:
    if not (math.isfinite(sd) and math.isfinite(margin)) or margin <= 0:
        return None
    n = np.arange(2, MAX_SEEDS + 1)
    decided = np.flatnonzero(stdtrit(n - 1, 0.5 + CONFIDENCE / 2) * sd / np.sqrt(n) < margin)
    return int(n[decided[0]]) if decided.size else None


def all_of(outcomes: Iterable[bool | None]) -> bool | None:
    values = list(outcomes)
    return False if False in values else (True if values and all(v is True for v in values) else None)


def any_of(outcomes: Iterable[bool | None]) -> bool | None:
    values = list(outcomes)
    return True if True in values else (False if values and all(v is False for v in values) else None)


def verdict(outcome: bool | None) -> str:
    return {True: SUPPORTED, False: CONTRADICTED, None: INCONCLUSIVE}[outcome]


# --- tables on disk


def write_tables(results: Results, out: Path) -> list[Path]:
    """curves.csv (every metric at every epoch), gaps.csv, run_summary.csv into out/tables/."""
    folder = out / "tables"
    folder.mkdir(parents=True, exist_ok=True)
    tables = {"curves.csv": summarize(results.epochs), "gaps.csv": gap_table(results.epochs),
              "run_summary.csv": run_summary(results.epochs)}
    paths = []
    for name, table in tables.items():
        table.to_csv(folder / name, index=False)
        paths.append(folder / name)
    return paths
