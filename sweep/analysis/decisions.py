"""The files `sweep run --until-decided` leaves in the results folder, written atomically, and read back by the report.

- ``decisions.csv``: one row per check of the sweep's claims, its sequential status
  (`sweep.analysis.sequential.Status`): claim, check (its label), check_id (its key: what the report joins on),
  side (holds / fails / empty), decided, look (1-based), seeds (the look's seed count), n, p_seq, level (its
  claim's, for the side it points to; p_holm in files written before error control per claim), more_seeds, cap,
  words. A file written before check ids has no check_id; its checks are known by their labels (`check_of`).
- ``looks.csv``: one row per look reached: look (1-based), seeds, share (of alpha), the seed values the
  look added, how many grid points got them, the runs added, and the checks still open after it.

Pure pandas: no store, no TensorFlow, so `sweep report` reads them anywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sweep import vocab
from sweep.analysis.estimates import Check
from sweep.analysis.sequential import Plan, Status
from sweep.base import atomic

DECISIONS_CSV, LOOKS_CSV = vocab.DECISIONS_CSV, vocab.LOOKS_CSV
CHECK_ID = "check_id"


@dataclass(frozen=True)
class LookRow:
    """What one look was: its seed count, its share of alpha, the seeds it added and where."""

    index: int  # 0-based into Plan.looks
    seeds: int
    share: float
    added_seeds: tuple[int, ...]  # the seed values this look added (none at the first look)
    points: int  # grid points that got them
    runs: int  # runs added (points x added seeds)
    open_after: int  # checks still undecided after deciding at this look


def write(
    folder: Path, plan: Plan, claims: Sequence[str], statuses: Sequence[Status], looks: Sequence[LookRow]
) -> tuple[Path, Path]:
    """decisions.csv and looks.csv into `folder`, each replaced atomically; return their paths."""
    decisions = pd.DataFrame(
        [
            {
                "claim": claim,
                "check": s.label,
                CHECK_ID: str(s.key) if s.key is not None else s.label,
                "side": s.side.words.side,
                "decided": s.decided,
                "look": s.look + 1,
                "seeds": plan.looks[s.look],
                "n": s.n,
                "p_seq": s.p_seq,
                "level": s.level,
                "more_seeds": s.more_seeds,
                "cap": s.cap,
                "words": s.words(),
            }
            for claim, s in zip(claims, statuses, strict=True)
        ],
        columns=[
            "claim",
            "check",
            CHECK_ID,
            "side",
            "decided",
            "look",
            "seeds",
            "n",
            "p_seq",
            "level",
            "more_seeds",
            "cap",
        ]
        + ["words"],
    )
    looked = pd.DataFrame(
        [
            {
                "look": row.index + 1,
                "seeds": row.seeds,
                "share": row.share,
                "added_seeds": " ".join(str(s) for s in row.added_seeds),
                "points": row.points,
                "runs": row.runs,
                "open_after": row.open_after,
            }
            for row in looks
        ],
        columns=["look", "seeds", "share", "added_seeds", "points", "runs", "open_after"],
    )
    atomic.own_folder(folder)
    paths = folder / DECISIONS_CSV, folder / LOOKS_CSV
    atomic.write_csvs([(decisions, paths[0]), (looked, paths[1])])
    return paths


def read(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(decisions, looks) of a results folder, or None when it has no decisions.csv (not an --until-decided run)."""
    path = folder / DECISIONS_CSV
    if not path.is_file():
        return None
    decisions = pd.read_csv(path, keep_default_na=False, na_values=[""])
    looks_path = folder / LOOKS_CSV
    looks = pd.read_csv(looks_path, keep_default_na=False, na_values=[""]) if looks_path.is_file() else pd.DataFrame()
    return decisions, looks


def check_of(decisions: pd.DataFrame) -> tuple[str, Callable[[Check], str]]:
    """The column that names a row's check, and how a check is found there: its key's text in check_id; in a
    file written before check ids, its label in check (the one place a label is matched, for old files).
    """
    if CHECK_ID in decisions:
        return CHECK_ID, lambda c: str(c.key) if c.key is not None else c.label
    return "check", lambda c: c.label
