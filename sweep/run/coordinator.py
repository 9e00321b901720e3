"""Start worker subprocesses for a sweep and show their progress. No TensorFlow.

Each worker is ``python -m sweep worker`` with its environment (thread counts,
``CUDA_VISIBLE_DEVICES``, quiet TensorFlow logging) set before it starts, so
TensorFlow sees it on import. Workers send event lines on stdout (`sweep.run.events`); their stderr
(TensorFlow's own messages, tracebacks) goes to ``results/<name>/logs/``.
The coordinator prints one line per finished epoch, prefixed with a progress
bar, the run and epoch counts and an ETA, so a log file reads like a terminal.
"""

from __future__ import annotations

import enum
import errno
import functools
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from sweep import vocab
from sweep.base import atomic
from sweep.exits import (
    EXIT_DISK_FULL,
    EXIT_INTERRUPTED,
    EXIT_NEEDS_MORE_DEVICES,
    EXIT_OK,
    EXIT_ORPHANED,
    EXIT_RECYCLE,
    EXIT_STORE_UNREACHABLE,
    EXIT_UNREADABLE,
    UsageError,
)
from sweep.run import events
from sweep.store.queue import DEFAULT_POLICY, RetryPolicy
from sweep.train import devices
from sweep.vocab import RunStatus

Say = Callable[[str], None]  # where progress lines go
MAX_WORKER_RESTARTS = 3  # a worker that exits for more devices is replaced this many times
# (a worker that exits to free memory or for another replica count, EXIT_RECYCLE, is always replaced)
RESTART_CODES = (EXIT_RECYCLE, EXIT_NEEDS_MORE_DEVICES)
# A worker that stopped by its own choice, not a death: done, asked to stop, the disk full, a newer queue,
# the database out of reach past the outage bound.
CHOSEN_EXITS = (EXIT_OK, EXIT_INTERRUPTED, EXIT_DISK_FULL, EXIT_UNREADABLE, EXIT_ORPHANED, EXIT_STORE_UNREACHABLE)


class Death(enum.Enum):
    """What a worker's death meant to its sweep (`OnDeath`)."""

    UNEXPLAINED = "unexplained"  # it held no run: its exit code is the sweep's
    ACCOUNTED = "accounted"  # its runs were queued again or left failed, and nothing is queued now
    REPLACE = "replace"  # as ACCOUNTED, with runs still queued: a new worker takes its place


OnDeath = Callable[[int, int], Death]  # (pid, exit code) of a worker that died


@dataclass
class Progress:
    """Counts for the progress prefix; ETA from the mean time per finished epoch so far."""

    runs_total: int
    epochs_total: int
    runs_done: int = 0
    epochs_done: int = 0
    started: float = field(default_factory=time.monotonic)
    statuses: dict[RunStatus, int] = field(default_factory=dict)

    def prefix(self) -> str:
        share = self.epochs_done / self.epochs_total if self.epochs_total else 1.0
        bar = "#" * round(20 * share) + "." * (20 - round(20 * share))
        elapsed = time.monotonic() - self.started
        eta = elapsed / self.epochs_done * (self.epochs_total - self.epochs_done) if self.epochs_done else None
        return (
            f"[{bar}] {share:4.0%} runs {self.runs_done}/{self.runs_total} "
            f"epochs {self.epochs_done}/{self.epochs_total} "
            f"elapsed {_clock(elapsed)} ETA {_clock(eta) if eta is not None else '?'}"
        )


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def format_event(event: events.Event, progress: Progress) -> str | None:
    """Update progress with one worker event; return the line to print, if any."""
    if isinstance(event, events.EpochDone):
        if float(event.record[vocab.EPOCH]).is_integer():  # records inside an epoch (eval_every_steps) are part of it
            progress.epochs_done += 1
        r = event.record
        return (
            f"{progress.prefix()} | {event.run_id} epoch {r[vocab.EPOCH]}/{event.epochs} "
            f"train_acc {r[vocab.TRAIN_ACC]:.3f} train_eval_acc {r[vocab.TRAIN_EVAL_ACC]:.3f} "
            f"val_acc {r[vocab.VAL_ACC]:.3f} gap {r[vocab.GAP]:+.3f} ({r[vocab.EPOCH_SECONDS]:.1f}s)"
        )
    if isinstance(event, events.RunEnded):
        progress.runs_done += 1
        progress.statuses[event.status] = progress.statuses.get(event.status, 0) + 1
        if event.status in (RunStatus.PRUNED, RunStatus.DIVERGED):  # final: its remaining epochs never come
            progress.epochs_total -= event.epochs_left
        if event.status is RunStatus.DONE:
            return None
        return f"{progress.prefix()} | {event.run_id} {event.status.upper()}: {event.error}"
    if isinstance(event, events.RunInterrupted):
        why = f" ({event.reason})" if event.reason else ""
        return f"{event.run_id} interrupted{why}; it is queued again"
    if isinstance(event, events.EpochsKnown):
        progress.epochs_total += event.epochs - event.planned
        return None
    if isinstance(event, events.WorkerStopped):
        return f"worker stopped: {event.message}"
    if isinstance(event, events.RunRetried):
        progress.runs_total += 1
        progress.epochs_total += event.epochs
        return f"{event.run_id} failed; retrying it"
    return None


