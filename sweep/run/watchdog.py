"""The progress watchdog: a worker whose run stops making records is stopped, and its run re-queued.

A run that hangs alive (a deadlocked input pipeline, a user callback that never returns, a stuck
device) keeps its worker's heartbeat going for ever, so no other process would ever take its run
back. A thread beside the training watches the time since the run's last record (or its start) and,
past a bound taken from the worker's own pace, writes why on the run's attempt and kills its own
process: the run's worker is then dead like any other, and its run is queued again by whoever sees
it first, counted toward the retry policy's cap on deaths (`RetryPolicy.max_requeues`).

The bound: 10x the slowest interval between records this worker has seen (its first includes
building the model), at least the floor ($BATCHSWEEP_STALL_FLOOR, seconds, default 600). Before the
worker has seen any interval, the floor (time to build the model) and 10x the seconds its runs take to
their first record where `sweep time` measured their configuration (timing.csv); without a measure,
10x the floor: a first epoch may be long. No TensorFlow.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

from sweep import vocab
from sweep.run import events
from sweep.store import Lease

FACTOR = 10.0  # times the slowest interval seen before a run counts as stalled
FLOOR_ENV = "BATCHSWEEP_STALL_FLOOR"
DEFAULT_FLOOR = 600.0
WRITE_SECONDS = 10.0  # the most the watchdog waits to write why before it stops the worker


def floor_seconds() -> float:
    """The least bound, in seconds ($BATCHSWEEP_STALL_FLOOR, default 600)."""
    return max(0.1, float(os.environ.get(FLOOR_ENV, DEFAULT_FLOOR)))


def _kill_this_process() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class Watchdog:
    """Watches the runs a worker trains (`watching`), fed by the events it emits (`emit`)."""

    def __init__(self, floor: float, stop: Callable[[], None] = _kill_this_process) -> None:
        self._floor, self._stop = floor, stop
        self._lock = threading.Lock()
        self._leases: list[Lease] = []
        self._last = time.monotonic()
        self._slowest: float | None = None  # the slowest interval between records so far
        self._expected: float | None = None  # measured quiet seconds to the watched runs' first record
        threading.Thread(target=self._watch, name="watchdog", daemon=True).start()

    def bound(self) -> tuple[float, str]:
        """Seconds without a record after which the watched runs count as stalled, and how they were set."""
        if self._slowest is None and self._expected is not None:
            measured = f"10x the {self._expected:.3g} s timing.csv measured to its first record"
            return self._floor + FACTOR * self._expected, f"the floor of {self._floor:g} s and {measured}"
        if self._slowest is None:
            return FACTOR * self._floor, f"10x the floor of {self._floor:g} s, before this worker's first record"
        if FACTOR * self._slowest < self._floor:
            return self._floor, f"the floor; this worker's slowest interval between records is {self._slowest:.1f} s"
        return FACTOR * self._slowest, f"10x this worker's slowest interval between records, {self._slowest:.1f} s"

    @contextlib.contextmanager
    def watching(self, leases: list[Lease], expected: float | None = None) -> Iterator[None]:
        """Watch these runs (one, or a pack) while the block trains them; `expected`: their measured quiet seconds
        to the first record, where known.
        """
        with self._lock:
            self._leases, self._last, self._expected = list(leases), time.monotonic(), expected
        try:
            yield
        finally:
            with self._lock:
                self._leases = []

    def emit(self, emit: events.Emit) -> events.Emit:
        """`emit`, and every record it passes on counts as progress."""

        def emit_and_feed(event: events.Event) -> None:
            if isinstance(event, events.EpochDone):
                self._progressed()
            emit(event)

        return emit_and_feed

    def _progressed(self) -> None:
        with self._lock:
            now = time.monotonic()
            self._slowest = max(self._slowest or 0.0, now - self._last)
            self._last = now

    def _watch(self) -> None:
        while True:
            time.sleep(min(5.0, self._floor / 4))
            with self._lock:
                idle, (bound, basis), leases = time.monotonic() - self._last, self.bound(), list(self._leases)
            if leases and idle > bound:
                why = f"no record for {idle:.0f} s (bound {bound:.0f} s: {basis}); the watchdog stopped its worker"
                self._stall(leases, why)
                return

    def _stall(self, leases: list[Lease], why: str) -> None:
        """Say why on each run's attempt (given a few seconds: the store itself may be what hangs), then stop."""
        writer = threading.Thread(target=_say_why, args=(leases, why), daemon=True)
        writer.start()
        writer.join(timeout=WRITE_SECONDS)
        self._stop()


def _say_why(leases: list[Lease], why: str) -> None:
    for lease in leases:
        with contextlib.suppress(Exception):  # any store error: the worker is stopped all the same
            lease.trial.set_user_attr(vocab.STALLED, why)
