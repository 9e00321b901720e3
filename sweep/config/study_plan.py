"""A batch-size study's plan: the grid a user's own grid file becomes for `sweep study`.

The study is the user's grid (their builder and loader, or a built-in dataset, and their training
settings) with a fixed set of overrides (`study_overrides`), so it is an ordinary grid and runs on
workers, GPUs and Slurm like any other (`<results>/grid.yaml` is the study as a grid file):

- batch sizes on a doubling ladder (`ladder`), at least MIN_RUNGS of them, so that S = S_min (1 + B_crit / B)
  can be fitted;
- a learning-rate search per batch size at a held-out seed (`search.seed`, outside `seeds:`) on held-out data
  (`search.data_seed`, the same number: another split, or other images of a built-in dataset), ranked on
  val_acc_recal (BatchNorm statistics recomputed for the weights: raw val_acc of a batch size that took
  few steps lags behind its weights and would rank the lrs on that lag); its best lr re-run at every seed,
  and its runner-up (`search.rerun`), so the report says how much the choice of lr moves the result;
- stopping that does not depend on the batch size (`study_stopping`): the grid file's `train.early_stopping`
  moved to its recalibrated metric (val_loss -> val_loss_recal), the same rule at every batch size, since raw
  numbers lag behind the weights of a batch size that took few steps and would stop it early for that lag;
  where no recalibrated metric is recorded, or the rule reads one with none, a fixed budget of train.epochs;
- records every `eval_every_steps` steps, set from the smallest batch's steps per epoch
  (`records_every`), so steps to target are read inside epochs; the noise scale B_simple at each record;
- the plan's duration, roughly, from the quiet timing of each configuration (`estimate_seconds`).

No TensorFlow: the steps per epoch and epoch seconds come in from `timing.csv`'s rows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from sweep import vocab
from sweep.config import GridFile, stopping
from sweep.config.plan import RunSpec
from sweep.exits import UsageError

MIN_RUNGS = 3  # two batch sizes fit S_min and B_crit exactly: nothing would test the curve's shape
BATCH_KEY = "train.batch_size"
# Seconds a record costs beyond training, and a run's start (model built, compiled, traced), on top of
# the quiet epoch time: measured on the committed study (docs/study.md, "How long"); a rough guide only.
RECORD_SECONDS = 0.35
RUN_START_SECONDS = 3.0
RERUN = 2  # the best lr and the runner-up re-run at every seed: how much the choice of lr moves the result
PHASE_SECONDS = 20.0  # workers started (TensorFlow loaded) for each phase: the grid and searches, widenings, tuned runs


@dataclass(frozen=True)
class StudySettings:
    """What `sweep study` sets over the user's grid file; every value has a flag of the same name."""

    smallest: int = 8
    largest: int = 128
    seeds: int = 5
    trials: int = 8
    lr_low: float = 1e-4
    lr_high: float = 3e-2
    search_seed: int = 100  # held out: the lr is chosen on a seed no reported run uses
    records_per_epoch: int = 8  # at the smallest batch size
    widen: int = 1

    def ladder(self) -> tuple[int, ...]:
        return ladder(self.smallest, self.largest)


def ladder(smallest: int, largest: int) -> tuple[int, ...]:
    """smallest, 2 x smallest, ... up to largest, which must be smallest x a power of two."""
    if smallest < 1 or largest <= smallest:
        raise UsageError(f"--batch-sizes {smallest},{largest}: give SMALLEST,LARGEST with 1 <= SMALLEST < LARGEST")
    rungs = [smallest]
    while rungs[-1] < largest:
        rungs.append(rungs[-1] * 2)
    if rungs[-1] != largest:
        raise UsageError(
            f"--batch-sizes {smallest},{largest}: LARGEST must be SMALLEST doubled some times "
            f"(e.g. {smallest},{rungs[-2]} or {smallest},{rungs[-1]})"
        )
    if len(rungs) < MIN_RUNGS:
        raise UsageError(
            f"--batch-sizes {smallest},{largest}: a study needs at least {MIN_RUNGS} batch sizes to fit the "
            f"critical batch size; e.g. {smallest},{smallest * 2 ** (MIN_RUNGS - 1)}"
        )
    return tuple(rungs)


def check_ladder(settings: StudySettings, train_samples: int) -> None:
    """A batch larger than the training set would be the whole set in one step, labelled as the larger batch."""
    if settings.largest > train_samples:
        fits = [b for b in settings.ladder() if b <= train_samples]
        hint = f" (e.g. {settings.smallest},{fits[-1]})" if len(fits) >= MIN_RUNGS else ": use more training data"
        raise UsageError(
            f"--batch-sizes {settings.smallest},{settings.largest}: batch {settings.largest} is larger than the "
            f"{train_samples} training images; the largest must be at most {train_samples}{hint}"
        )


def check_grid(grid: GridFile) -> None:
    """A study varies the batch size alone: other axes or variants would make one study per value."""
    others = [key for key, _ in grid.grid if key != BATCH_KEY]
    if others or grid.variants:
        what = f"grid axis {', '.join(others)}" if others else "variants:"
        raise UsageError(
            f"{grid.source}: a study varies only train.batch_size, and this grid file also has {what}; "
            "remove it (or set one value with KEY=VALUE) and run one study per value"
        )


