"""The shared vocabulary: metric names, run statuses, file names.

Everything imports this module and it imports nothing of the package, so the
names are defined exactly once (docs/results.md says what each column means). Each recorded metric is one
entry of `METRICS`, from which the metric tuples below, the per-run snapshot,
the figures' labels, the metrics compiled into every model and docs/results.md's
table derive. Run statuses are `RunStatus`.
"""

from dataclasses import dataclass
from enum import Enum

# Columns and record keys that name a run.
RUN_ID = "run_id"
SWEEP = "sweep"  # runs.csv: the grid's name (its `name:`)
STATUS = "status"
SEED = "seed"
BACKEND = "backend"  # runs.csv: Keras's backend (sweep/train/backends.py); results without it ran on tensorflow
TENSORFLOW = "tensorflow"  # the default backend, and that of results written before runs.csv recorded one
ROLE = "role"  # grid | search | tuned (below)
ATTEMPT = "attempt"
STALLED = "stalled"  # on an attempt: why the progress watchdog stopped its worker
WORKER_DEATHS = "worker_deaths"  # on an attempt: how many attempts of its run before it lost their worker
SEARCH_GROUP = "search_group"
# runs.csv, on a search's trials and tuned runs: what the search chose on, and the lr range it drew from
SEARCH_METRIC, SEARCH_LR_LOW, SEARCH_LR_HIGH = "search_metric", "search_lr_low", "search_lr_high"
ERROR = "error"
LR_SEARCH_MARK = ":lr_search:"  # in a learning-rate search's study name, <sweep>:lr_search:<group>

# Metric names: columns of epochs.csv and keys of every record. What each means, when it is recorded
# and where it is read are declared once, in METRICS below.
EPOCH = "epoch"
STEP = "step"
TRAIN_ACC = "train_acc"
TRAIN_EVAL_ACC = "train_eval_acc"
VAL_ACC = "val_acc"
TRAIN_LOSS = "train_loss"
TRAIN_EVAL_LOSS = "train_eval_loss"
VAL_LOSS = "val_loss"
GAP = "gap"
EVAL_GAP = "eval_gap"
EPOCH_SECONDS = "epoch_seconds"
SAMPLES_PER_SECOND = "samples_per_second"
LR = "lr"
NOISE_SCALE = "noise_scale"  # B_simple = grad_noise_trace / grad_norm_sq (sweep/train/noise.py)
GRAD_NORM_SQ = "grad_norm_sq"  # |G|^2, the squared norm of the true gradient (estimate)
GRAD_NOISE_TRACE = "grad_noise_trace"  # tr(Sigma), the per-example gradient covariance's trace (estimate)
RECAL = "_recal"  # the same evaluations with BatchNorm's moving statistics recomputed (sweep/train/recal.py)
TRAIN_EVAL_ACC_RECAL = TRAIN_EVAL_ACC + RECAL
VAL_ACC_RECAL = VAL_ACC + RECAL
TRAIN_EVAL_LOSS_RECAL = TRAIN_EVAL_LOSS + RECAL
VAL_LOSS_RECAL = VAL_LOSS + RECAL
EVAL_GAP_RECAL = EVAL_GAP + RECAL
TRAIN_EVAL_BALANCED_ACC = "train_eval_balanced_acc"

ACCURACY = "accuracy"  # Keras's metric id, and its key in fit's and evaluate's results
LOSS = "loss"  # the loss's key there; Keras tracks it itself, so it is compiled as the loss, never as a metric


class When(Enum):
    """When a metric is recorded: at every record, or only in runs with a setting on (the value names
    the setting as docs/results.md words it).
    """

    ALWAYS = "every record"
    NOISE_SCALE = "`train.noise_scale: true`"
    RECALIBRATE_BN = "`train.recalibrate_bn: true`"
    IMBALANCED = "`data.imbalance` above 0"


@dataclass(frozen=True)
class Metric:
    """One recorded metric: a column of epochs.csv, a field of `sweep.train.records.EpochRecord`."""

    name: str
    doc: str  # its meaning, a cell of docs/results.md's table (`metrics_table`; one row per doc)
    recorded: When = When.ALWAYS
    snapshot: int | None = None  # its place among a run's summary columns <name>_epoch2, <name>_last; None: none
    label: str = ""  # its name in a figure's legend (sweep/report/figures/curves.py); "" where no figure draws it
    keras: str = ""  # the Keras metric it is read from (ACCURACY, LOSS): compiled into every model that evaluates
    headline: int | None = None  # its place among the metrics a tool shows first (TensorBoard's HParams); None: not


