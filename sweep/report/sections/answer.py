"""The report's opening answer to the post: a few plain sentences generated from the verdicts.

Every number comes from a finding, a condition map or the reproduction ranking of this
report (`summary.Summary`); nothing is typed in. A sentence whose claim these results do not
test is left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from sweep.analysis.estimates import fmt_estimate
from sweep.claims.findings import Claim, Finding
from sweep.claims.maps import ConditionMap
from sweep.report.sections import headline
from sweep.report.sections.maps import NEAR, Candidate
from sweep.report.summary import Cause, Picture, summarise


def sentences(
    findings: Sequence[tuple[Claim, Finding | None]],
    maps: Sequence[ConditionMap] = (),
    candidates: Sequence[Candidate] = (),
) -> list[str]:
    """The answer, one sentence per point the results can speak to."""
    summary = summarise(findings, maps)
    out = []
    if summary.picture is not None:
        out.append(_picture(summary.picture))
    if summary.picture_map is not None:
        out.extend(headline.sentences(summary.picture_map))
    if candidates:
        out.append(_closest(candidates[0], len(candidates)))
    if summary.advice is not None:
        out.append(_advice(summary.advice))
    if summary.causes:
        out.append(_causes(summary.causes))
    if not out:
        out.append("These results test none of the post's claims; the verdict table says which grid would.")
    return out


def _picture(p: Picture) -> str:
    text = (
        f"The post's picture (batch {p.large} far above, batch {p.small} close at epoch 2) is "
        f"{p.finding.outcome.words.claim} at {p.finding.tested_at}: the gap train_acc - val_acc is "
        f"{fmt_estimate(p.gap_large)} at batch {p.large} and {fmt_estimate(p.gap_small)} at batch {p.small}"
    )
    if p.eval_gap is not None:
        text += (
            f", and measured on the same end-of-epoch model in inference mode (eval_gap) it is "
            f"{fmt_estimate(p.eval_gap)} at batch {p.large}"
        )
    if p.mapped is not None:
        text += f". Over {len(p.mapped.cells)} settings of {p.mapped.source}: {p.mapped.summary()}"
    return text + "."


def _closest(best: Candidate, tested: int) -> str:
    near = "comes within" if best.distance <= NEAR else "does not come within"
    which = "with the post's pattern closest to its numbers" if best.pattern else "closest to the post's numbers"
    return (
        f"Of {tested} setting{'' if tested == 1 else 's'} with batch 8 and 64, the one {which} ({best.label}) "
        f"{near} {NEAR:g} of all four: its largest distance is {best.distance:.2f}, in {best.farthest()}."
    )


def _advice(finding: Finding) -> str:
    check = finding.checks[0]
    metric = check.ident.metric  # val_acc, or val_acc_recal where the runs recorded it
    return (
        f"Its advice, keep batch_size <= 32, is {finding.outcome.words.claim} at {finding.tested_at}: the best "
        f"small batch's {metric} minus the best large one's, at the last epoch, is {fmt_estimate(check.estimate)} "
        "(95% interval)."
    )


def _causes(found: Sequence[Cause]) -> str:
    parts = []
    for cause in found:
        m = cause.mapped
        where = f" (over {len(m.cells)} settings of {m.source}: {m.summary()})" if m else ""
        parts.append(f"{cause.claim.cause} ({cause.claim.id}) {cause.word}{where}")
    return f"Of the post's other suspected causes of high train / low val accuracy: {'; '.join(parts)}."
