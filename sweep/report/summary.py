"""What the report's answer says, read once from the findings and maps: the post's picture, its advice,
its other suspected causes and what is still open. `answer` renders it in full, `first_screen` in short.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sweep import vocab
from sweep.analysis.estimates import Estimate
from sweep.claims.checks import at_batch
from sweep.claims.findings import Claim, Finding, Part
from sweep.claims.maps import ConditionMap
from sweep.claims.registry import causes, the


@dataclass(frozen=True)
class Picture:
    """C1 at its two batch sizes: the post's gap at each, and the eval_gap at the large one where read."""

    finding: Finding
    small: int
    large: int
    gap_large: Estimate
    gap_small: Estimate
    eval_gap: Estimate | None  # the same end-of-epoch model in inference mode, at the large batch
    mapped: ConditionMap | None


@dataclass(frozen=True)
class Cause:
    claim: Claim
    finding: Finding
    mapped: ConditionMap | None

    @property
    def word(self) -> str:
        """Its verdict in a word ("cannot answer: ..." where its control did not learn), and where the cause kept
        the model at chance, that it prevents learning.
        """
        if self.finding.cannot_answer():
            return self.finding.verdict
        prevents = " (it prevents learning: its runs stay at chance)" if self.finding.prevents_learning() else ""
        return self.finding.outcome.words.claim + prevents


@dataclass(frozen=True)
class Summary:
    picture: Picture | None
    picture_map: ConditionMap | None  # C1's condition map, with or without a finding of its own
    advice: Finding | None  # C8, where it has checks
    scaling: Finding | None  # C7, where it has checks
    causes: tuple[Cause, ...]
    undecided: tuple[str, ...]  # the tested claims still undecided that more seeds could decide
    seeds: int  # the most seeds (or pairs) any check read


def summarise(findings: Sequence[tuple[Claim, Finding | None]], maps: Sequence[ConditionMap] = ()) -> Summary:
    found = {c.id: f for c, f in findings if f is not None}
    with_checks = {claim_id: f for claim_id, f in found.items() if f.checks}
    mapped = {m.claim.id: m for m in maps}
    picture = the(Part.PICTURE)
    return Summary(
        _picture(picture, with_checks.get(picture.id), mapped.get(picture.id)),
        mapped.get(picture.id),
        with_checks.get(the(Part.ADVICE).id),
        with_checks.get(the(Part.SCALING).id),
        tuple(Cause(c, found[c.id], mapped.get(c.id)) for c in causes() if c.id in found),
        tuple(c.id for c, f in findings if f is not None and f.checks and not f.outcome.decided and f.undecided()),
        max((c.estimate.n for _, f in findings if f is not None for c in f.checks), default=0),
    )


def _picture(claim: Claim, finding: Finding | None, mapped: ConditionMap | None) -> Picture | None:
    small, large = claim.needs.values
    by_key = {c.key: c for c in (finding.size if finding is not None else ())}
    keys = at_batch(vocab.GAP, large), at_batch(vocab.GAP, small)
    if finding is None or not all(k in by_key for k in keys):
        return None
    evidence = {e.key: e.estimate for e in finding.evidence if e.key is not None}
    gap_large, gap_small = (by_key[k] for k in keys)
    eval_gap = evidence.get(at_batch(vocab.EVAL_GAP, large))
    return Picture(finding, small, large, gap_large.estimate, gap_small.estimate, eval_gap, mapped)
