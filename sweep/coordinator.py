"""Start worker subprocesses for a sweep and show their progress. No TensorFlow.

Each worker is ``python -m sweep worker`` with its environment (thread counts,
``CUDA_VISIBLE_DEVICES``, quiet TensorFlow logging) set before it starts, so
TensorFlow sees it on import. Workers send event lines on stdout; their stderr
(TensorFlow's own messages, tracebacks) goes to ``results/<name>/logs/``.
The coordinator prints one line per finished epoch, prefixed with a progress
bar, the run and epoch counts and an ETA, so a log file reads like a terminal.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sweep import devices, vocab
from sweep.store import STORAGE_ENV
from sweep.worker import EVENT_PREFIX, EXIT_NEEDS_MORE_DEVICES, EXIT_RECYCLE

MAX_WORKER_RESTARTS = 3  # a worker that exits for more devices is replaced this many times
# (a worker that exits to free memory or for another replica count, EXIT_RECYCLE, is always replaced)


@dataclass
class Progress:
    """Counts for the progress prefix; ETA from the mean time per finished epoch so far."""

    runs_total: int
    epochs_total: int
    runs_done: int = 0
    epochs_done: int = 0
    started: float = field(default_factory=time.monotonic)
    statuses: dict[str, int] = field(default_factory=dict)

    def prefix(self) -> str:
        share = self.epochs_done / self.epochs_total if self.epochs_total else 1.0
        bar = "#" * round(20 * share) + "." * (20 - round(20 * share))
        elapsed = time.monotonic() - self.started
        eta = elapsed / self.epochs_done * (self.epochs_total - self.epochs_done) if self.epochs_done else None
        return (f"[{bar}] {share:4.0%} runs {self.runs_done}/{self.runs_total} "
                f"epochs {self.epochs_done}/{self.epochs_total} "
                f"elapsed {_clock(elapsed)} ETA {_clock(eta) if eta is not None else '?'}")


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def format_event(event: dict[str, Any], progress: Progress) -> str | None:
    """Update progress with one worker event; return the line to print, if any."""
    kind = event.get("event")
    if kind == "epoch":
        progress.epochs_done += 1
        return (f"{progress.prefix()} | {event['run_id']} epoch {event[vocab.EPOCH]}/{event['epochs']} "
                f"train_acc {event[vocab.TRAIN_ACC]:.3f} train_eval_acc {event[vocab.TRAIN_EVAL_ACC]:.3f} "
                f"val_acc {event[vocab.VAL_ACC]:.3f} gap {event[vocab.GAP]:+.3f} ({event[vocab.EPOCH_SECONDS]:.1f}s)")
    if kind == "end":
        progress.runs_done += 1
        progress.statuses[event["status"]] = progress.statuses.get(event["status"], 0) + 1
        if event["status"] in (vocab.PRUNED, vocab.DIVERGED):  # final: its remaining epochs never come
            progress.epochs_total -= int(event.get("epochs_left", 0))
        if event["status"] == vocab.DONE:
            return None
        return f"{progress.prefix()} | {event['run_id']} {event['status'].upper()}: {event.get('error')}"
    if kind == "interrupted":
        why = f" ({event['reason']})" if event.get("reason") else ""
        return f"{event['run_id']} interrupted{why}; it is queued again"
    if kind == "epochs":  # a steps budget makes more (or fewer) epochs than train.epochs says
        progress.epochs_total += int(event["epochs"]) - int(event["planned"])
        return None
    if kind == "error":
        return f"worker stopped: {event['message']}"
    if kind == "retry":
        progress.runs_total += 1
        progress.epochs_total += int(event.get("epochs", 0))
        return f"{event['run_id']} failed; retrying it"
    return None


def threads_per_worker(workers: int) -> int:
    """TensorFlow threads per worker: a fair share of the cores ($BATCHSWEEP_THREADS overrides).

    Measured in benchmarks/workers.py (README, "Measured")."""
    override = os.environ.get("BATCHSWEEP_THREADS")
    return int(override) if override else max(1, devices.cpu_count() // workers)


def worker_command(study: str, retries: int) -> list[str]:
    """The worker's argv. The store is passed in its environment ($BATCHSWEEP_STORAGE), not
    here: a command line is visible to every user of the machine (ps), a password with it."""
    return [sys.executable, "-m", "sweep", "worker", "--study", study, "--retries", str(retries)]


def run_workers(storage: str, study: str, progress: Progress, log_dir: Path, slots: list[str | None],
                retries: int = 1, out: TextIO = sys.stdout) -> int:
    """One worker process per slot (its CUDA_VISIBLE_DEVICES; None = leave as is) until the
    queue is empty; return the first non-zero exit code. The CPU cores are shared evenly."""
    log_dir.mkdir(parents=True, exist_ok=True)
    threads_each = threads_per_worker(len(slots))
    events: queue.Queue = queue.Queue()
    command = worker_command(study, retries)
    procs = [_start(command, storage, log_dir / f"worker-{i}.log", threads_each, events, slot)
             for i, slot in enumerate(slots)]
    restarts, codes = 0, []
    try:
        while procs:
            item = events.get()
            if isinstance(item, tuple):  # (process, exit code): a worker ended
                proc, code = item
                procs.remove(proc)
                if code == EXIT_RECYCLE or (code == EXIT_NEEDS_MORE_DEVICES and restarts < MAX_WORKER_RESTARTS):
                    restarts += 1
                    procs.append(_start(command, storage, log_dir / f"worker-r{restarts}.log", threads_each, events,
                                        proc.visible_devices))
                    continue
                codes.append(code)
                continue
            line = format_event(item, progress)
            if line:
                print(line, file=out, flush=True)
    except KeyboardInterrupt:
        _stop(procs, out)
        raise
    return next((code for code in codes if code), 0)  # killed workers have negative codes


def _stop(procs: list[subprocess.Popen], out: TextIO) -> None:
    """First Ctrl-C: each worker cancels its run and queues it again. A second: kill at once."""
    print("stopping: running runs are cancelled and queued again (Ctrl-C again to kill now)", file=out, flush=True)
    for proc in procs:
        proc.terminate()
    try:
        for proc in procs:
            proc.wait()
    except KeyboardInterrupt:
        for proc in procs:
            proc.kill()  # their runs stay RUNNING; the next `run` finds the dead pids and re-queues them


def _start(command: list[str], storage: str, log_path: Path, threads: int, events: queue.Queue,
           visible: str | None) -> subprocess.Popen:
    env = devices.worker_environment(dict(os.environ), threads=threads, visible=visible)
    env[STORAGE_ENV] = storage
    log = open(log_path, "a", encoding="utf-8")
    # A session of its own: Ctrl-C reaches only the coordinator, which then
    # stops each worker exactly once (SIGTERM), so no worker is cut short twice.
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log,
                            stdin=subprocess.DEVNULL, env=env, text=True, bufsize=1,
                            start_new_session=True, preexec_fn=_die_with_parent)
    proc.visible_devices = visible  # type: ignore[attr-defined]  # a replacement gets the same devices
    threading.Thread(target=_relay, args=(proc, log, events), daemon=True).start()
    return proc


def _die_with_parent() -> None:
    """Linux: SIGTERM this worker when the coordinator dies (even by kill -9), so no
    orphan keeps claiming runs; it re-queues its run on the way out."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: a worker notices a dead coordinator at its next event (broken pipe)


def _relay(proc: subprocess.Popen, log: TextIO, events: queue.Queue) -> None:
    """Forward event lines to the queue, anything else to the log; then the exit code."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(EVENT_PREFIX):
            events.put(json.loads(line[len(EVENT_PREFIX):]))
        else:
            log.write(line)
    events.put((proc, proc.wait()))
    log.close()
