"""The shared vocabulary: metric names, run statuses, file names.

Everything imports this module and it imports nothing of the package, so the names are
defined exactly once (DESIGN.md, "Results layout").
"""

import enum

# Columns and record keys that name a run.
RUN_ID = "run_id"
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

# Per-epoch metrics, in the column order of epochs.csv.
EPOCH = "epoch"
STEP = "step"
TRAIN_ACC = "train_acc"  # Keras running mean over the epoch, training mode (what the post read)
TRAIN_EVAL_ACC = "train_eval_acc"  # end-of-epoch model, inference mode, fixed train subset
VAL_ACC = "val_acc"
TRAIN_LOSS = "train_loss"
TRAIN_EVAL_LOSS = "train_eval_loss"
VAL_LOSS = "val_loss"
GAP = "gap"  # train_acc - val_acc
EVAL_GAP = "eval_gap"  # train_eval_acc - val_acc
EPOCH_SECONDS = "epoch_seconds"
SAMPLES_PER_SECOND = "samples_per_second"
LR = "lr"

EPOCH_METRICS: tuple[str, ...] = (
    EPOCH,
    STEP,
    TRAIN_ACC,
    TRAIN_EVAL_ACC,
    VAL_ACC,
    TRAIN_LOSS,
    TRAIN_EVAL_LOSS,
    VAL_LOSS,
    GAP,
    EVAL_GAP,
    EPOCH_SECONDS,
    SAMPLES_PER_SECOND,
    LR,
)

# Only in runs with train.noise_scale: true (sweep/train/noise.py); columns of epochs.csv when any run has them.
NOISE_SCALE = "noise_scale"  # B_simple = grad_noise_trace / grad_norm_sq
GRAD_NORM_SQ = "grad_norm_sq"  # |G|^2, the squared norm of the true gradient (estimate)
GRAD_NOISE_TRACE = "grad_noise_trace"  # tr(Sigma), the per-example gradient covariance's trace (estimate)
NOISE_METRICS: tuple[str, ...] = (NOISE_SCALE, GRAD_NORM_SQ, GRAD_NOISE_TRACE)

# Only in runs with train.recalibrate_bn: true (sweep/train/recal.py): the same evaluations with BatchNorm's
# moving statistics recomputed for the current weights, so BatchNorm's lag is not read as failure to fit.
RECAL = "_recal"
TRAIN_EVAL_ACC_RECAL = TRAIN_EVAL_ACC + RECAL
VAL_ACC_RECAL = VAL_ACC + RECAL
TRAIN_EVAL_LOSS_RECAL = TRAIN_EVAL_LOSS + RECAL
VAL_LOSS_RECAL = VAL_LOSS + RECAL
EVAL_GAP_RECAL = EVAL_GAP + RECAL  # train_eval_acc_recal - val_acc_recal
RECAL_METRICS: tuple[str, ...] = (
    TRAIN_EVAL_ACC_RECAL,
    VAL_ACC_RECAL,
    TRAIN_EVAL_LOSS_RECAL,
    VAL_LOSS_RECAL,
    EVAL_GAP_RECAL,
)
# Only in runs with an imbalanced training set (data.imbalance > 0): the mean over classes of the
# recall on the train_eval subset. Validation is balanced, so its val_acc is already balanced.
TRAIN_EVAL_BALANCED_ACC = "train_eval_balanced_acc"
BALANCED_METRICS: tuple[str, ...] = (TRAIN_EVAL_BALANCED_ACC,)
OPTIONAL_METRICS: tuple[str, ...] = NOISE_METRICS + RECAL_METRICS + BALANCED_METRICS  # columns only where measured

# A run-level fact (runs.csv): the epoch after which train.early_stopping, or a callback, ended the run.
STOPPED_EARLY = "stopped_early"
# A run-level fact (runs.csv): the epoch of the checkpoint the run last resumed from (sweep/run/resume.py).
RESUMED_FROM_EPOCH = "resumed_from_epoch"


class RunStatus(str, enum.Enum):
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
# learning-rate search, or a re-run of a search's best learning rate at a seed.
GRID, SEARCH, TUNED = "grid", "search", "tuned"

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