def study_overrides(settings: StudySettings, name: str | None, eval_every: int | None) -> tuple[str, ...]:
    """The overrides that turn a grid file into the study; `name` None keeps the grid's name, `eval_every` None
    its own records.
    """
    seeds = list(range(settings.seeds))
    if settings.search_seed in seeds:
        raise UsageError(
            f"--search-seed {settings.search_seed} is one of the seeds 0-{settings.seeds - 1}; hold it out"
        )
    found = (
        *((f"name={name}",) if name else ()),
        f"seeds={seeds}",
        f"grid.{BATCH_KEY}={list(settings.ladder())}",
        f"search.lr={{low: {settings.lr_low:g}, high: {settings.lr_high:g}, log: true}}",
        f"search.trials={settings.trials}",
        "search.metric=val_acc_recal",
        f"search.seed={settings.search_seed}",
        f"search.data_seed={settings.search_seed}",  # and on other data: the lr is not chosen on reported images
        "search.prune=true",
        f"search.rerun={RERUN}",
        f"search.widen={settings.widen}",
        "train.recalibrate_bn=true",
        "train.noise_scale=true",
        "train.lr_scaling=none",  # the search picks each batch size's lr itself
    )
    return found + ((f"train.eval_every_steps={eval_every}",) if eval_every else ())


@dataclass(frozen=True)
class StudyStopping:
    """The stopping rule the study trains with (None: a fixed budget of train.epochs) and the grid file's own."""

    rule: stopping.Rule | None
    own: stopping.Rule | None

    def override(self) -> str:
        """The override that sets it; it comes after the user's own, so every run of the study has it."""
        if self.rule is None:
            return "train.early_stopping=null"
        return f"train.early_stopping={json.dumps(asdict(self.rule), sort_keys=True)}"

    def words(self) -> str:
        if self.rule is None:
            why = f" (the grid file's {self.own.metric} has no recalibrated counterpart recorded)" if self.own else ""
            return f"a fixed budget of train.epochs at every batch size, no early stopping{why}"
        moved = f", the grid file's rule moved from {self.own.metric}" if self.own and self.own != self.rule else ""
        return (
            f"stopping when {self.rule.metric} has not improved by more than {self.rule.min_delta:g} for "
            f"{self.rule.patience} epochs, the same rule at every batch size{moved}"
        )


def study_stopping(own: str | None, recalibrated: bool) -> StudyStopping:
    """The grid file's `train.early_stopping` (canonical JSON text, or None) on a metric free of BatchNorm's lag:
    its recalibrated counterpart where `recalibrated` (train.recalibrate_bn) records one, else a fixed budget.
    """
    rule = stopping.parse(own)
    if rule is None or not recalibrated:
        return StudyStopping(None, rule)
    metric = rule.metric if rule.metric.endswith(vocab.RECAL) else rule.metric + vocab.RECAL
    if metric not in stopping.METRICS:
        return StudyStopping(None, rule)
    return StudyStopping(stopping.Rule(metric, rule.patience, rule.min_delta), rule)


def records_every(steps_per_epoch: int, per_epoch: int) -> int:
    """Steps between records: `per_epoch` records in an epoch of the smallest batch size (at least every step)."""
    return max(1, math.ceil(steps_per_epoch / per_epoch))


@dataclass(frozen=True)
class Estimate:
    """The plan's size and rough duration."""

    runs: int  # fixed-lr reference runs + search trials + tuned runs
    trials: int
    seconds: float  # at most, with every trial trained whole (pruning only shortens it)
    workers: int

    def words(self) -> str:
        minutes = max(1, round(self.seconds / 60))
        return (
            f"{self.runs} runs ({self.trials} of them search trials); roughly {minutes} minute(s) with "
            f"{self.workers} worker(s) on this machine, from the quiet epoch times and {RECORD_SECONDS:g} s per "
            "record (pruned trials end sooner)"
        )


def estimate_seconds(
    specs: Sequence[RunSpec],
    settings: StudySettings,
    epoch_seconds: dict[int, float],
    steps: dict[int, int],
    workers: int,
) -> Estimate:
    """Per batch size: its grid runs at the untuned lr, `trials` search trials, its tuned and runner-up runs, each
    epochs x (quiet epoch seconds + records x RECORD_SECONDS) + RUN_START_SECONDS; shared by the workers;
    and the workers' start in each phase (the grid and searches, a widening each, the tuned runs).
    """
    seconds: dict[int, float] = {}
    seeds: dict[int, int] = {}
    for spec in specs:
        train = spec.point.train
        batch = train.batch_size
        every = train.eval_every_steps or steps[batch]
        records = math.ceil(steps[batch] / every)
        seconds[batch] = train.epochs * (epoch_seconds[batch] + records * RECORD_SECONDS) + RUN_START_SECONDS
        seeds[batch] = seeds.get(batch, 0) + 1
    trials = settings.trials
    runs = {b: (1 + RERUN) * n + trials for b, n in seeds.items()}  # untuned, the best lr and its runner-ups
    total = sum(seconds[b] * n for b, n in runs.items()) / workers + PHASE_SECONDS * (2 + settings.widen)
    return Estimate(sum(runs.values()), trials * len(runs), total, workers)