THREADS_ENV = "BATCHSWEEP_THREADS"


def threads_per_worker(workers: int) -> int:
    """TensorFlow threads per worker: a fair share of the cores ($BATCHSWEEP_THREADS overrides).

    Measured in benchmarks/speed/workers.py (docs/measured.md).
    """
    override = os.environ.get(THREADS_ENV)
    return int(override) if override else max(1, devices.cpu_count() // workers)


def worker_command(study: str, policy: RetryPolicy, flags: Sequence[str] = ()) -> list[str]:
    """The worker's argv. The store is passed in its environment ($BATCHSWEEP_STORAGE), not
    here: a command line is visible to every user of the machine (ps), a password with it.
    """
    return [sys.executable, "-m", "sweep", "worker", "--study", study, *policy_flags(policy), *flags]


def policy_flags(policy: RetryPolicy) -> list[str]:
    """The retry policy as a worker's flags."""
    return ["--retries", str(policy.retries), "--max-requeues", str(policy.max_requeues)]


def ended(code: int) -> str:
    """How a worker process ended, from its exit code: "killed by SIGKILL", "exit code 1"."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def run_workers(
    storage: str,
    study: str,
    progress: Progress,
    log_dir: Path,
    slots: list[str | None],
    policy: RetryPolicy = DEFAULT_POLICY,
    say: Say = print,
    flags: Sequence[str] = (),
    towers: bool = False,
    on_death: OnDeath | None = None,
    threads: int | None = None,
) -> int:
    """One worker process per slot (its CUDA_VISIBLE_DEVICES; None = leave as is) until the
    queue is empty; return the first non-zero exit code. `threads` each, or the CPU cores shared evenly;
    `towers`: the workers train packs, their towers side by side (`devices.towers_side_by_side`).
    A worker that died holding runs (`on_death` says so, having queued them again or left them failed
    past the policy's cap) is replaced while runs are queued: the sweep goes on without it.
    """
    atomic.own_folder(log_dir)
    threads_each = threads or threads_per_worker(len(slots))
    inbox: queue.Queue = queue.Queue()
    command = worker_command(study, policy, flags)
    start = functools.partial(_start, command, storage, threads=threads_each, inbox=inbox, towers=towers)
    procs = [start(log_dir / f"worker-{i}.log", visible=slot) for i, slot in enumerate(slots)]
    restarts = 0
    replaced = 0
    codes = []
    exited: dict[subprocess.Popen, float] = {}
    try:
        while procs:
            item = _next(inbox, procs, exited)
            if isinstance(item, tuple):  # (process, exit code): a worker ended
                proc, code = item
                if proc not in procs:  # its relay and the coordinator's own wait both said so
                    continue
                procs.remove(proc)
                if code == EXIT_RECYCLE or (code == EXIT_NEEDS_MORE_DEVICES and restarts < MAX_WORKER_RESTARTS):
                    restarts += 1
                    procs.append(start(log_dir / f"worker-r{restarts}.log", visible=proc.visible_devices))  # type: ignore[attr-defined]
                    continue
                # exit 0 too: a callback's os._exit(0) ends a worker that still holds a run
                held = code not in CHOSEN_EXITS or code == EXIT_OK
                death = on_death(proc.pid, code) if on_death and held else Death.UNEXPLAINED
                if death == Death.REPLACE:
                    replaced += 1
                    say(f"worker pid {proc.pid} {ended(code)}; starting a new worker in its place")
                    procs.append(start(log_dir / f"worker-d{replaced}.log", visible=proc.visible_devices))  # type: ignore[attr-defined]
                    continue
                if code not in CHOSEN_EXITS:  # a death: its exit code on the terminal, whatever it meant
                    say(f"worker pid {proc.pid} {ended(code)}")
                if death == Death.UNEXPLAINED:
                    codes.append(code)
                continue
            line = format_event(item, progress)
            if line:
                say(line)
    except KeyboardInterrupt:
        _stop(procs, say)
        raise
    return next((code for code in codes if code), 0)  # killed workers have negative codes


POLL_SECONDS = 1.0  # how often the coordinator looks at its workers while no event arrives
RELAY_GRACE = 5.0  # after a worker exits, how long its relay has to pass on its last lines and its exit code


def _next(
    inbox: queue.Queue, procs: list[subprocess.Popen], exited: dict[subprocess.Popen, float]
) -> events.Event | tuple[subprocess.Popen, int]:
    """The next event or (worker, exit code): from the relays, else from the processes themselves, where a
    worker has exited and its relay has said nothing of it for RELAY_GRACE seconds (a relay that died must not
    leave `run` waiting forever). `exited`: when each worker was first seen gone.
    """
    while True:
        try:
            return inbox.get(timeout=POLL_SECONDS)
        except queue.Empty:
            now = time.monotonic()
            for proc in procs:
                if proc.poll() is not None and now - exited.setdefault(proc, now) >= RELAY_GRACE:
                    return proc, proc.returncode


def _stop(procs: list[subprocess.Popen], say: Say) -> None:
    """First Ctrl-C: each worker cancels its run and queues it again. A second: kill at once."""
    say("stopping: running runs are cancelled and queued again (Ctrl-C again to kill now)")
    for proc in procs:
        proc.terminate()
    try:
        for proc in procs:
            proc.wait()
    except KeyboardInterrupt:
        for proc in procs:
            proc.kill()  # their runs stay RUNNING; the next `run` finds the dead pids and re-queues them


def _open_log(path: Path) -> TextIO:
    """A worker's log, appended to; a path that is a symbolic link (ln -s ~/victim logs/worker-0.log) is
    refused (O_NOFOLLOW), not written through.
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        return open(os.open(path, flags, 0o644), "a", encoding="utf-8")  # noqa: SIM115 - closed by _relay
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        raise UsageError(f"{path} is a symbolic link; remove it: worker logs are written as plain files") from None


def _start(
    command: list[str],
    storage: str,
    log_path: Path,
    *,
    threads: int,
    inbox: queue.Queue,
    visible: str | None,
    towers: bool,
) -> subprocess.Popen:
    env = devices.worker_environment(dict(os.environ), threads=threads, visible=visible, towers=towers)
    env[vocab.STORAGE_ENV] = storage
    env[vocab.PARENT_PID_ENV] = str(os.getpid())  # the worker arms its own parent-death signal: watch_parent
    log = _open_log(log_path)
    # A session of its own: Ctrl-C reaches only the coordinator, which then
    # stops each worker exactly once (SIGTERM), so no worker is cut short twice.
    # Nothing runs in the child between fork and exec (Python code there can deadlock while
    # the relay threads run): the worker sets its parent-death signal itself (watch_parent).
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
        encoding="utf-8",
        errors="replace",  # a user's callback may print any bytes: a strict decode would end the relay
        bufsize=1,
        start_new_session=True,
    )
    proc.visible_devices = visible  # type: ignore[attr-defined]  # a replacement gets the same devices
    threading.Thread(target=_relay, args=(proc, log, inbox), daemon=True).start()
    return proc


PR_SET_PDEATHSIG = 1  # prctl's option, from <linux/prctl.h>


def watch_parent() -> bool:
    """The first thing a worker does. Started by a coordinator ($BATCHSWEEP_PARENT_PID, its pid), on
    Linux: have SIGTERM sent to this process when the coordinator dies (even by kill -9), so no
    orphan keeps claiming runs (it re-queues its run on the way out); then check that the
    coordinator is still its parent. False: the coordinator died before the signal was armed, and
    the worker must exit without claiming anything (`EXIT_ORPHANED`). True otherwise: a worker
    started by hand or by Slurm has no such variable, and elsewhere than Linux a worker notices a
    dead coordinator at its next event (broken pipe). The variable is taken out of the
    environment, so no process this one starts inherits it.
    """
    expected = os.environ.pop(vocab.PARENT_PID_ENV, None)
    if expected is None or not sys.platform.startswith("linux"):
        return True
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # no prctl to call: the broken pipe, as elsewhere; the check below still holds
    # Armed: a coordinator that dies from now on sends SIGTERM. One that died before has left
    # this process to another parent (init, or a subreaper), which the signal never concerns.
    return os.getppid() == int(expected)


def _relay(proc: subprocess.Popen, log: TextIO, inbox: queue.Queue) -> None:
    """Forward event lines to the queue, anything else to the log; then the exit code, whatever went wrong
    reading the worker's output (said in its log).
    """
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            event = events.from_line(line)
            if event is None:
                log.write(line)
            else:
                inbox.put(event)
    except Exception as err:  # noqa: BLE001 - any failure here would otherwise hang `run`
        log.write(f"the coordinator stopped reading this worker's output: {type(err).__name__}: {err}\n")
    finally:
        inbox.put((proc, proc.wait()))
        log.close()