_TRAINING = "Keras's running mean over the epoch, in training mode, while the weights change (what the post looked at)"
_TRAIN_EVAL = (
    "the end-of-epoch model in inference mode on a fixed subset of the training set (as large as the validation set)"
)
_VAL = "the end-of-epoch model in inference mode on the validation set"
_NOISE = 'B_simple and its two terms (docs/grid.md, "Gradient noise scale")'
_RECALIBRATED = (
    "the same evaluations with BatchNorm's statistics recomputed for the current weights "
    '(docs/grid.md, "BatchNorm\'s lag: recalibrated evaluation")'
)
_BALANCED = (
    "the mean over classes of the recall on the train_eval subset (plain accuracy rewards predicting class 0; "
    "validation is balanced, so val_acc is already balanced)"
)

# Every recorded metric, in the column order of epochs.csv (those recorded only where measured last).
METRICS: tuple[Metric, ...] = (
    Metric(
        EPOCH,
        '1-based; an integer at the end of an epoch (epoch 2 is the post\'s "epoch 2"), the fraction of epochs '
        "completed for a record inside an epoch (`eval_every_steps`, or a `steps` budget ending mid-epoch)",
    ),
    Metric(STEP, "optimizer steps so far", snapshot=9),
    Metric(
        TRAIN_ACC, _TRAINING, snapshot=1, label="train_acc (running mean, training mode)", keras=ACCURACY, headline=2
    ),
    Metric(
        TRAIN_EVAL_ACC, _TRAIN_EVAL, snapshot=2, label="train_eval_acc (end of epoch, inference mode)", keras=ACCURACY
    ),
    Metric(VAL_ACC, _VAL, snapshot=3, label="val_acc (end of epoch, inference mode)", keras=ACCURACY, headline=1),
    Metric(TRAIN_LOSS, _TRAINING, snapshot=6, keras=LOSS, headline=5),
    Metric(TRAIN_EVAL_LOSS, _TRAIN_EVAL, snapshot=7, keras=LOSS),
    Metric(VAL_LOSS, _VAL, snapshot=8, keras=LOSS, headline=4),
    Metric(GAP, "`train_acc - val_acc`", snapshot=4, label="gap = train_acc - val_acc", headline=3),
    Metric(EVAL_GAP, "`train_eval_acc - val_acc`", snapshot=5, label="eval_gap = train_eval_acc - val_acc", headline=6),
    Metric(EPOCH_SECONDS, "wall time of the epoch's training, without evaluation; epoch 1 includes graph tracing"),
    Metric(SAMPLES_PER_SECOND, "training images per second in that epoch"),
    Metric(LR, "learning rate at the end of the epoch"),
    Metric(NOISE_SCALE, _NOISE, When.NOISE_SCALE),
    Metric(GRAD_NORM_SQ, _NOISE, When.NOISE_SCALE),
    Metric(GRAD_NOISE_TRACE, _NOISE, When.NOISE_SCALE),
    Metric(TRAIN_EVAL_ACC_RECAL, _RECALIBRATED, When.RECALIBRATE_BN, snapshot=10, keras=ACCURACY),
    Metric(VAL_ACC_RECAL, _RECALIBRATED, When.RECALIBRATE_BN, snapshot=11, keras=ACCURACY),
    Metric(TRAIN_EVAL_LOSS_RECAL, _RECALIBRATED, When.RECALIBRATE_BN, snapshot=12, keras=LOSS),
    Metric(VAL_LOSS_RECAL, _RECALIBRATED, When.RECALIBRATE_BN, snapshot=13, keras=LOSS),
    Metric(EVAL_GAP_RECAL, _RECALIBRATED, When.RECALIBRATE_BN, snapshot=14),
    Metric(TRAIN_EVAL_BALANCED_ACC, _BALANCED, When.IMBALANCED, snapshot=15),
)


def recorded(*when: When) -> tuple[str, ...]:
    """The names of the metrics recorded as `when` says, in the column order of epochs.csv."""
    return tuple(m.name for m in METRICS if m.recorded in when)


def snapshot(optional: bool) -> tuple[str, ...]:
    """The metrics summarised per run at epoch 2 and at the last epoch, in their summary order: those
    recorded at every record, or (`optional`) those recorded only where measured.
    """
    chosen = [m for m in METRICS if m.snapshot is not None and (m.recorded is not When.ALWAYS) == optional]
    return tuple(m.name for m in sorted(chosen, key=lambda m: m.snapshot or 0))


def headline() -> tuple[str, ...]:
    """The metrics a tool shows first (TensorBoard's HParams dashboard), in their order."""
    return tuple(m.name for m in sorted((m for m in METRICS if m.headline is not None), key=lambda m: m.headline or 0))


def metrics_table() -> str:
    """docs/results.md's table of the columns of epochs.csv: one row per meaning, in column order."""
    rows: dict[tuple[When, str], list[str]] = {}
    for m in METRICS:
        rows.setdefault((m.recorded, m.doc), []).append(f"`{m.name}`")
    lines = ["| column | meaning |", "|---|---|"]
    for (when, doc), names in rows.items():
        meaning = doc if when is When.ALWAYS else f"only with {when.value}: {doc}"
        lines.append(f"| {', '.join(names)} | {meaning} |")
    return "\n".join(lines) + "\n"


