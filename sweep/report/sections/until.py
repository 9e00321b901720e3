"""The report's "Seeds until decided" section: the plan and every check's sequential status, from the
``decisions.csv`` and ``looks.csv`` that `sweep run --until-decided` leaves in a results folder.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from sweep.analysis import decisions
from sweep.analysis.estimates import ALPHA
from sweep.report.document import Doc

Found = tuple[Path, pd.DataFrame, pd.DataFrame]  # folder, decisions, looks


def read(folders: Sequence[Path]) -> list[Found]:
    """The decisions of each results folder that has them (a sweep run with --until-decided)."""
    found = []
    for folder in folders:
        got = decisions.read(Path(folder))
        if got is not None:
            found.append((Path(folder), *got))
    return found


def by_claim(found: Sequence[Found]) -> dict[str, pd.DataFrame]:
    """Each claim's rows of decisions.csv (the first folder that has the claim, as the report reads runs)."""
    rows: dict[str, pd.DataFrame] = {}
    for _, checks, _ in found:
        for claim, group in checks.groupby("claim", sort=False):
            rows.setdefault(str(claim), group)
    return rows


def folders_by_claim(found: Sequence[Found]) -> dict[str, str]:
    """The results folder each claim was continued in (the first that has it, as `by_claim` reads them)."""
    folders: dict[str, str] = {}
    for folder, checks, _ in found:
        for claim in checks["claim"].astype(str).unique():
            folders.setdefault(claim, str(folder))
    return folders


def section(doc: Doc, found: Sequence[Found]) -> None:
    """Nothing when no folder was run with --until-decided."""
    if not found:
        return
    doc.h(2, "Seeds until decided")
    doc.p(
        "These results were trained with `sweep run --until-decided`: after the grid, seeds (new values) were added "
        "only to the grid points of claims with an undecided check, at seed counts planned before any data, until "
        "each check was decided or the cap was reached. Each look tests a check at its share of "
        f"{ALPHA:g} (a look that added a check no seeds spends nothing: it repeats the same test); a check's "
        "sequential p-value is the smallest p / share over its looks, and a check is decided when it is below its "
        "claim's level for the side it points to (error control per claim: docs/report.md, 'Seeds until "
        "decided'). After this optional stopping the sequential p-value "
        "is the one to read: the plain p-values and verdicts above treat the seeds each group ended with as if "
        "their number had been fixed in advance."
    )
    for folder, checks, looks in found:
        if len(found) > 1:
            doc.p(f"`{folder}`:")
        if len(looks):
            doc.table(
                ("look", "seeds", f"share of {ALPHA:g}", "seeds added", "grid points", "runs", "checks open after"),
                [
                    (
                        str(r.look),
                        str(r.seeds),
                        f"{r.share:.3f}",
                        _text(r.added_seeds) or "-",
                        str(r.points),
                        str(r.runs),
                        str(r.open_after),
                    )
                    for r in looks.itertuples()
                ],
            )
        doc.table(
            ("claim", "check", "status", "look", "n", "sequential p", "level"),
            [
                (str(r.claim), str(r.check), str(r.words), str(r.look), str(r.n), _p(r.p_seq), _p(_level(r)))
                for r in checks.itertuples()
            ],
        )


def _level(row: Any) -> float:
    """The level a check was decided at; a file written before error control per claim has none (Holm's)."""
    return float(getattr(row, "level", math.nan))


def _text(value: object) -> str:
    return "" if isinstance(value, float) and math.isnan(value) else str(value)


def _p(value: float) -> str:
    return f"{value:.2g}" if math.isfinite(value) else "-"
