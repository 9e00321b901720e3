"""Whether `sweep report` can keep the report it wrote last time: same inputs, same code, same outputs.

Rebuilding a report re-runs every claim's checks at every reading, seconds of pandas work, and
`report` after a `run` that added nothing asks for exactly the report already on disk. The stamp
(`<out>/.report-stamp.json`) records a key (the results folders' input files, the command's
arguments, this package's source, the report's provenance rows) and a hash of every file the
report wrote. When both still match, the command prints the recorded summary (the verdicts in words)
and writes nothing.
Anything else (a changed epochs.csv, an edited module, a deleted figure, a hand-edited report.md)
rebuilds. Only the command line uses it: `sweep.report.build` always builds.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sweep import vocab
from sweep.base import atomic
from sweep.report import provenance

STAMP = ".report-stamp.json"
# Every file of a results folder the report reads (sweep.analysis, sweep.train.timing, sweep.analysis.decisions).
INPUTS = (vocab.RUNS_CSV, vocab.EPOCHS_CSV, vocab.TIMING_CSV, vocab.DECISIONS_CSV, vocab.LOOKS_CSV)
OUTPUTS = ("report.md", "report.html", "tables", "figures")  # what `sweep.report.build` writes into out


def key(folders: Sequence[Path], out: Path, svg: bool) -> dict[str, Any]:
    """What the report is made from: inputs by content, arguments, code, and its provenance rows."""
    inputs = [[str(f), {n: _digest(f / n) for n in INPUTS}] for f in folders]
    return {"inputs": inputs, "out": str(out), "svg": svg, "code": _code(), "provenance": provenance.rows()}


def unchanged(out: Path, current: dict[str, Any]) -> list[str] | None:
    """The recorded summary if the stamp's key is `current` and every file it lists is as written; else None."""
    try:
        stamp = json.loads((out / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or stamp.get("key") != json.loads(json.dumps(current)):
        return None
    if stamp.get("outputs") != _outputs(out):
        return None
    summary = stamp.get("summary")
    return [str(line) for line in summary] if isinstance(summary, list) else None


def forget(out: Path) -> None:
    """Drop the stamp before a rebuild: a build that stops halfway must never look finished."""
    (out / STAMP).unlink(missing_ok=True)


def write(out: Path, current: dict[str, Any], summary: Sequence[str]) -> None:
    stamp = {"key": current, "outputs": _outputs(out), "summary": list(summary)}
    atomic.write_text(out / STAMP, json.dumps(stamp, indent=1, sort_keys=True) + "\n")


def _outputs(out: Path) -> dict[str, str | None]:
    """Every file the report wrote, by content (relative path -> sha256)."""
    files: list[Path] = []
    for name in OUTPUTS:
        path = out / name
        files += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return {p.relative_to(out).as_posix(): _digest(p) for p in files}


def _code() -> str:
    """The whole package's source: a changed statistic (analysis), check (claims) or figure (report) changes the
    report, wherever it lives.
    """
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except (FileNotFoundError, IsADirectoryError):
        return None
