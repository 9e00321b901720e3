"""A sweep's journal file: recognised before anything is written to it, repaired under Optuna's lock (every
line that is not a journal record removed, a copy of it kept beside the journal), and read without writing.

The file format is Optuna's, unchanged: one JSON object per line, each with an ``op_code``. Optuna skips a
bad line only while it is the last one, so a line that does not parse (a crash mid-write, an edit, a disk
error) would make the whole journal unreadable as soon as anything is appended after it.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optuna.storages.journal import BaseJournalBackend, JournalFileSymlinkLock

from sweep.store import internals

LONGEST_LINE = 256 << 20  # a record holds a run's spec with its builder files; longer is no journal
FIRST_LINES = 20  # recognising a journal: one of its first lines is a record
REMOVED_MARK = ".removed-"  # <journal>.removed-<UTC time>: the lines a repair took out, as they were
Say = Callable[[str], None]


class NotAJournal(Exception):
    """A file given as a journal that is not one, or cannot be read. One line, naming what it looks like."""


class ReadOnlyStore(Exception):
    """A command that only reads the store tried to write it: a bug, never a user's error."""


def recognise(path: Path) -> None:
    """Refuse (NotAJournal) an existing file that is not an Optuna journal, before anything writes to it.
    A missing or empty file is a journal not yet written, unless an empty file's name says it was made to hold
    something else (`_meant_for`).
    """
    try:
        with open(path, "rb") as handle:
            lines = [handle.readline(LONGEST_LINE) for _ in range(FIRST_LINES)]
    except FileNotFoundError:
        return
    except OSError as err:
        raise NotAJournal(f"{path}: cannot be read as a journal: {err.strerror}") from None
    lines = [line for line in lines if line.strip()]
    if not lines and _meant_for(path):
        raise NotAJournal(
            f"{path}: this empty file's name says it is meant to hold {_meant_for(path)}, not a journal: write the "
            f"database URL in it and give --storage @{path}, or give the journal a name of its own (journal.log)"
        )
    if not lines or any(_record(line) is not None for line in lines):
        return
    raise NotAJournal(f"{path}: {_looks_like(lines[0], path)}; an Optuna journal holds one JSON record per line")


# Words in an empty file's name that say what it was made for: the README's `@~/.sweep-db`, a .pgpass, an .env
_NAMED_FOR = (
    (re.compile(r"\.(db|sqlite3?)$"), "a database"),
    (re.compile(r"(^|[._-])(db|database|dsn|url|uri)([._-]|$)"), "a database URL"),
    (re.compile(r"(^|[._-])(pgpass|env|secrets?|passwords?|credentials?)([._-]|$)"), "secrets"),
)


def _meant_for(path: Path) -> str:
    """What an empty file's name says it holds ("" for a name a journal could have)."""
    name = path.name.lower()
    return next((what for pattern, what in _NAMED_FOR if pattern.search(name)), "")


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


@dataclass(frozen=True)
class Removed:
    """What a repair took out of a journal, and where it kept a copy."""

    lines: int
    size: int
    copy: Path
    glued: int = 0  # whole records found glued to the end of a removed line, kept in the journal

    def line(self, journal: str) -> str:
        kept = f"; {self.glued} whole record(s) glued to their ends are kept" if self.glued else ""
        return (
            f"note: {journal}: removed {self.lines} line(s) that are no journal record ({self.size} bytes: a crash "
            f"mid-write, or an edit){kept}; the records around them are kept, and the removed lines are in {self.copy}"
        )


