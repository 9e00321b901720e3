"""The report's first screen: a compact verdict table and what the results mean for someone choosing a
batch size, in a few short bullets.

The full verdict table, the long answer and every check stay in the report's later sections; this
module only shortens them. Every number comes from a finding or a condition map; nothing is typed in.
A claim these results do not test gets no row: one line names the grid files that test them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sweep.analysis.estimates import fmt_estimate
from sweep.analysis.outcome import Outcome
from sweep.analysis.selection import seed_count
from sweep.claims import comparable, headline
from sweep.claims.findings import Claim, Finding, ReadFrom
from sweep.claims.maps import ConditionMap
from sweep.claims.verdict import Verdict, statements_of
from sweep.report.document import Heading, Marked, slugs
from sweep.report.summary import Cause, Picture, Summary, summarise

HEAD = ("claim", "verdict", "effect [95% CI] (n)", "read from")
READINGS = {  # what a finding was read from, in a few words
    ReadFrom.SYMPTOM: "raw, as the post read it",
    ReadFrom.RECAL: "BatchNorm recalibrated",
    ReadFrom.RAW: "raw (no recalibration recorded)",
    ReadFrom.QUIET: "quiet timing",
    ReadFrom.TIME: "in-run timing",
}


def rows(findings: Sequence[tuple[Claim, Finding | None]], verdicts: Mapping[str, Verdict]) -> list[tuple[str, ...]]:
    """One row per claim these results test: the claim in words, its verdict in short, each check's effect
    and interval, and what it was read from. `verdicts`: claim id -> the report's verdict.
    """
    return [
        (f"[{claim.id}](#{section_anchor(claim)}): {claim.brief}", _short(verdicts[claim.id]))
        + (effects(finding), read_from(finding))
        for claim, finding in findings
        if finding is not None
    ]


def _short(verdict: Verdict) -> str:
    return Marked(verdict.short, verdict.lead)


def section_heading(claim: Claim) -> str:
    """The heading of the claim's own section (`sections.claim_section`), which the table links to."""
    return f"{claim.id}: {claim.brief}"


def section_anchor(claim: Claim) -> str:
    return slugs([Heading(2, section_heading(claim))])[0]


def untested(findings: Sequence[tuple[Claim, Finding | None]]) -> str:
    """ "Not tested by these results: C2-C5 (experiments/causes.yaml tests them), ..."; "" when all are."""
    by_grid: dict[str, list[str]] = {}
    for claim, finding in findings:
        if finding is None:
            by_grid.setdefault(claim.experiments, []).append(claim.id)
    if not by_grid:
        return ""
    parts = [f"{', '.join(ids)} (`{grid}` tests {'them' if len(ids) > 1 else 'it'})" for grid, ids in by_grid.items()]
    return "Not tested by these results: " + "; ".join(parts) + "."


def effects(finding: Finding) -> str:
    """Each check's estimate with a short label: "gap at batch 64, epoch 2: 0.190 [0.176, 0.203] (n=8)"."""
    return "; ".join(f"{c.brief}: {fmt_estimate(c.estimate)}" for c in finding.checks)


def read_from(finding: Finding) -> str:
    """ "adam, lr 0.001; BatchNorm recalibrated" (the settings in full are in the full table)."""
    reading = READINGS[finding.read_from] if finding.read_from is not None else ""
    lr = "lr tuned per batch size" if finding.tuned else f"lr {finding.lr}" if finding.lr else ""
    head = ", ".join(part for part in (finding.optimizer, lr) if part)
    return "; ".join(part for part in (head, reading) if part)


# --- what it means, in a few bullets


def bullets(
    findings: Sequence[tuple[Claim, Finding | None]],
    maps: Sequence[ConditionMap] = (),
    reads: Sequence[comparable.Read] = (),
) -> list[str]:
    """At most five short points: the post's picture and its cause, the batch-size advice, where a budget other
    than equal epochs changes it, the other suspected causes, and what would decide the claims still open.
    """
    summary = summarise(findings, maps)
    out = [_picture(summary.picture), _advice(summary), _budgets(findings, reads), _causes(summary.causes)]
    return [b for b in [*out, _open(summary)] if b]


