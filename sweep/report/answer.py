"""The report's opening answer to the post: a few plain sentences generated from the verdicts.

Every number comes from a finding, a condition map or the reproduction ranking of this
report; nothing is typed in. A sentence whose claim these results do not test is left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from sweep import vocab
from sweep.analysis.estimates import Estimate, fmt_estimate
from sweep.claims.findings import ADVICE, PICTURE, Claim, Finding
from sweep.claims.maps import ConditionMap
from sweep.claims.registry import causes, the
from sweep.report import headline
from sweep.report.map_section import NEAR, Candidate

VERDICT_WORDS = {True: "supported", False: "contradicted", None: "undecided"}


def sentences(
    findings: Sequence[tuple[Claim, Finding | None]],
    maps: Sequence[ConditionMap] = (),
    candidates: Sequence[Candidate] = (),
) -> list[str]:
    """The answer, one sentence per point the results can speak to."""
    found = {c.id: f for c, f in findings if f is not None and f.checks}  # unanswered: no numbers to quote
    mapped = {m.claim.id: m for m in maps}
    picture = the(PICTURE).id
    advice = the(ADVICE).id
    out = []
    if picture in found:
        out.append(_picture(found[picture], mapped.get(picture)))
    if picture in mapped:
        out.extend(headline.sentences(mapped[picture]))
    if candidates:
        out.append(_closest(candidates[0], len(candidates)))
    if advice in found:
        out.append(_advice(found[advice]))
    causes = _causes({c.id: f for c, f in findings if f is not None}, mapped)
    if causes:
        out.append(causes)
    if not out:
        out.append("These results test none of the post's claims; the verdict table says which grid would.")
    return out


def _picture(finding: Finding, found: ConditionMap | None) -> str:
    large, small = finding.checks[0].estimate, finding.checks[1].estimate
    text = (
        f"The post's picture (batch 64 far above, batch 8 close at epoch 2) is "
        f"{VERDICT_WORDS[finding.outcome]} at {finding.tested_at}: the gap train_acc - val_acc is "
        f"{fmt_estimate(large)} at batch 64 and {fmt_estimate(small)} at batch 8"
    )
    eval_gap = _evidence(finding, f"{vocab.EVAL_GAP} at batch 64")
    if eval_gap is not None:
        text += (
            f", and measured on the same end-of-epoch model in inference mode (eval_gap) it is "
            f"{fmt_estimate(eval_gap)} at batch 64"
        )
    if found is not None:
        text += f". Over {len(found.cells)} settings of {found.source}: {found.summary()}"
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
    metric = check.label.split(",")[0]  # val_acc, or val_acc_recal where the runs recorded it
    return (
        f"Its advice, keep batch_size <= 32, is {VERDICT_WORDS[finding.outcome]} at {finding.tested_at}: the best "
        f"small batch's {metric} minus the best large one's, at the last epoch, is {fmt_estimate(check.estimate)} "
        "(95% interval before Holm's correction)."
    )


def _causes(found: dict[str, Finding], mapped: dict[str, ConditionMap]) -> str:
    parts = []
    for cause in causes():
        if cause.id in found:
            m = mapped.get(cause.id)
            where = f" (over {len(m.cells)} settings of {m.source}: {m.summary()})" if m else ""
            finding = found[cause.id]
            word = finding.verdict if finding.unanswered() else VERDICT_WORDS[finding.outcome]
            parts.append(f"{cause.cause} ({cause.id}) {word}{where}")
    return (
        f"Of the post's other suspected causes of high train / low val accuracy: {'; '.join(parts)}." if parts else ""
    )


def _evidence(finding: Finding, prefix: str) -> Estimate | None:
    return next((e for label, e in finding.evidence if label.startswith(prefix)), None)
