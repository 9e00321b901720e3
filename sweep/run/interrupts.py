"""A worker's stop, asked for by SIGTERM (Slurm's requeue, preemption, scancel, `run`'s own stop) or SIGINT.

The signal's handler raises KeyboardInterrupt at once, so a worker stops promptly wherever it is. Where
that exception lands is not in our hands: inside a `__del__` or a weakref callback Python only prints it
("Exception ignored in ..."), and inside TensorFlow's or Keras's own code it can come out as another
error (a ValueError from a half-built iterator). So the stop is also remembered: the next record raises
it again once its record and checkpoint are written (`uninterrupted`), and the driver takes any error
raised after a stop for the stop (`asked`). Either way the run is queued again by its worker, with its
checkpoint, instead of training on until Slurm's SIGKILL and waiting for its heartbeat to go stale.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

_asked: list[int] = []  # the stop signals this process received, in order


def arm() -> dict[int, Any]:
    """In a worker's own process: SIGTERM, and SIGINT where Python's default handles it, stop it.
    Returns the handlers it replaced.
    """
    previous: dict[int, Any] = {signal.SIGTERM: signal.signal(signal.SIGTERM, _stop)}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where its starter ignores it
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, _stop)
    return previous


@contextlib.contextmanager
def armed() -> Iterator[None]:
    """`arm` while the block runs; the handlers before it are back afterwards: a caller that runs a worker
    in its own process (a test, `sweep worker` through `sweep.cli.main`) keeps its own.
    """
    previous = arm()
    try:
        yield
    finally:
        for number, handler in previous.items():
            if handler is not None:  # None: a handler installed from C, which Python cannot put back
                signal.signal(number, handler)


def asked() -> bool:
    """Whether a stop was asked for in this process (whether or not its KeyboardInterrupt got through)."""
    return bool(_asked)


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """SIGTERM and SIGINT wait while a record and its checkpoint are written (milliseconds), then stop
    the run as they would have: the run is re-queued with its checkpoint on disk. A stop asked for
    earlier, whose KeyboardInterrupt was lost where it landed, stops it here too.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # Held here, not remembered in `_asked`: unarmed (a sweep trained in the caller's own process, a
    # notebook's), a Ctrl-C stops this sweep and must not stop the next one the process trains.
    during: list[int] = []
    signals = (signal.SIGTERM, signal.SIGINT)
    previous = {s: signal.signal(s, lambda number, frame: during.append(number)) for s in signals}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if during or _asked:
        raise KeyboardInterrupt


def _stop(signum: int, frame: Any) -> None:
    _asked.append(signum)
    raise KeyboardInterrupt
