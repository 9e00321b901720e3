"""The report's first screen: a compact verdict table and what the results mean for someone choosing a
batch size, in a few short bullets.

The full verdict table, the long answer and every check stay in the report's later sections; this
module only shortens them. Every number comes from a finding or a condition map; nothing is typed in.
A claim these results do not test gets no row: one line names the grid files that test them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from sweep.analysis.estimates import fmt_estimate
from sweep.analysis.selection import seed_count
from sweep.claims.findings import (
    ADVICE,
    DID_NOT_TRAIN_VERDICT,
    PICTURE,
    READ_QUIET,
    READ_RAW,
    READ_RECAL,
    READ_SYMPTOM,
    READ_TIME,
    SCALING,
    Claim,
    Finding,
)
from sweep.claims.maps import ConditionMap
from sweep.claims.registry import causes, the
from sweep.report import headline
from sweep.report.answer import VERDICT_WORDS
from sweep.report.document import Heading, slugs

HEAD = ("claim", "verdict", "effect [95% CI] (n)", "read from")
READINGS = {
    READ_SYMPTOM: "raw, as the post read it",
    READ_RECAL: "BatchNorm recalibrated",
    READ_RAW: "raw (no recalibration recorded)",
    READ_QUIET: "quiet timing",
    READ_TIME: "in-run timing",
}


def rows(findings: Sequence[tuple[Claim, Finding | None]], verdicts: Mapping[str, str]) -> list[tuple[str, ...]]:
    """One row per claim these results test: the claim in words, its verdict in short, each check's effect
    and interval, and what it was read from. `verdicts`: claim id -> the report's verdict words.
    """
    return [
        (f"[{claim.id}](#{section_anchor(claim)}): {claim.brief}", short_verdict(verdicts[claim.id]))
        + (effects(finding), read_from(finding))
        for claim, finding in findings
        if finding is not None
    ]


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


def short_verdict(words: str) -> str:
    """The verdict's first clause: "undecided at 3 seeds, after Holm correction", "supported (sequential,
    decided by 3 seeds)"; the seeds that would decide it and the any-of rule's wording are in the full table.
    """
    first = re.sub(r" \(any-of rule:[^)]*\)", " (one check is enough)", words.split(";")[0])
    if first.startswith("inconclusive:"):
        return "inconclusive: too few seeds with numbers"
    if first.startswith(DID_NOT_TRAIN_VERDICT):
        return DID_NOT_TRAIN_VERDICT
    return first


def effects(finding: Finding) -> str:
    """Each check's estimate with a short label: "gap at batch 64, epoch 2: 0.190 [0.176, 0.203] (n=8)"."""
    if not finding.checks:
        return f"none: {finding.untrained} runs did not train"
    return "; ".join(f"{short_label(c.label)}: {fmt_estimate(c.estimate)}" for c in finding.checks)


def short_label(label: str) -> str:
    """A check's label without its parenthesised details and the epoch it is read at when that is the last."""
    cut = label.split(" (")[0]
    cut = re.sub(r", each chosen on the other seeds.*$", "", cut)
    return re.sub(r", last epoch$", "", cut)


def read_from(finding: Finding) -> str:
    """ "adam, lr 0.001; BatchNorm recalibrated" (the settings in full are in the full table)."""
    reading = next((words for start, words in READINGS.items() if finding.reading.startswith(start)), "")
    lr = "lr tuned per batch size" if finding.lr.startswith("tuned") else f"lr {finding.lr}" if finding.lr else ""
    head = ", ".join(part for part in (finding.optimizer, lr) if part)
    return "; ".join(part for part in (head, reading) if part)


# --- what it means, in a few bullets


def bullets(findings: Sequence[tuple[Claim, Finding | None]], maps: Sequence[ConditionMap] = ()) -> list[str]:
    """At most four short points: the post's picture and its cause, the batch-size advice, the other suspected
    causes, and what would decide the claims still open.
    """
    found = {c.id: f for c, f in findings if f is not None}
    mapped = {m.claim.id: m for m in maps}
    out = [
        _picture(found.get(the(PICTURE).id), mapped.get(the(PICTURE).id)),
        _advice(found.get(the(ADVICE).id), found.get(the(SCALING).id)),
        _causes(found),
        _open(findings),
    ]
    return [b for b in out if b]


def _picture(finding: Finding | None, found: ConditionMap | None) -> str:
    if finding is None or len(finding.checks) < 2:
        return ""
    large, small = finding.checks[0].estimate, finding.checks[1].estimate
    text = (
        f"The post's picture, read as the post read it (running train_acc - val_acc at epoch 2): "
        f"{fmt_estimate(large)} at batch 64 and {fmt_estimate(small)} at batch 8 ({finding.optimizer}, "
        f"lr {finding.lr}): {VERDICT_WORDS[finding.outcome]}."
    )
    settings = headline.settings(found) if found is not None else []
    shows = [s for s in settings if s.shows]
    if not shows:
        return text
    closed = [s for s in shows if s.recal_gap.high < headline.FAR_GAP.value]
    return (
        f"{text} Over the {len(settings)} trained settings of {found.source if found else ''} it shows at "
        f"{len(shows)}; with BatchNorm's statistics recomputed for the same weights it closes at {len(closed)} of "
        f"them: {'BatchNorm lag, not overfitting' if len(closed) == len(shows) else 'partly BatchNorm lag'}."
    )


def _advice(c8: Finding | None, c7: Finding | None) -> str:
    if c8 is None or not c8.checks:
        return ""
    check = c8.checks[0]
    text = (
        f"Keep batch_size <= 32 (C8): {VERDICT_WORDS[c8.outcome]}; {short_label(check.label)} = "
        f"{fmt_estimate(check.estimate)} ({read_from(c8)})."
    )
    if c7 is not None and c7.checks:
        val = c7.checks[-1]
        text += (
            f" Largest against smallest batch at the end (C7): {short_label(val.label)} = "
            f"{fmt_estimate(val.estimate)}, {VERDICT_WORDS[c7.outcome]}."
        )
    return text


def _causes(found: Mapping[str, Finding]) -> str:
    parts = [
        f"{c.cause} {found[c.id].verdict if found[c.id].unanswered() else VERDICT_WORDS[found[c.id].outcome]}"
        for c in causes()
        if c.id in found
    ]
    return f"The other suspected causes of high train / low val accuracy: {'; '.join(parts)}." if parts else ""


def _open(findings: Sequence[tuple[Claim, Finding | None]]) -> str:
    """Which tested claims are undecided, and what would decide them."""
    undecided = [c.id for c, f in findings if f is not None and f.checks and f.outcome is None]
    seeds = max((c.estimate.n for _, f in findings if f is not None for c in f.checks), default=0)
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


def terminal(findings: Sequence[tuple[Claim, Finding | None]], verdicts: Mapping[str, str]) -> list[str]:
    """What `run` and `report` print at their end: per tested claim, its words and verdict, then its effects
    and what they were read from; the untested claims in one line; what would decide the open ones.
    """
    lines = []
    for claim, finding in findings:
        if finding is not None:
            words = short_verdict(verdicts[claim.id])
            lines += [f"{claim.id} ({claim.brief}): {words}", f"    {effects(finding)}; {read_from(finding)}"]
    if not lines:
        lines.append("These results test none of the post's claims.")
    return lines + [line for line in (untested(findings), _open(findings)) if line]
