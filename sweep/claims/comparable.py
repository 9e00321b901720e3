"""The batch-size claims at comparable points: each check at equal epochs, steps, fit and time, raw and
with BatchNorm recalibrated, side by side (sweep/analysis/readings.py says how each point is found).

The claim's own verdict is read at equal epochs (`sweep.claims.basis`). The other readings run the same
check function on the run summary read elsewhere, so any difference between them comes from where the
runs are read, not from a different test. Raw minus recalibrated is BatchNorm's lag. The batch-size
advice (C7, C8) is also read on the re-runs of each batch size's own tuned lr (`lr` = TUNED), where a
search exists: at a fixed lr a batch size is judged at another's best lr.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from sweep import vocab
from sweep.analysis import readings
from sweep.analysis.estimates import fmt_estimate
from sweep.analysis.outcome import Outcome
from sweep.analysis.selection import choose_context
from sweep.claims.basis import relabelled
from sweep.claims.findings import Claim, Finding, ReadFrom, outcome_text
from sweep.claims.registry import STEPS_DIFFER, by_id

RAW, RECALIBRATED = "raw", "BatchNorm recalibrated"
FIXED, TUNED = "fixed", "tuned per batch size"  # the lr the runs read were trained at
UNSTEADY = "not steady: a check decides otherwise with every other record inside epochs left out"


@dataclass(frozen=True)
class Read:
    """One claim's check at one reading, raw or recalibrated."""

    claim: Claim
    reading: readings.Reading
    batchnorm: str  # RAW | RECALIBRATED
    finding: Finding | None
    points: str  # where the runs were read, in words
    lr: str = FIXED  # FIXED | TUNED
    # At a crossing (equal fit, time) with records inside epochs: whether every check decides the same with
    # every other record left out, either way (readings.every_other); None where not asked.
    steady: bool | None = None


def comparable(
    summary: pd.DataFrame, epochs: pd.DataFrame, claim_ids: tuple[str, ...] = STEPS_DIFFER, lr: str = FIXED
) -> list[Read]:
    """Every claim of `claim_ids` at every reading, raw and (where measured) recalibrated; `lr` names the
    lr the runs were trained at (TUNED: `summary` is `basis.tuned_lr`'s, `epochs` the tuned re-runs').
    """
    found: list[Read] = []
    halves = readings.every_other(epochs)
    for claim in map(by_id, claim_ids):
        if claim.evaluate(summary) is None:  # these runs cannot test it at all: nothing to re-read
            continue
        for reading in readings.READINGS:
            table = readings.reread(summary, epochs, claim.needs.axes, reading, claim.needs.values)
            others = []
            if halves is not None and reading in readings.CROSSINGS:
                others = [readings.reread(summary, h, claim.needs.axes, reading, claim.needs.values) for h in halves]
            for batchnorm in _variants(table):
                rows = _rows(table, batchnorm)
                finding = _finding(claim, rows, batchnorm)
                steady = _steady(claim, others, batchnorm, finding)
                where = _points(_used(claim, rows), finding, reading)
                found.append(Read(claim, reading, batchnorm, finding, where, lr, steady))
    return found


def _variants(table: pd.DataFrame) -> list[str]:
    return [RAW, RECALIBRATED] if readings.has_recalibrated(table) else [RAW]


def _rows(table: pd.DataFrame, batchnorm: str) -> pd.DataFrame:
    return readings.recalibrated(table) if batchnorm == RECALIBRATED else table


def _finding(claim: Claim, rows: pd.DataFrame, batchnorm: str) -> Finding | None:
    """The claim's checks on these rows; None where no run has a record at the point."""
    finding = claim.evaluate(rows) if not rows.empty else None
    if finding is not None and batchnorm == RECALIBRATED:
        finding = relabelled(finding)
    if finding is not None and all(c.estimate.n == 0 for c in finding.checks):
        return None
    return finding


def _steady(claim: Claim, halves: list[pd.DataFrame], batchnorm: str, finding: Finding | None) -> bool | None:
    """Whether every check decides as in `finding` on each of `halves` (the summary read from every other
    record); None where not asked (no halves) or not readable.
    """
    if not halves or finding is None:
        return None
    return all(_decisions(_finding(claim, _rows(h, batchnorm), batchnorm)) == _decisions(finding) for h in halves)


def _decisions(finding: Finding | None) -> list[Outcome] | None:
    """Each check's decision (holds, fails, undecided), without its estimate or its seeds-needed note."""
    return None if finding is None else [c.outcome() for c in finding.checks]


