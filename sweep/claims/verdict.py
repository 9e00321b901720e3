"""A claim's verdict as a value: its outcome, what it rests on, and its words in full and in short.

`of` gives the fixed-n verdict (each claim under its own error control, `sweep.claims.family`) or, where
`run --until-decided` decided the claim's checks, the sequential one. A decided verdict names its budget and
adds the claim's size and mechanism statements. The report prints `long` in its verdict tables and `short`
on its first screen and the terminal; nothing parses either back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

import pandas as pd

from sweep.analysis.decisions import check_of
from sweep.analysis.estimates import fmt_estimate
from sweep.analysis.outcome import INCONCLUSIVE, NOT_TESTED, Outcome, all_of, any_of
from sweep.claims.findings import CANNOT_ANSWER, DIRECTION_SHOWN, Claim, Finding, Rule


class Basis(Enum):
    """What a verdict rests on."""

    NOT_TESTED = "not tested"  # these results cannot answer the claim
    NO_CONTROL = "no control"  # its control arm did not learn: nothing to compare
    NO_INTERVAL = "no interval"  # fewer than 2 seeds (or pairs) with numbers
    FIXED = "fixed n"  # t-intervals over seeds at the claim's own levels (`sweep.claims.family`)
    SEQUENTIAL = "sequential"  # the sequential p-values of `run --until-decided`


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    basis: Basis
    long: str  # the verdict tables' words: the rule, the seeds that would decide it
    short: str  # the first screen's and the terminal's: its first clause
    size_not_shown: bool = False  # "direction shown, size ...": the direction holds, the post's size is not shown

    @property
    def lead(self) -> str:
        """The verdict's word its text starts with, which the HTML colours ("" where none is coloured)."""
        if self.size_not_shown:
            return DIRECTION_SHOWN
        return {
            Basis.NOT_TESTED: NOT_TESTED,
            Basis.NO_CONTROL: "",
            Basis.NO_INTERVAL: INCONCLUSIVE,
        }.get(self.basis, self.outcome.words.claim)


def of(claim: Claim, finding: Finding | None, sequential: pd.DataFrame | None = None) -> Verdict:
    """The claim's verdict: the sequential one where `run --until-decided` decided its checks, else fixed-n;
    none where its control arm did not learn.
    """
    if finding is None or sequential is None or finding.cannot_answer():
        return fixed(claim, finding)
    if any(c.p_sequential is not None for c in finding.checks):
        return _with_named(sequential_verdict(claim, finding, sequential), finding)
    return fixed(claim, finding)


def fixed(claim: Claim, finding: Finding | None) -> Verdict:
    """The verdict from the checks' t-tests at the claim's own levels, with its budget and statements, and what
    its arms say before the checks (`Finding.named_outcome`): none where its control did not learn.
    """
    if finding is None:
        words = f"{NOT_TESTED} (see {claim.experiments})"
        return Verdict(Outcome.UNDECIDED, Basis.NOT_TESTED, words, words)
    if finding.cannot_answer():
        return Verdict(Outcome.UNDECIDED, Basis.NO_CONTROL, f"cannot answer: {finding.named_outcome}", CANNOT_ANSWER)
    return _with_named(_from_intervals(claim, finding), finding)


def _from_intervals(claim: Claim, finding: Finding) -> Verdict:
    rule, brief = rule_words(finding), short_rule(finding)
    outcome, at = finding.outcome, f" ({claim.budget_words})"
    if outcome.decided:
        statements = "".join(f"; {s}" for s in statements_of(finding))
        long, short = finding.verdict + rule + at + statements, finding.verdict + brief
        return Verdict(outcome, Basis.FIXED, long, short, size_not_shown=finding.size_not_shown)
    if not finding.undecided():  # every open check reads bounds that cannot show the side its mean points to
        head = "undecided"
        why = "; its values are bounds (a run that missed its target counts its whole training): more seeds cannot "
        why += "decide"
        return Verdict(outcome, Basis.FIXED, f"{head}{rule}{at}{why}", f"{head}{brief}")
    if any(c.estimate.n < 2 for c in finding.undecided()):
        return _no_interval(rule, brief)
    needed = finding.seeds_needed()
    more = f"; {needed.words()} seeds per setting for 80% power (`run --until-decided` adds them)" if needed else ""
    seeds = max(c.estimate.n for c in finding.undecided())
    head = f"undecided at {seeds} seeds"
    return Verdict(outcome, Basis.FIXED, f"{head}{rule}{at}{more}", f"{head}{brief}")