class RepairingJournal(BaseJournalBackend):
    """Optuna's journal file, repaired: every line that is not a record is removed when it is opened, and
    a cut or bad last line before anything is appended after it; `say` hears one line per repair.

    The repair runs under Optuna's own journal lock, the one every plain-Optuna writer of the file takes,
    so a line another process is writing right now is never mistaken for a cut one.
    """

    def __init__(self, path: str, say: Say | None = None) -> None:
        recognise(Path(path))
        self.path = path
        self._say = say
        self._lock = JournalFileSymlinkLock(path)
        # Appends reach the file only through `append_logs` below, which holds the real lock.
        self._file = internals.file_backend_locked_by_caller(path)
        self.repair()

    def read_logs(self, log_number_from: int) -> Iterable[dict[str, Any]]:
        return self._file.read_logs(log_number_from)

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        with self._locked():
            self._tell(_drop_bad_tail(self.path))
            self._file.append_logs(logs)

    def repair(self) -> int:
        """Remove every line that is not a record now; return the bytes removed."""
        with self._locked():
            removed = _remove_bad_lines(self.path)
        self._tell(removed)
        return removed.size if removed else 0

    def _tell(self, removed: Removed | None) -> None:
        if removed and self._say:
            self._say(removed.line(self.path))

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


RECORD_START = b'{"op_code"'  # how Optuna writes every record's first key


def _remove_bad_lines(path: str) -> Removed | None:
    """Every line that is not a record removed (a copy kept first), the rest replaced whole. A record glued to
    the end of a bad line (written whole after a write cut mid-line) is kept in its place.
    """
    with open(path, "rb") as handle:
        lines = handle.readlines()
    good = [_record(line) is not None for line in lines]
    if all(good):
        return None
    bad = [line for line, ok in zip(lines, good, strict=True) if not ok]
    kept = [line if ok else _glued(line) for line, ok in zip(lines, good, strict=True)]
    removed = _keep_copy(path, bad, glued=sum(1 for line, ok in zip(kept, good, strict=True) if line and not ok))
    _replace(path, b"".join(kept))
    return removed


def _glued(line: bytes) -> bytes:
    """The whole record that ends a bad line, if one does (b"" if none)."""
    start = line.find(RECORD_START, 1)
    while start > 0:
        if _record(line[start:]) is not None:
            return line[start:]
        start = line.find(RECORD_START, start + 1)
    return b""


def _drop_bad_tail(path: str) -> Removed | None:
    """The last line removed (a copy kept) where it is cut off or no record, a whole record glued to its end put
    back; the file is not read whole.
    """
    with open(path, "rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return None
        handle.seek(size - 1)
        whole = handle.read(1) == b"\n"
        start = _start_of_last_line(handle, size - 1 if whole else size)
        handle.seek(start)
        tail = handle.read()
        if _record(tail) is not None:
            return None
        glued = _glued(tail)
        removed = _keep_copy(path, [tail], glued=1 if glued else 0)
        handle.truncate(start)
        handle.seek(start)
        handle.write(glued)
        return removed


def _start_of_last_line(handle: Any, end: int, chunk: int = 1 << 16) -> int:
    """Offset just after the last newline before `end` (0 if there is none)."""
    position = end
    while position > 0:
        start = max(0, position - chunk)
        handle.seek(start)
        found = handle.read(position - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        position = start
    return 0


def _keep_copy(path: str, lines: list[bytes], glued: int = 0) -> Removed:
    """The removed lines appended to <journal>.removed-<UTC time>, on disk before the journal changes."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    copy = Path(f"{path}{REMOVED_MARK}{stamp}")
    with open(copy, "ab") as handle:
        handle.writelines(line if line.endswith(b"\n") else line + b"\n" for line in lines)
        handle.flush()
        os.fsync(handle.fileno())
    return Removed(len(lines), sum(len(line) for line in lines), copy, glued)


def _replace(path: str, data: bytes) -> None:
    """The journal replaced whole (a crash leaves the old one or the new one), its mode kept."""
    real = os.path.realpath(path)  # a journal reached through a link stays where the link points
    temporary = f"{real}.repair-{os.getpid()}.tmp"
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, os.stat(real).st_mode & 0o7777)
        os.replace(temporary, real)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