def _used(claim: Claim, rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of the groups the claim's check chooses (choose_context per compared setting)."""
    values = claim.needs.values
    chosen = [choose_context(rows, axis, values if i == 0 else ()) for i, axis in enumerate(claim.needs.axes)]
    used = [sel.rows[vocab.RUN_ID] for sel in chosen if sel is not None]
    return rows[rows[vocab.RUN_ID].isin(pd.concat(used))] if used else rows.iloc[0:0]


def _points(rows: pd.DataFrame, finding: Finding | None, reading: readings.Reading) -> str:
    """Where the runs of the chosen group were read: "step 300 (epoch 0.25-2)"."""
    if finding is None or reading == readings.EPOCHS:
        return "epoch 2 and the last epoch" if reading == readings.EPOCHS else "not readable"
    parts = []
    for when, label in (("epoch2", "epoch 2"), ("last", "last")):
        point = rows.get(f"point_{when}")
        epoch = rows.get(f"epoch_{when}")
        if point is None or point.dropna().empty:
            continue
        at = _point_words(reading, point.dropna())
        span = f"epochs {epoch.min():.2f}-{epoch.max():.2f}" if epoch is not None and epoch.notna().any() else ""
        parts.append(f"for {label}: {at} ({span})")
    return "; ".join(parts) or "not readable"


def _point_words(reading: readings.Reading, points: pd.Series) -> str:
    low, high = points.min(), points.max()
    fmt = {readings.STEPS: "step {:.0f}", readings.FIT: "fit loss {:.3f}", readings.TIME: "{:.1f} s of training"}
    text = fmt[reading].format(low)
    return text if low == high else f"{text} to {fmt[reading].format(high)} (per group)"


# tables/readings.csv's columns, written as its header also when nothing was read
TABLE_COLUMNS = (
    *("claim", "lr", "reading", "batchnorm", "read_at", "verdict", "steady"),
    *("check", "mean", "ci_low", "ci_high", "n", "outcome"),
)


def table(found: list[Read]) -> pd.DataFrame:
    """tables/readings.csv: one row per (claim, lr, reading, batchnorm, check)."""
    rows: list[dict[str, Any]] = []
    for read in found:
        head = {
            "claim": read.claim.id,
            "lr": read.lr,
            "reading": read.reading.name,
            "batchnorm": read.batchnorm,
            "read_at": read.points,
            "verdict": read.finding.verdict if read.finding else "not readable",
            "steady": {None: "", True: "yes", False: "no"}[read.steady],
        }
        for check in read.finding.checks if read.finding else ():
            e = check.estimate
            rows.append(
                {**head, "check": check.label, "mean": e.mean, "ci_low": e.low, "ci_high": e.high, "n": e.n}
                | {"outcome": outcome_text(check)}
            )
        if read.finding is None:
            rows.append(head)
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def lag_sentence(found: list[Read], claim_id: str, reading: readings.Reading) -> str | None:
    """Per check of one claim at one reading: raw mean, recalibrated mean, and their difference (the lag).
    `found`: the reads at one lr.
    """
    pair = {r.batchnorm: r.finding for r in found if r.claim.id == claim_id and r.reading == reading}
    raw, recal = pair.get(RAW), pair.get(RECALIBRATED)
    if raw is None or recal is None:
        return None
    parts = [
        f"{a.label}: {a.estimate.mean:+.3f} raw, {b.estimate.mean:+.3f} as {b.label.split(',')[0]}, BatchNorm lag "
        f"{a.estimate.mean - b.estimate.mean:+.3f}"
        for a, b in zip(raw.checks, recal.checks, strict=True)  # one check function: the same checks in order
    ]
    return "; ".join(parts) + "." if parts else None


def cell(read: Read) -> str:
    """One reading's checks in a table cell: "mean [CI] (n) holds; ..." and the verdict."""
    if read.finding is None:
        return "not readable: no records at that point (train.eval_every_steps adds records inside epochs)"
    checks = "; ".join(f"{fmt_estimate(c.estimate)} {outcome_text(c)}" for c in read.finding.checks)
    unsteady = f" ({UNSTEADY})" if read.steady is False else ""
    return f"{read.finding.verdict}: {checks}{unsteady}"


def rows_for(found: list[Read], claim_id: str) -> list[tuple[str, str, str, str]]:
    """The report's table rows for one claim: reading, batchnorm, where read, checks and verdict."""
    return [(r.reading.name, r.batchnorm, r.points, cell(r)) for r in found if r.claim.id == claim_id]


def disagreement(found: list[Read], claim_id: str) -> str:
    """Which readings agree with the post's (equal epochs, raw), in one sentence."""
    reads = [r for r in found if r.claim.id == claim_id and r.finding is not None]
    post = next((r for r in reads if r.reading == readings.EPOCHS and r.batchnorm == RAW), None)
    if post is None or post.finding is None:
        return "The post's reading (equal epochs) is not available in these runs."
    others = [r for r in reads if r is not post]
    differ = [r for r in others if r.finding is not None and r.finding.verdict != post.finding.verdict]
    if not differ:
        return f"Every available reading gives the post's reading's verdict ({post.finding.verdict})."
    names = ", ".join(f"{r.reading.name} ({r.batchnorm}): {r.finding.verdict}" for r in differ if r.finding)
    return f"The readings disagree: at equal epochs (raw) the claim is {post.finding.verdict}; {names}."


def budget_flips(found: list[Read], claim_id: str, finding: Finding) -> list[str]:
    """The other budgets at which the claim is decided otherwise than in `finding`, read on the same runs (its
    lr, tuned or fixed) with the same BatchNorm reading: "contradicted at equal steps". An undecided reading
    changes nothing. Empty where none does.
    """
    lr = TUNED if finding.tuned else FIXED
    batchnorm = RECALIBRATED if finding.read_from is ReadFrom.RECAL else RAW
    return [
        f"{r.finding.verdict} at {r.reading.name}"
        for r in found
        if r.claim.id == claim_id and r.lr == lr and r.batchnorm == batchnorm and r.reading != readings.EPOCHS
        if r.finding is not None and r.finding.outcome.decided and r.finding.outcome != finding.outcome
    ]
