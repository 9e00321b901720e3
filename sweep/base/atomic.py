"""Files written whole or not at all, and never through a link at their destination.

Every file the harness writes into a results folder (tables, reports, decisions, timings) goes
through `replacing`: the content goes to a temporary file of a unique name beside the destination,
which then replaces it with `os.replace`. A reader sees the old file or the new one, never half
of one; two processes writing the same file never share a temporary name; and a destination that
is a symbolic link is replaced by the file, so `ln -s ~/victim results/x/report.md` cannot make a
report overwrite the link's target. The folders the harness fills inside a results folder (figures/,
tables/, logs/, checkpoints/, a TensorBoard run folder) are taken through `own_folder`, which refuses one
that is a symbolic link: `ln -s ~ results/x/figures` must not send writes, or an export's deletions, outside.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from sweep.exits import UsageError


def own_folder(folder: Path) -> Path:
    """`folder`, created if missing, for the harness's own files; refused (one line, exit 2) if it is a link."""
    refuse_link(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def refuse_link(folder: Path) -> None:
    """Raise (one line, exit 2) where `folder` is a symbolic link: checked before a write begins."""
    if folder.is_symlink():
        raise UsageError(
            f"{folder} is a symbolic link; remove it: the harness writes its files only inside the results folder"
        )


@contextlib.contextmanager
def replacing(path: Path, suffix: str = ".tmp") -> Iterator[Path]:
    """A unique temporary path beside `path` to write to (`.<name>.<random><suffix>`: a writer that wants a
    file type, as Keras's `.keras`, gives it); it replaces `path` when the block ends without an error,
    and is removed when it raises.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(handle)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would keep a report from the user's group
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _umask() -> int:
    """This process's umask, read without setting it (os.umask sets it, which a thread beside could see)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def write_text(path: Path, text: str) -> None:
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    with replacing(path) as tmp:
        frame.to_csv(tmp, index=False)


def write_csvs(frames: list[tuple[pd.DataFrame, Path]]) -> None:
    """Several files written in full first, then replaced one right after another: readers of a pair
    (runs.csv and epochs.csv) see mismatched files for only the instant between two renames.
    """
    with contextlib.ExitStack() as stack:
        for frame, path in frames:
            frame.to_csv(stack.enter_context(replacing(path)), index=False)
