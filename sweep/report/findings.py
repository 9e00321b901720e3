"""What a claim is and what the data says about it: thresholds, the runs a claim needs, findings,
and their words for the report and tables/claims.csv.

A claim's verdict comes from checks: numbers with 95% t-intervals over seeds and a region where
the claim needs them to lie (`sweep.estimates.Check`). The claims themselves are in
`sweep.report.claims`, their check functions in `sweep.report.checks`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from sweep.estimates import NOT_TESTED, Check, Estimate, verdict


@dataclass(frozen=True)
class Threshold:
    """A number a check compares with (accuracies as fractions: 0.20 = 20 percentage points)."""

    value: float
    wording: str  # how the report's "Thresholds" sentence names it, with {} for the value

    def words(self) -> str:
        return self.wording.format(self.value)


FAR_GAP = Threshold(0.20, "far above = gap > {:g}")  # C1-C3: "train_acc far above val_acc"
CLOSE_GAP = Threshold(0.10, "close = |gap| < {:g}")  # C1: "the two are close"
CAUSE_RAISES_GAP = Threshold(0.05, "a cause must raise the gap by > {:g}")  # C2, C3, paired
VAL_DROP = Threshold(0.10, "a mismatch must lower val_acc by > {:g}")  # C4, paired
SPEEDUP = Threshold(0.10, "faster = at least {:.0%} less time per epoch")  # C6: largest vs smallest batch
SAME_VAL = Threshold(0.02, "the same = within +-{:g} val_acc")  # C9: final val_acc, paired


@dataclass(frozen=True)
class Needs:
    """The runs a claim needs: a sweep like `experiments` that compares the `axes`."""

    experiments: str  # the experiments file that tests it
    axes: tuple[str, ...]  # the settings it compares
    values: tuple[Any, ...] = ()  # the values it names (C1: batch 8 and 64); empty: whichever the runs have
    reference: Any = None  # the value the others are compared with (C2: balanced)


@dataclass(frozen=True)
class Finding:
    """What the data says about one claim."""

    checks: tuple[Check, ...]
    outcome: bool | None
    selection: str
    evidence: tuple[tuple[str, Estimate], ...] = ()  # informative numbers that do not decide
    notes: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        return verdict(self.outcome)

    def seeds_needed(self) -> int | None:
        """Seeds per setting that would decide every undecided check (None: unknown or > 1000)."""
        needed = [c.seeds_needed() for c in self.checks if c.outcome() is None]
        return None if not needed or None in needed else max(needed)  # type: ignore[type-var]


@dataclass(frozen=True)
class Claim:
    id: str
    quote: str  # the post's words
    test: str  # what is checked, in words, with the thresholds
    needs: Needs
    thresholds: tuple[Threshold, ...]
    check: Callable[[Claim, pd.DataFrame], Finding | None]  # None: these runs cannot test it

    @property
    def experiments(self) -> str:
        return self.needs.experiments

    def evaluate(self, table: pd.DataFrame) -> Finding | None:
        return self.check(self, table)


# --- words for verdicts and checks


def verdict_text(claim: Claim, finding: Finding | None) -> str:
    if finding is None:
        return f"{NOT_TESTED} (see {claim.experiments})"
    if finding.outcome is None:
        undecided = [c for c in finding.checks if c.outcome() is None]
        n = finding.seeds_needed()
        if any(c.estimate.n < 2 for c in undecided):
            return f"{verdict(None)}: fewer than 2 seeds (or pairs) give no interval; run 3 or more seeds"
        more = f"about {n} seeds per setting would settle it" if n else "more than 1000 seeds would be needed"
        return f"{verdict(None)}: CI too wide; {more}"
    return finding.verdict


def outcome_text(check: Check) -> str:
    outcome = check.outcome()
    if outcome is None:
        n = check.seeds_needed()
        return f"undecided (~{n} seeds)" if n else "undecided"
    return "holds" if outcome else "fails"


def claims_table(findings: list[tuple[Claim, Finding | None]]) -> pd.DataFrame:
    """One row per check (or one per untested claim): for tables/claims.csv."""
    rows: list[dict[str, Any]] = []
    for claim, finding in findings:
        head: dict[str, Any] = {
            "claim": claim.id,
            "verdict": finding.verdict if finding else NOT_TESTED,
            "experiments": claim.experiments,
        }
        if finding is None:
            rows.append(head)
        for check in finding.checks if finding else ():
            e = check.estimate
            rows.append(
                {
                    **head,
                    "check": check.label,
                    "mean": e.mean,
                    "ci_low": e.low,
                    "ci_high": e.high,
                    "n": e.n,
                    "sd": e.sd,
                    "holds_when": check.region(),
                    "outcome": outcome_text(check),
                    "seeds_needed": check.seeds_needed(),
                }
            )
    return pd.DataFrame(rows)
