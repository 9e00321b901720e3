"""One function run in a forked child process while the caller goes on; its result comes back through a pipe.

Drawing the figures (matplotlib, single-threaded) and re-checking the claims (pandas) take
seconds each and share nothing: the report draws in a child while it checks. A fork copies
the loaded tables, so nothing is sent to the child and nothing is imported twice. Where
there is no fork (Windows), or other threads may hold locks a fork would copy held (Python
threads; TensorFlow's, when `run` writes the report in the process that trained), the
function runs in the caller instead, with the same result.
"""

from __future__ import annotations

import os
import pickle
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class Pending(Generic[T]):
    """A result being computed in a child (pid set) or already computed here."""

    def __init__(self, pid: int | None, read_fd: int | None, value: tuple[bool, object] | None) -> None:
        self._pid, self._read_fd, self._value = pid, read_fd, value

    def result(self) -> T:
        """The function's return value; its exception, raised here, if it raised one."""
        if self._value is None:
            self._value = self._collect()
        ok, value = self._value
        if not ok:
            raise value if isinstance(value, BaseException) else RuntimeError(str(value))
        return value  # type: ignore[return-value]

    def _collect(self) -> tuple[bool, object]:
        assert self._pid is not None and self._read_fd is not None
        with os.fdopen(self._read_fd, "rb") as pipe:
            payload = pipe.read()
        self._read_fd = None
        _, status = os.waitpid(self._pid, 0)
        if not payload:
            return False, RuntimeError(f"the child process drawing the figures died (wait status {status})")
        loaded: tuple[bool, object] = pickle.loads(payload)
        return loaded


@contextmanager
def background(work: Callable[[], T]) -> Iterator[Pending[T]]:
    """`work()` in a forked child; the block's `pending.result()` waits for it. Leaving the block reaps the child."""
    if not hasattr(os, "fork") or threading.active_count() > 1 or "tensorflow" in sys.modules:
        yield Pending(None, None, _outcome(work))
        return
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, send, and leave without running the parent's exit handlers or code
        try:
            os.close(read_fd)
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(_payload(_outcome(work)))
        finally:
            os._exit(0)
    os.close(write_fd)
    pending: Pending[T] = Pending(pid, read_fd, None)
    try:
        yield pending
    finally:
        if pending._value is None:  # the block raised before asking: wait, so no child is left behind
            pending._value = pending._collect()


def _outcome(work: Callable[[], object]) -> tuple[bool, object]:
    try:
        return True, work()
    except Exception as err:  # raised in the parent by `result`
        return False, err


def _payload(outcome: tuple[bool, object]) -> bytes:
    try:
        return pickle.dumps(outcome)
    except Exception as err:  # an unpicklable result or exception: send its words
        return pickle.dumps((False, f"{type(err).__name__}: {err} (in the child process: {outcome[1]!r})"))
