"""The results store, on top of Optuna storage. No TensorFlow.

One Optuna study per sweep; one trial per attempt at a run:

- a point is enqueued as a WAITING trial with params ``{"run_id", "attempt"}``
  and the spec in its user attributes (``enqueue_trial(..., skip_if_exists=True)``),
  so enqueueing the same grid twice adds nothing;
- a worker claims the next WAITING trial (the same atomic WAITING -> RUNNING
  transition that ``study.ask()`` uses; we do not call ``ask()`` itself, because on
  an empty queue it would create a new, unplanned trial);
- every finished epoch becomes a user attribute ``epoch_0001`` (a JSON object
  with the metric names of `sweep.vocab`) and ``trial.report(val_acc, epoch)``;
- the trial ends COMPLETE (value: final val_acc), or FAIL with user attribute
  ``status`` = ``failed`` (with ``error``), ``diverged`` or ``interrupted``.
  An interrupted or crashed attempt is re-enqueued as attempt + 1; a failed one
  is re-enqueued by the next ``run``; a diverged one never is.

A learning-rate search (the grid file's ``search:``) is one more study per grid
point, ``<sweep>:lr_search:<group>``, listed in the sweep study's user attribute
``lr_searches``. Its slots are enqueued like runs (``run_id`` = ``<group>-t<k>``);
the worker that claims one draws ``lr`` with the study's sampler
(``trial.suggest_float``, so Optuna's dashboard shows lr against the metric) and
the trial may end PRUNED. The best lr of a finished search is re-run at every
seed in the sweep study, as runs with the user attribute ``role`` = ``tuned``.

Plain Optuna reads all of it: ``optuna.load_study(study_name=NAME,
storage=JournalStorage(JournalFileBackend("results/NAME/journal.log")))``.
"""

from __future__ import annotations

import datetime
import errno
import math
import os
import re
import socket
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import optuna
import pandas as pd
from optuna.trial import FrozenTrial, TrialState

from sweep import vocab
from sweep.config import SEARCH_METRICS
from sweep.plan import RunSpec, SearchGroup, at_lr, derive_seed

EPOCH_PREFIX = "epoch_"


# A claim writes the worker's identity within milliseconds; a RUNNING trial still without
# one after this long lost its worker mid-claim (journal stores; databases use heartbeats).
CLAIM_SECONDS = 60.0
STORAGE_ENV = "BATCHSWEEP_STORAGE"  # how a password-bearing URL reaches workers: never on a command line


def redact(text: str) -> str:
    """Replace the password of any database URL in `text` with ***."""
    return re.sub(r"(\w[\w+.-]*://[^:/@\s]*:)[^/\s]*@", r"\1***@", text)


def is_disk_full(err: BaseException) -> bool:
    """ENOSPC or EDQUOT: the store (or the results folder) cannot grow; nothing else can go on."""
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)


DISK_FULL_ADVICE = ("free some space, then run the same command again: the store reopens "
                    "(a record cut off mid-line is dropped) and keeps every finished epoch")


def heartbeat_seconds() -> int:
    """How often a worker on a database store proves it is alive ($BATCHSWEEP_HEARTBEAT, default 20).

    A RUNNING trial whose heartbeat is older than 3x this is taken as dead and re-queued.
    """
    return max(1, int(os.environ.get("BATCHSWEEP_HEARTBEAT", "20")))


def open_storage(target: str | Path) -> optuna.storages.BaseStorage:
    """A journal file path, or a database URL (postgresql://...)."""
    text = str(target)
    if "://" in text:
        if text.startswith("postgresql://"):  # the psycopg 3 driver, whatever SQLAlchemy's default
            text = "postgresql+psycopg://" + text[len("postgresql://"):]
        beat = heartbeat_seconds()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(text, heartbeat_interval=beat, grace_period=3 * beat,
                                              heartbeat_stale_trial_callback=_requeue_stale)
    Path(text).parent.mkdir(parents=True, exist_ok=True)
    repair_journal(Path(text))
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(text))


