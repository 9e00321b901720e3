"""The report's "Seeds until decided" section: the plan and every check's sequential status, from the
``decisions.csv`` and ``looks.csv`` that `sweep run --until-decided` leaves in a results folder.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sweep.analysis import decisions
from sweep.analysis.estimates import ALPHA, all_of, any_of
from sweep.claims.findings import ANY, Finding, rule_words
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


def verdict(finding: Finding, checks: pd.DataFrame) -> str:
    """A claim's verdict from its checks' sequential p-values after the report's Holm correction (one family
    with every other check of the report), and an undecided one at the cap with the seeds per setting 80%
    power would still need (from the finding's own check).
    """
    combine = any_of if finding.rule == ANY else all_of
    sides = [c.outcome() for c in finding.checks]
    seen = dict(zip(checks["check"].astype(str), checks["n"], strict=True))
    counts = [int(seen[c.label]) for c in finding.checks]
    outcome = combine(sides)
    seeds, rule = max(counts), rule_words(finding)
    if outcome is not None:
        by = _decided_by(combine, sides, counts)
        return f"{'supported' if outcome else 'contradicted'}{rule} (sequential, decided by {by} seeds)"
    capped = not checks["more_seeds"].astype(str).eq("True").any()
    needed = finding.seeds_needed()
    more = f"; {needed.words()} seeds per setting for 80% power" if needed else ""
    if capped:
        return f"undecided at the {int(checks['cap'].max())}-seed cap{rule}{more}"
    return f"undecided after {seeds} seeds{rule}, with looks still to come (rerun the same command){more}"


def _decided_by(combine, sides: Sequence[bool | None], seeds: Sequence[int]) -> int:
    """The fewest seeds at which the checks decided so far already fix the claim's outcome: one check
    holding at 5 seeds supports an any-of claim, whatever another check does at the 12-seed cap.
    """
    for count in sorted(set(seeds)):
        if combine(side if n <= count else None for side, n in zip(sides, seeds, strict=True)) is not None:
            return count
    return max(seeds)


def section(doc: Doc, found: Sequence[Found]) -> None:
    """Nothing when no folder was run with --until-decided."""
    if not found:
        return
    doc.h(2, "Seeds until decided")
    doc.p(
        "These results were trained with `sweep run --until-decided`: after the grid, seeds (new values) were added "
        "only to the grid points of claims with an undecided check, at seed counts planned before any data, until "
        "each check was decided or the cap was reached. Each look tests a check at its share of "
        f"{ALPHA:g}; a check's sequential p-value is the smallest p / share over its looks, Holm's correction runs "
        "over them, and a check is decided when its Holm-adjusted sequential p-value is below "
        f"{ALPHA:g} (docs/report.md, 'Seeds until decided'). After this optional stopping the sequential p-value "
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
            ("claim", "check", "status", "look", "n", "sequential p", "Holm-adjusted"),
            [
                (str(r.claim), str(r.check), str(r.words), str(r.look), str(r.n), _p(r.p_seq), _p(r.p_holm))
                for r in checks.itertuples()
            ],
        )


def _text(value: object) -> str:
    return "" if isinstance(value, float) and math.isnan(value) else str(value)


def _p(value: float) -> str:
    return f"{value:.2g}" if math.isfinite(value) else "-"