def _budgets(findings: Sequence[tuple[Claim, Finding | None]], reads: Sequence[comparable.Read]) -> str:
    """The batch-size verdicts another budget decides otherwise, and at which: the post names none."""
    said = []
    for claim, finding in findings:
        if finding is None or not (claim.steps_differ and claim.tuned_first):
            continue
        flips = comparable.budget_flips(list(reads), claim.id, finding)
        if flips:
            said.append(f"{claim.id} is {finding.verdict} at {claim.budget.value}, {', '.join(flips)}")
    if not said:
        return ""
    return (
        f"The budget changes the batch-size answer: {'. '.join(said)} (the same runs; 'Batch sizes compared at "
        "comparable points')."
    )


def _picture(p: Picture | None) -> str:
    if p is None:
        return ""
    finding = p.finding
    text = (
        f"The post's picture, read as the post read it (running train_acc - val_acc at epoch 2): "
        f"{fmt_estimate(p.gap_large)} at batch {p.large} and {fmt_estimate(p.gap_small)} at batch {p.small} "
        f"({finding.optimizer}, lr {finding.lr}): {finding.verdict}{_lag(finding)}."
    )
    settings = headline.settings(p.mapped) if p.mapped is not None else []
    shows = [s for s in settings if s.shows]
    if not shows:
        return text
    closed = [s for s in shows if s.closes]
    return (
        f"{text} Over the {len(settings)} trained settings of {p.mapped.source if p.mapped else ''} it shows at "
        f"{len(shows)}; with BatchNorm's statistics recomputed for the same weights it closes at {len(closed)} of "
        f"them: {'BatchNorm lag, not overfitting' if len(closed) == len(shows) else 'partly BatchNorm lag'}."
    )


def _lag(finding: Finding) -> str:
    """C1's mechanism in a clause: do the recalibrated gaps of the two batch sizes agree?"""
    if not finding.mechanism:
        return ""
    check = finding.mechanism[0]
    said = {Outcome.HOLDS: "equal", Outcome.FAILS: "not equal"}.get(check.outcome(), "undecided whether equal")
    return (
        f"; without BatchNorm's lag (recalibrated) the two batch sizes' eval_gaps differ by "
        f"{fmt_estimate(check.estimate)}: {said} within +-{check.high:g}"
    )


def _advice(summary: Summary) -> str:
    c8, c7 = summary.advice, summary.scaling
    if c8 is None:
        return ""
    check = c8.checks[0]
    text = (
        f"Keep batch_size <= 32 (C8): {c8.outcome.words.claim}; {check.brief} = "
        f"{fmt_estimate(check.estimate)} ({read_from(c8)})."
    )
    if c7 is not None:
        val = c7.checks[-1]
        text += (
            f" Largest against smallest batch at the end (C7): {val.brief} = "
            f"{fmt_estimate(val.estimate)}, {c7.outcome.words.claim}."
        )
    return text


def _causes(found: Sequence[Cause]) -> str:
    parts = [f"{c.claim.cause} {c.word}" for c in found]
    return f"The other suspected causes of high train / low val accuracy: {'; '.join(parts)}." if parts else ""


def _open(summary: Summary) -> str:
    """Which tested claims are undecided, and what would decide them."""
    undecided, seeds = summary.undecided, summary.seeds
    if not undecided:
        return ""
    if seeds < 2:
        return (
            f"With {seed_count(seeds)} per setting no check can be decided ({', '.join(undecided)}): give the grid "
            "3 or more seeds (seeds: [0, 1, 2]); then `sweep run GRID --until-decided` adds seeds where a check "
            "stays open."
        )
    return (
        f"Undecided: {', '.join(undecided)}; the full verdict table gives the seeds that would decide each, and "
        "`sweep run GRID --until-decided` adds them."
    )


# --- the terminal


def terminal(findings: Sequence[tuple[Claim, Finding | None]], verdicts: Mapping[str, Verdict]) -> list[str]:
    """What `run` and `report` print at their end: per tested claim, its words and verdict, then its effects
    and what they were read from; the untested claims in one line; what would decide the open ones.
    """
    lines = []
    for claim, finding in findings:
        if finding is not None:
            words = verdicts[claim.id].short
            lines += [f"{claim.id} ({claim.brief}): {words}", f"    {effects(finding)}; {read_from(finding)}"]
            if not finding.cannot_answer():  # its size and mechanism, each decided alone; what the arm at chance says
                lines += [f"    {said}" for said in statements_of(finding)]
                lines += [f"    {finding.named_outcome}"] if finding.prevents_learning() else []
    if not lines:
        lines.append("These results test none of the post's claims.")
    return lines + [line for line in (untested(findings), _open(summarise(findings))) if line]
