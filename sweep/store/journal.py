"""A sweep's journal file: recognised before anything is written to it, repaired under Optuna's lock (a last
line cut off by a crash dropped), and read without writing.

The file format is Optuna's, unchanged: one JSON object per line, each with an ``op_code``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from optuna.storages.journal import BaseJournalBackend, JournalFileSymlinkLock

from sweep.store import internals

LONGEST_LINE = 256 << 20  # a record holds a run's spec with its builder files; longer is no journal
FIRST_LINES = 20  # recognising a journal: one of its first lines is a record
Say = Callable[[str], None]


class NotAJournal(Exception):
    """A file given as a journal that is not one, or cannot be read. One line, naming what it looks like."""


class ReadOnlyStore(Exception):
    """A command that only reads the store tried to write it: a bug, never a user's error."""


def recognise(path: Path) -> None:
    """Refuse (NotAJournal) an existing file that is not an Optuna journal, before anything writes to it.
    A missing or empty file is a journal not yet written.
    """
    try:
        with open(path, "rb") as handle:
            lines = [handle.readline(LONGEST_LINE) for _ in range(FIRST_LINES)]
    except FileNotFoundError:
        return
    except OSError as err:
        raise NotAJournal(f"{path}: cannot be read as a journal: {err.strerror}") from None
    lines = [line for line in lines if line.strip()]
    if not lines or any(_record(line) is not None for line in lines):
        return
    raise NotAJournal(f"{path}: {_looks_like(lines[0], path)}; an Optuna journal holds one JSON record per line")


_DSN = re.compile(rb"^\s*(host|hostaddr|dbname|user|port|password|service)\s*=", re.IGNORECASE)


def _looks_like(first: bytes, path: Path) -> str:
    """What a file that is not a journal seems to hold, with what to give instead; never its text (a password)."""
    if first.startswith(b"SQLite format 3\x00"):
        return f"this file is an SQLite database, not a journal: did you mean --storage sqlite:///{path}?"
    if b"://" in first.split(b"\n")[0]:
        return f"this file holds a database URL, not a journal: did you mean --storage @{path}?"
    if _DSN.match(first):
        return "this file holds a libpq connection string, not a journal: write it as a postgresql:// URL in an @FILE"
    try:
        text = first.decode("utf-8")
    except UnicodeDecodeError:
        return "this file holds binary data, not a journal"
    return "this file holds JSON that is no journal record" if _is_json(text) else "this file holds text, not a journal"


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _record(line: bytes) -> dict[str, Any] | None:
    """The journal record a whole line holds (ended by its newline), else None."""
    if not line.endswith(b"\n"):
        return None
    try:
        record = json.loads(line)
    except ValueError:  # JSONDecodeError, and UnicodeDecodeError for bytes that are no text
        return None
    return record if isinstance(record, dict) and "op_code" in record else None


class RepairingJournal(BaseJournalBackend):
    """Optuna's journal file, but a last line cut off by a crash (no trailing newline) is dropped
    before anything is appended after it.

    Optuna skips such a line when reading, but an append would be glued onto it and make the
    whole journal unreadable. The repair runs under Optuna's own journal lock, the one every
    plain-Optuna writer of the file takes, so a line another process is writing right now is never
    mistaken for a cut one.
    """

    def __init__(self, path: str, say: Say | None = None) -> None:  # say: what a repair removed (none yet)
        recognise(Path(path))
        self.path = path
        self._lock = JournalFileSymlinkLock(path)
        # Appends reach the file only through `append_logs` below, which holds the real lock.
        self._file = internals.file_backend_locked_by_caller(path)
        self.repair()

    def read_logs(self, log_number_from: int) -> Iterable[dict[str, Any]]:
        return self._file.read_logs(log_number_from)

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        with self._locked():
            _drop_cut_line(self.path)
            self._file.append_logs(logs)

    def repair(self) -> int:
        """Drop a cut last line now; return the bytes dropped."""
        with self._locked():
            return _drop_cut_line(self.path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self._lock.acquire()
        try:
            yield
        finally:
            self._lock.release()


class ReadOnlyJournal(BaseJournalBackend):
    """The journal as a command that only reads it sees it (`status`, `export`): nothing is written, not
    even a repair or a lock; a line that is not a record is skipped, a line still being written is read later.
    """

    def __init__(self, path: str) -> None:
        recognise(Path(path))
        self.path = path
        self._offset = 0  # the bytes read so far, up to the end of a whole line
        self._count = 0  # the records among them

    def read_logs(self, log_number_from: int) -> Iterable[dict[str, Any]]:
        if log_number_from < self._count:  # asked again from earlier: read from the start
            self._offset = self._count = 0
        with open(self.path, "rb") as handle:
            handle.seek(self._offset)
            for line in handle:
                if not line.endswith(b"\n"):
                    return
                self._offset += len(line)
                record = _record(line)
                if record is not None:
                    self._count += 1
                    if self._count > log_number_from:
                        yield record

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        raise ReadOnlyStore(f"{self.path}: a command that only reads the store tried to write it")


def _drop_cut_line(path: str) -> int:
    with open(path, "rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return 0
        keep = _end_of_last_line(handle, size)
        handle.truncate(keep)
        return size - keep


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