def statements_of(finding: Finding) -> list[str]:
    """The size and mechanism statements in words, each with its interval, where the claim makes them."""
    said = []
    size = finding.size_outcome
    if size is not None:
        word = {Outcome.HOLDS: "reproduced", Outcome.FAILS: "not reproduced"}.get(size, "undecided")
        shown = ", ".join(f"{c.brief} {fmt_estimate(c.estimate)} against {c.region()}" for c in finding.size)
        said.append(f"size {word}: {shown}")
    for check in finding.mechanism:
        word = {Outcome.HOLDS: "holds", Outcome.FAILS: "fails"}.get(check.outcome(), "undecided")
        said.append(
            f"mechanism {word}: {check.brief} {fmt_estimate(check.estimate)}, equal when within +-{check.high:g}"
        )
    return said


def _with_named(verdict: Verdict, finding: Finding) -> Verdict:
    """The verdict with the named outcome after its long words: "...; the cause prevents learning: ..."."""
    if not finding.prevents_learning():
        return verdict
    return dataclasses.replace(verdict, long=f"{verdict.long}; {finding.named_outcome}")


def _no_interval(rule: str, brief: str) -> Verdict:
    reason = "fewer than 2 seeds (or pairs) give no interval"
    long = f"{INCONCLUSIVE}{rule}: {reason}; run 3 or more seeds"
    short = f"{INCONCLUSIVE}{brief}: {reason}" if brief else f"{INCONCLUSIVE}: too few seeds with numbers"
    return Verdict(Outcome.UNDECIDED, Basis.NO_INTERVAL, long, short)


def sequential_verdict(claim: Claim, finding: Finding, checks: pd.DataFrame) -> Verdict:
    """A claim's verdict from its checks' sequential p-values at the claim's own levels, and an undecided one at
    the cap with the seeds per setting 80% power would still need (from the finding's own check).
    """
    combine = any_of if finding.rule is Rule.ANY else all_of
    sides = [c.outcome() for c in finding.checks]
    name, named = check_of(checks)
    seen = dict(zip(checks[name].astype(str), checks["n"], strict=True))
    counts = [int(seen[named(c)]) for c in finding.checks]
    outcome = combine(sides)
    seeds, rule, brief = max(counts), rule_words(finding), short_rule(finding)
    if outcome.decided:
        decided_by = f"sequential, decided by {_decided_by(combine, sides, counts)} seeds"
        statements = "".join(f"; {s}" for s in statements_of(finding))
        word = finding.verdict
        long = f"{word}{rule} ({decided_by}; {claim.budget_words}){statements}"
        short = f"{word}{brief} ({decided_by})"
        return Verdict(outcome, Basis.SEQUENTIAL, long, short, size_not_shown=finding.size_not_shown)
    capped = not checks["more_seeds"].astype(str).eq("True").any()
    needed = finding.seeds_needed()
    more = f"; {needed.words()} seeds per setting for 80% power" if needed else ""
    if capped:
        head = f"undecided at the {int(checks['cap'].max())}-seed cap"
        return Verdict(outcome, Basis.SEQUENTIAL, f"{head}{rule}{more}", f"{head}{brief}")
    head, tail = f"undecided after {seeds} seeds", ", with looks still to come (rerun the same command)"
    return Verdict(outcome, Basis.SEQUENTIAL, f"{head}{rule}{tail}{more}", f"{head}{brief}{tail}")


def _decided_by(combine: Callable[[Iterable[Outcome]], Outcome], sides: Sequence[Outcome], seeds: Sequence[int]) -> int:
    """The fewest seeds at which the checks decided so far already fix the claim's outcome: one check
    holding at 5 seeds supports an any-of claim, whatever another check does at the 12-seed cap.
    """
    for count in sorted(set(seeds)):
        if combine(side if n <= count else Outcome.UNDECIDED for side, n in zip(sides, seeds, strict=True)).decided:
            return count
    return max(seeds)


def rule_words(finding: Finding) -> str:
    if finding.rule is not Rule.ANY:
        return ""
    return f" (any-of rule: supported when 1 of its {len(finding.checks)} checks holds, contradicted when all fail)"


def short_rule(finding: Finding) -> str:
    return " (one check is enough)" if finding.rule is Rule.ANY else ""


def verdict_text(claim: Claim, finding: Finding | None) -> str:
    """The fixed-n verdict in full (`fixed(...).long`)."""
    return fixed(claim, finding).long