# Derived from METRICS: never edit by hand (tests/test_metrics.py).
EPOCH_METRICS: tuple[str, ...] = recorded(When.ALWAYS)  # at every record, in the column order of epochs.csv
NOISE_METRICS: tuple[str, ...] = recorded(When.NOISE_SCALE)
RECAL_METRICS: tuple[str, ...] = recorded(When.RECALIBRATE_BN)
OPTIONAL_METRICS: tuple[str, ...] = recorded(*(w for w in When if w is not When.ALWAYS))  # columns only where measured
COMPILE_METRICS: tuple[str, ...] = tuple(dict.fromkeys(m.keras for m in METRICS if m.keras not in ("", LOSS)))
PLOT_LABELS: dict[str, str] = {m.name: m.label for m in METRICS if m.label}

# A run-level fact (runs.csv): the epoch after which train.early_stopping, or a callback, ended the run.
STOPPED_EARLY = "stopped_early"
# A run-level fact (runs.csv): the epoch of the checkpoint the run last resumed from (sweep/run/resume.py).
RESUMED_FROM_EPOCH = "resumed_from_epoch"
# runs.csv: a run's thread count at each attempt that trained ("1,2"), a column only where some run's attempts differ
THREADS = "threads"
THREADS_BY_ATTEMPT = "threads_by_attempt"


class RunStatus(str, Enum):
    """A run's status as users see it (`sweep status`, runs.csv) and as the store keeps it (the ``status``
    attribute of an attempt). A member is its word: written, printed and compared as "done", "failed", ...
    (`str` and `format` give the word on every Python version), so the files hold the words they always held.
    """

    DONE = "done"
    RUNNING = "running"
    FAILED = "failed"
    DIVERGED = "diverged"
    PENDING = "pending"
    PRUNED = "pruned"  # a learning-rate search trial stopped early by the pruner
    INTERRUPTED = "interrupted"  # an attempt cut short (crash, Ctrl-C); its run is queued again
    DUPLICATE = "duplicate"  # a second copy of an attempt (two `run`s enqueued at once); never trained

    def __str__(self) -> str:
        return self.value

    @property
    def final(self) -> bool:
        """The run is finished for good and never trained again: done, diverged or pruned. A failed or
        interrupted run gets another attempt (sweep/store/queue.py, `RetryPolicy`).
        """
        return self in (RunStatus.DONE, RunStatus.DIVERGED, RunStatus.PRUNED)

    @property
    def ended(self) -> bool:
        """The attempt has ended (Optuna's `TrialState.is_finished`): every status but pending and running."""
        return self not in (RunStatus.PENDING, RunStatus.RUNNING)

    @property
    def rank(self) -> int:
        """Which attempt speaks for a run that has several (sweep/store/queue.py, `latest_by_run`): the lowest
        rank, then the latest attempt. Best first: done, pruned, running, pending, diverged, failed,
        interrupted, duplicate.
        """
        return _BY_RANK.index(self)


_BY_RANK = (
    RunStatus.DONE,
    RunStatus.PRUNED,
    RunStatus.RUNNING,
    RunStatus.PENDING,
    RunStatus.DIVERGED,
    RunStatus.FAILED,
    RunStatus.INTERRUPTED,
    RunStatus.DUPLICATE,
)
# The statuses a count of runs shows, in its order (`sweep status`, runs' counts): an interrupted run counts
# as pending, as it is queued again.
STATUSES: tuple[RunStatus, ...] = (
    RunStatus.DONE,
    RunStatus.RUNNING,
    RunStatus.FAILED,
    RunStatus.DIVERGED,
    RunStatus.PRUNED,
    RunStatus.PENDING,
)

# What a run is for (the `role` column): a point of the grid, a trial of a
# learning-rate search, a re-run of a search's best learning rate at a seed, or of a runner-up lr
# (`search.rerun`: how much the choice of lr moves the result).
GRID, SEARCH, TUNED, RUNNER_UP = "grid", "search", "tuned", "runner_up"

# Results layout: results/<name>/...
JOURNAL_FILE = "journal.log"
RUNS_CSV = "runs.csv"
EPOCHS_CSV = "epochs.csv"
TIMING_CSV = "timing.csv"  # quiet per-configuration training times (sweep/train/timing.py)
DECISIONS_CSV, LOOKS_CSV = (
    "decisions.csv",
    "looks.csv",
)  # a `run --until-decided`'s verdicts (sweep/analysis/decisions.py)
LOG_DIR = "logs"
STORAGE_ENV = "BATCHSWEEP_STORAGE"  # how a password-bearing URL reaches workers: never on a command line
PARENT_PID_ENV = (
    "BATCHSWEEP_PARENT_PID"  # the coordinator's pid, set for the workers it starts (sweep/run/coordinator.py)
)