def repair_journal(path: Path) -> int:
    """Drop a last line cut off by a crash (no trailing newline); return the bytes dropped.

    Optuna skips such a line when reading, but the next append would be glued onto
    it and make the whole journal unreadable. Done under Optuna's own journal lock,
    so a line another process is writing right now is never mistaken for a cut one.
    """
    if not path.exists() or path.stat().st_size == 0:
        return 0
    lock = optuna.storages.journal.JournalFileSymlinkLock(str(path))
    lock.acquire()
    try:
        with open(path, "rb+") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - 1))
            if handle.read(1) == b"\n":
                return 0
            keep = _end_of_last_line(handle, size)
            handle.truncate(keep)
            return size - keep
    finally:
        lock.release()


def _end_of_last_line(handle: Any, size: int, chunk: int = 1 << 16) -> int:
    """Offset just after the last newline in the file (0 if there is none)."""
    position = size
    while position > 0:
        start = max(0, position - chunk)
        handle.seek(start)
        found = handle.read(position - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        position = start
    return 0


# What a sweep study holds, as a number: 1 = runs only (no `format` attribute); 2 = roles and
# learning-rate searches. A newer harness may read an older store, never the other way round.
STORE_FORMAT = 2
FORMAT_ATTR = "batchsweep_format"


class NewerStoreError(Exception):
    """The sweep was written by a newer batchsweep. The message is one line, ready for stderr."""


def open_study(storage: optuna.storages.BaseStorage, name: str, create: bool = True) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:  # load first: opening an existing sweep writes nothing (a newer one is refused untouched)
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        if not create:
            raise
        study = optuna.create_study(study_name=name, storage=storage, direction="maximize", load_if_exists=True)
    attrs = study.user_attrs
    found = int(attrs.get(FORMAT_ATTR, 1))
    if found > STORE_FORMAT:
        raise NewerStoreError(
            f"sweep {name!r} was written by batchsweep {attrs.get('batchsweep_version', '?')} (store format {found}); "
            f"this is batchsweep {_version()} (store format {STORE_FORMAT}): upgrade batchsweep to read or extend it")
    if create and FORMAT_ATTR not in attrs and not study.get_trials(deepcopy=False):
        study.set_user_attr(FORMAT_ATTR, STORE_FORMAT)  # a new sweep: say what wrote it
        study.set_user_attr("batchsweep_version", _version())
    return study


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("batchsweep")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# --- statuses


def status_of(trial: FrozenTrial) -> str:
    if trial.state == TrialState.COMPLETE:
        return vocab.DONE
    if trial.state == TrialState.RUNNING:
        return vocab.RUNNING
    if trial.state == TrialState.WAITING:
        return vocab.PENDING
    if trial.state == TrialState.PRUNED:
        return vocab.PRUNED
    return str(trial.user_attrs.get("status", vocab.FAILED))


STATUS_RANK = {vocab.DONE: 0, vocab.PRUNED: 1, vocab.RUNNING: 2, vocab.PENDING: 3, vocab.DIVERGED: 4,
               vocab.FAILED: 5, vocab.INTERRUPTED: 6, vocab.DUPLICATE: 7}


def latest_by_run(trials: Iterable[FrozenTrial]) -> dict[str, FrozenTrial]:
    """run_id -> the trial that speaks for it: the best status, then the latest attempt."""
    best: dict[str, FrozenTrial] = {}
    for trial in trials:
        run_id = trial.user_attrs.get("run_id")
        if run_id is not None and (run_id not in best or _rank(trial) < _rank(best[run_id])):
            best[run_id] = trial
    return best


def _rank(trial: FrozenTrial) -> tuple[int, int]:
    return STATUS_RANK.get(status_of(trial), 9), -trial.number


# --- enqueueing


def enqueue(study: optuna.Study, runs: list[RunSpec], role: str = vocab.GRID, **attrs: Any) -> int:
    """Add a WAITING trial for every run that has none that is pending, running or finished.

    Failed runs get a new attempt. Returns how many trials were added.
    """
    return _enqueue_items(study, [(spec.run_id, spec.to_json()) for spec in runs], {"role": role, **attrs})


def _enqueue_items(study: optuna.Study, items: list[tuple[str, str]], attrs: dict[str, Any]) -> int:
    current = latest_by_run(study.get_trials(deepcopy=False))
    attempts = _attempts(study)
    added = 0
    for run_id, spec_json in items:
        trial = current.get(run_id)
        if trial is not None and status_of(trial) in (*vocab.FINAL_STATUSES, vocab.RUNNING, vocab.PENDING):
            continue
        _enqueue_attempt(study, run_id, spec_json, attempts.get(run_id, 0) + 1, attrs)
        added += 1
    return added


def _attempts(study: optuna.Study) -> dict[str, int]:
    counts: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        run_id = trial.user_attrs.get("run_id")
        if run_id is not None:
            counts[run_id] = max(counts.get(run_id, 0), int(trial.user_attrs.get("attempt", 1)))
    return counts


def _enqueue_attempt(study: optuna.Study, run_id: str, spec_json: str, attempt: int,
                     attrs: dict[str, Any]) -> None:
    study.enqueue_trial(
        {"run_id": run_id, "attempt": attempt},
        user_attrs={**attrs, "run_id": run_id, "attempt": attempt, "spec": spec_json},
        skip_if_exists=True,
    )


# --- learning-rate searches

SEARCHES_ATTR = "lr_searches"  # on the sweep study: group id -> the search's settings, for every worker


@dataclass(frozen=True)
class Search:
    """A learning-rate search as workers see it: its study and settings."""

    group_id: str
    study: optuna.Study
    settings: dict[str, Any]  # lr_low, lr_high, lr_log, trials, metric, seed, prune

    def sample_lr(self, trial: optuna.Trial) -> float:
        """Draw this trial's lr with TPE, seeded per trial so a search is reproducible.

        TPE (Optuna's default sampler) models good and bad learning rates separately;
        it needs a few observations first, so the first half of the trials are random
        (log-uniform). A Gaussian process would suit a 1-D search of ~8 trials as well,
        but Optuna's GPSampler needs PyTorch. constant_liar keeps parallel workers from
        drawing the same lr while earlier trials are still running.
        """
        s = self.settings
        self.study.sampler = optuna.samplers.TPESampler(
            n_startup_trials=max(1, s["trials"] // 2), constant_liar=True,
            seed=derive_seed(s["seed"], "lr_search", self.group_id, trial.number))
        return trial.suggest_float("lr", s["lr_low"], s["lr_high"], log=s["lr_log"])

    def start(self, claim: Claim) -> Claim:
        """A claimed slot becomes a run: draw its lr, and keep the run's own spec on the trial."""
        spec = at_lr(claim.spec, self.sample_lr(claim.trial))
        claim.trial.set_user_attr("spec", spec.to_json())
        return Claim(claim.trial, spec)


def register_searches(study: optuna.Study, groups: list[SearchGroup]) -> list[Search]:
    """Create each group's study, record the settings on the sweep study, enqueue the trial slots."""
    known = dict(study.user_attrs.get(SEARCHES_ATTR, {}))
    for group in groups:
        known[group.group_id] = {**{k: getattr(group.search, k) for k in
                                    ("lr_low", "lr_high", "lr_log", "trials", "metric", "seed", "prune")},
                                 "study": group.study_name()}
    if groups:
        study.set_user_attr(SEARCHES_ATTR, known)
    searches = [s for s in searches_of(study) if s.group_id in {g.group_id for g in groups}]
    templates = {g.group_id: g.template.to_json() for g in groups}
    for search in searches:
        slots = [(f"{search.group_id}-t{k}", templates[search.group_id]) for k in range(1, search.settings["trials"] + 1)]
        _enqueue_items(search.study, slots, {"role": vocab.SEARCH, "search_group": search.group_id})
    return searches


def searches_of(study: optuna.Study) -> list[Search]:
    """Every learning-rate search of the sweep, its study opened with the search's pruner."""
    result = []
    for group_id, settings in study.user_attrs.get(SEARCHES_ATTR, {}).items():
        pruner = (optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=2) if settings["prune"]
                  else optuna.pruners.NopPruner())
        search_study = optuna.create_study(study_name=settings["study"], storage=study._storage, pruner=pruner,
                                           direction=SEARCH_METRICS[settings["metric"]], load_if_exists=True)
        result.append(Search(group_id, search_study, settings))
    return result


def best_lr(search: Search) -> float | None:
    """The search's best lr once none of its trials is pending or running; None before (or if none finished)."""
    trials = latest_by_run(search.study.get_trials(deepcopy=False)).values()
    if any(status_of(t) in (vocab.PENDING, vocab.RUNNING, vocab.INTERRUPTED) for t in trials):
        return None
    complete = [t for t in trials if t.state == TrialState.COMPLETE and "lr" in t.params]
    if not complete:
        return None
    pick = max if search.settings["metric"] == "val_acc" else min
    return float(pick(complete, key=lambda t: (t.value, -t.number)).params["lr"])


def tuned_runs(study: optuna.Study, groups: list[SearchGroup], seeds: tuple[int, ...]) -> dict[str, list[RunSpec]]:
    """group id -> its best lr's run at every seed, for each search that has finished (reads only)."""
    searches = {s.group_id: s for s in searches_of(study)}
    result = {}
    for group in groups:
        lr = best_lr(searches[group.group_id]) if group.group_id in searches else None
        if lr is not None:
            result[group.group_id] = group.tuned_runs(lr, seeds)
    return result


def enqueue_tuned(study: optuna.Study, groups: list[SearchGroup], seeds: tuple[int, ...]) -> list[RunSpec]:
    """Queue each finished search's best lr at every seed; return every tuned run known so far."""
    tuned = tuned_runs(study, groups, seeds)
    for group_id, runs in tuned.items():
        enqueue(study, runs, role=vocab.TUNED, search_group=group_id)
    return [spec for runs in tuned.values() for spec in runs]


def search_slots(study: optuna.Study) -> dict[str, RunSpec]:
    """slot id -> its template spec, for every trial slot of the sweep's learning-rate searches."""
    slots = {}
    for search in searches_of(study):
        for trial in search.study.get_trials(deepcopy=False):
            slots.setdefault(trial.user_attrs["run_id"], RunSpec.from_json(trial.user_attrs["spec"]))
    return slots


def requeue_dead_everywhere(study: optuna.Study) -> list[str]:
    """`requeue_dead` for the sweep and each of its learning-rate searches."""
    return [run_id for s in [study, *(x.study for x in searches_of(study))] for run_id in requeue_dead(s)]


def all_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The sweep's trials and those of its learning-rate searches (their run ids never collide)."""
    trials = list(study.get_trials(deepcopy=False))
    for search in searches_of(study):
        trials.extend(search.study.get_trials(deepcopy=False))
    return trials


# --- claiming and recording (the worker's side)


@dataclass
class Claim:
    trial: optuna.Trial
    spec: RunSpec


def claim_next(study: optuna.Study) -> Claim | None:
    """Atomically take the next WAITING trial, or None if the queue is empty."""
    storage = study._storage
    for frozen in storage.get_all_trials(study._study_id, deepcopy=False, states=(TrialState.WAITING,)):
        spec = RunSpec.from_json(frozen.user_attrs["spec"])  # unreadable: raises before claiming
        try:
            if not storage.set_trial_state_values(frozen._trial_id, state=TrialState.RUNNING):
                continue  # another worker took it first
        except optuna.exceptions.UpdateFinishedTrialError:
            continue
        if _duplicate(storage, study._study_id, frozen):
            storage.set_trial_user_attr(frozen._trial_id, "status", vocab.DUPLICATE)
            storage.set_trial_state_values(frozen._trial_id, state=TrialState.FAIL)
            continue
        trial = optuna.Trial(study, frozen._trial_id)
        # Identity first: if this process dies from here on, `requeue_dead` can tell.
        # (The enqueued run_id is not suggested as a param: Optuna forbids a
        # categorical param whose choices differ between trials. trials_dataframe()
        # shows it as the user_attrs_run_id column.)
        for key, value in _worker_identity().items():
            trial.set_user_attr(key, value)
        return Claim(trial, spec)
    return None


def _duplicate(storage: optuna.storages.BaseStorage, study_id: int, frozen: FrozenTrial) -> bool:
    """Whether an earlier trial holds the same attempt at the same run.

    Two `run` commands that enqueue at the same moment can both add attempt k of a
    run (enqueueing reads, then writes). Only the lowest-numbered copy is trained,
    whichever worker claims it, so a run is still trained once.
    """
    key = (frozen.user_attrs.get("run_id"), frozen.user_attrs.get("attempt"))
    return any((t.user_attrs.get("run_id"), t.user_attrs.get("attempt")) == key and t.number < frozen.number
               for t in storage.get_all_trials(study_id, deepcopy=False))


def _worker_identity() -> dict[str, Any]:
    """host + pid + process start time: enough to tell later whether this worker is dead.

    Written one attribute at a time, host last: `requeue_dead` judges only trials whose
    host is written, so it never sees a half-written identity (a pid of -1) as a dead worker.
    """
    import psutil

    return {"worker_pid": os.getpid(), "worker_started": psutil.Process().create_time(),
            "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "worker_host": socket.gethostname()}


def record_info(trial: optuna.Trial, info: dict[str, Any]) -> None:
    trial.set_user_attr("info", info)


def record_epoch(trial: optuna.Trial, record: dict[str, Any], metric: str = vocab.VAL_ACC) -> None:
    """One evaluation record. End of epoch e: user attribute epoch_000e and trial.report(metric, e).
    A record inside an epoch (eval_every_steps, a steps budget) is keyed by its step as well and
    not reported to Optuna, whose intermediate values are per epoch."""
    epoch = float(record[vocab.EPOCH])
    if epoch.is_integer():
        trial.set_user_attr(f"{EPOCH_PREFIX}{int(epoch):04d}", record)
        trial.report(float(record[metric]), int(epoch))
    else:
        trial.set_user_attr(f"{EPOCH_PREFIX}{int(epoch):04d}_step_{int(record[vocab.STEP]):09d}", record)


def finish(study: optuna.Study, trial: optuna.Trial, status: str, value: float | None = None,
           error: str | None = None) -> None:
    trial.set_user_attr("status", status)
    if error:
        trial.set_user_attr("error", error[-4000:])  # the tail: where the exception is
    if status == vocab.DONE:
        study.tell(trial, value)
    elif status == vocab.PRUNED:
        study.tell(trial, state=TrialState.PRUNED)
    else:
        study.tell(trial, state=TrialState.FAIL)


def retry_failed(study: optuna.Study, trial: optuna.Trial, retries: int) -> bool:
    """Queue another attempt of a failed run if it has retries left. Returns whether it did."""
    frozen = study._storage.get_trial(trial._trial_id)
    if int(frozen.user_attrs.get("attempt", 1)) > retries:
        return False
    _enqueue_next(study, frozen)
    return True


def requeue(study: optuna.Study, trial_id: int, reason: str) -> None:
    """End an attempt that cannot finish (interrupted, crashed) and enqueue the next attempt."""
    _mark_interrupted(study._storage, trial_id, reason)
    study._storage.set_trial_state_values(trial_id, state=TrialState.FAIL)
    _enqueue_next(study, study._storage.get_trial(trial_id))


def _requeue_stale(study: optuna.Study, trial: FrozenTrial) -> None:
    """Optuna's callback for a trial it has failed for a missing heartbeat (database stores)."""
    _mark_interrupted(study._storage, trial._trial_id, "no heartbeat from its worker: presumed dead")
    _enqueue_next(study, trial)


def _mark_interrupted(storage: optuna.storages.BaseStorage, trial_id: int, reason: str) -> None:
    storage.set_trial_user_attr(trial_id, "status", vocab.INTERRUPTED)
    storage.set_trial_user_attr(trial_id, "error", reason)


def _enqueue_next(study: optuna.Study, frozen: FrozenTrial) -> None:
    """Queue the attempt after `frozen`, with the same run and spec."""
    attrs = frozen.user_attrs
    if "run_id" in attrs:
        kept = {k: attrs[k] for k in ("role", "search_group") if k in attrs}
        _enqueue_attempt(study, attrs["run_id"], attrs["spec"], int(attrs.get("attempt", 1)) + 1, kept)


def is_database(study: optuna.Study) -> bool:
    return isinstance(study._storage, optuna.storages.RDBStorage)


def requeue_dead(study: optuna.Study) -> list[str]:
    """Re-enqueue RUNNING trials whose worker is gone. Returns their run ids.

    Database store: Optuna's heartbeat (any machine). Journal: the worker's pid and
    start time (this machine only; a journal is shared by processes of one machine).
    """
    import psutil

    if is_database(study):
        before = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
        optuna.storages.fail_stale_trials(study)
        after = {t.number: t for t in study.get_trials(deepcopy=False)}
        return [after[n].user_attrs.get("run_id", "?") for n in sorted(before)
                if after[n].state == TrialState.FAIL]
    host, revived = socket.gethostname(), []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        attrs = trial.user_attrs
        if "run_id" not in attrs:
            continue
        if "worker_host" not in attrs:  # being claimed right now, or its claimer died before saying who it is
            if _seconds_since(trial.datetime_start) > CLAIM_SECONDS:
                requeue(study, trial._trial_id, "its worker died while claiming it")
                revived.append(attrs["run_id"])
            continue
        if attrs["worker_host"] != host:
            continue
        if _alive(psutil, int(attrs.get("worker_pid", -1)), float(attrs.get("worker_started", 0))):
            continue
        requeue(study, trial._trial_id, f"worker pid {attrs.get('worker_pid')} on {host} died mid-run")
        revived.append(attrs["run_id"])
    return revived


def _seconds_since(moment: datetime.datetime | None) -> float:
    return (datetime.datetime.now() - moment).total_seconds() if moment else math.inf


def may_come_back(study: optuna.Study) -> bool:
    """Whether a RUNNING trial could still return to the queue if its worker dies.

    On a database any running trial can (heartbeats); on a journal, those of live
    workers on this machine can (dead ones were re-queued already).
    """
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    if is_database(study):
        return bool(running)
    return any(t.user_attrs.get("worker_host") == socket.gethostname() for t in running)


def _alive(psutil: Any, pid: int, started: float) -> bool:
    try:
        process = psutil.Process(pid)
        same = abs(process.create_time() - started) < 1.0  # a reused pid has another start time
        return same and process.status() != psutil.STATUS_ZOMBIE  # killed, not yet reaped
    except (psutil.NoSuchProcess, ValueError):
        return False


# --- reading tables


def epochs_of(trial: FrozenTrial) -> list[dict[str, Any]]:
    """The run's evaluation records in training order."""
    records = [v for k, v in trial.user_attrs.items() if k.startswith(EPOCH_PREFIX)]
    return sorted(records, key=lambda r: (r[vocab.STEP], r[vocab.EPOCH]))


def runs_table(study: optuna.Study) -> pd.DataFrame:
    """One row per run: spec columns, status, timings, run facts, final metrics."""
    rows = [_run_row(t) for t in latest_by_run(all_trials(study)).values()]
    return pd.DataFrame(rows).sort_values("run_id").reset_index(drop=True) if rows else pd.DataFrame()


def _run_row(trial: FrozenTrial) -> dict[str, Any]:
    spec = RunSpec.from_json(trial.user_attrs["spec"])
    epochs = epochs_of(trial)
    final = {f"final_{k}": v for k, v in (epochs[-1] if epochs else {}).items() if k != vocab.EPOCH}
    started, finished = trial.datetime_start, trial.datetime_complete
    return {
        "run_id": _shown_id(trial, spec), "sweep": spec.sweep, "status": status_of(trial),
        "attempt": trial.user_attrs.get("attempt", 1), **_role(trial), **spec.flat(),
        **trial.user_attrs.get("info", {}), "epochs_done": len(epochs),
        "started": started.isoformat() if started else None,
        "finished": finished.isoformat() if finished else None,
        "duration_seconds": (finished - started).total_seconds() if started and finished else None,
        **final, "error": trial.user_attrs.get("error"), "trial_number": trial.number,
        "worker_host": trial.user_attrs.get("worker_host"), "worker_pid": trial.user_attrs.get("worker_pid"),
        "visible_devices": trial.user_attrs.get("visible_devices"),
        "worker_rss_mb": trial.user_attrs.get("worker_rss_mb"),
    }


def _shown_id(trial: FrozenTrial, spec: RunSpec) -> str:
    """The run's id; a search slot whose lr is not drawn yet shows its slot id (its spec is only a template)."""
    if trial.user_attrs.get("role") == vocab.SEARCH and "lr" not in trial.params:
        return str(trial.user_attrs["run_id"])
    return spec.run_id


def _role(trial: FrozenTrial) -> dict[str, Any]:
    """role (grid | search | tuned) and the learning-rate search it belongs to, if any."""
    return {"role": trial.user_attrs.get("role", vocab.GRID), "search_group": trial.user_attrs.get("search_group")}


def epochs_table(study: optuna.Study) -> pd.DataFrame:
    """One row per (run, epoch), every spec column repeated (tidy)."""
    rows = []
    for trial in latest_by_run(all_trials(study)).values():
        spec = RunSpec.from_json(trial.user_attrs["spec"])
        head = {"run_id": _shown_id(trial, spec), "status": status_of(trial), **_role(trial), **spec.flat()}
        rows.extend({**head, **{k: record.get(k) for k in vocab.EPOCH_METRICS},
                     **{k: record[k] for k in vocab.NOISE_METRICS if k in record}} for record in epochs_of(trial))
    if not rows:
        return pd.DataFrame(columns=["run_id", "status", *vocab.EPOCH_METRICS])
    return pd.DataFrame(rows).sort_values(["run_id", vocab.EPOCH]).reset_index(drop=True)


def export_csv(study: optuna.Study, folder: Path) -> tuple[Path, Path]:
    """Write runs.csv and epochs.csv atomically; return their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / vocab.RUNS_CSV, folder / vocab.EPOCHS_CSV
    for table, path in zip((runs_table(study), epochs_table(study)), paths):
        tmp = path.with_name(f".{path.name}.tmp")
        table.to_csv(tmp, index=False)
        os.replace(tmp, path)
    return paths


def counts(study: optuna.Study, run_ids: Iterable[str] | None = None) -> dict[str, int]:
    """Runs per status; with run_ids, only those runs, and unplanned ones count as pending."""
    current = latest_by_run(all_trials(study))
    ids = list(run_ids) if run_ids is not None else list(current)
    result = {s: 0 for s in vocab.STATUSES}
    for run_id in ids:
        status = status_of(current[run_id]) if run_id in current else vocab.PENDING
        status = vocab.PENDING if status == vocab.INTERRUPTED else status
        result[status] = result.get(status, 0) + 1
    return result
