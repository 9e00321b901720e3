"""A check is known by its key, never by its words: every check relabelled, every verdict stays as it was,
after a fixed-n report and after `run --until-decided` (decisions.csv joined back by check_id).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from sweep import analysis
from sweep.analysis import decisions, health, sequential
from sweep.analysis.estimates import Check
from sweep.claims import basis, registry
from sweep.claims import verdict as verdicts
from sweep.claims.findings import Claim, Finding
from sweep.report.sections import answer

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    folders = [FIXTURES / name for name in ("fx_causes", "fx_bs", "fx_gpus")]
    return health.claims_summary(analysis.load(folders))


def renamed(finding: Finding) -> Finding:
    """The finding with new words for every check and evidence row; keys and numbers untouched."""
    checks = tuple(
        dataclasses.replace(c, label=f"renamed check {i}", short=f"renamed {i}") for i, c in enumerate(finding.checks)
    )
    evidence = tuple(e._replace(label=f"renamed evidence {i}") for i, e in enumerate(finding.evidence))
    return dataclasses.replace(finding, checks=checks, evidence=evidence)


def relabelled(claim: Claim) -> Claim:
    def check(c: Claim, rows: pd.DataFrame) -> Finding | None:
        finding = claim.check(c, rows)
        return None if finding is None else renamed(finding)

    return dataclasses.replace(claim, check=check)


def outcomes(found: list[tuple[Claim, Finding | None]]) -> list[tuple]:
    return [
        (c.id, f.outcome, [(k.ident, k.outcome(), k.level_holds, k.level_fails) for k in f.checks])
        if f
        else (c.id, None)
        for c, f in found
    ]


def test_relabelled_checks_give_the_same_verdicts(table: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    before = registry.evaluate(table)
    assert sum(f is not None and len(f.checks) > 0 for _, f in before) >= 5  # C2-C4, C6-C9 are tested here
    monkeypatch.setattr(registry, "CLAIMS", tuple(relabelled(c) for c in registry.CLAIMS))
    after = registry.evaluate(table)
    assert [k.label for _, f in after if f for k in f.checks][0] == "renamed check 0"
    assert outcomes(after) == outcomes(before)
    assert [verdicts.fixed(c, f).long for c, f in after] == [verdicts.fixed(c, f).long for c, f in before]
    assert answer.sentences(after) == answer.sentences(before)


def test_decisions_are_joined_back_by_key_not_by_label(table: pd.DataFrame, tmp_path: Path) -> None:
    """A claim continued with `run --until-decided` keeps its sequential verdict when its checks are relabelled
    after decisions.csv was written: the file is read back by check_id.
    """
    claim = registry.by_id("C7")
    finding = basis.read(claim, table)
    assert finding is not None and len(finding.checks) == 2
    plan = sequential.Plan.between(3, 12)
    statuses = sequential.decide(plan, [finding.checks])
    decisions.write(tmp_path, plan, [claim.id] * 2, statuses, [])
    written, _ = decisions.read(tmp_path) or (pd.DataFrame(), None)
    assert list(written[decisions.CHECK_ID]) == [str(c.key) for c in finding.checks]
    as_written = basis.with_sequential(finding, written)
    as_relabelled = basis.with_sequential(renamed(finding), written)
    assert as_written is not None and as_relabelled is not None
    assert [c.p_sequential for c in as_relabelled.checks] == [c.p_sequential for c in as_written.checks]
    assert all(c.p_sequential is not None for c in as_relabelled.checks)
    said, relabelled_said = verdicts.of(claim, as_written, written), verdicts.of(claim, as_relabelled, written)
    assert relabelled_said.basis is verdicts.Basis.SEQUENTIAL and relabelled_said == said


def test_looks_match_a_check_by_its_key() -> None:
    """Looks of `run --until-decided` follow a check by key: new words at a later look are the same check,
    and the same words on another key are not.
    """
    first = Check("gap at batch 64", _estimate(), low=0.2, key=_key("64"))
    later = dataclasses.replace(first, label="the gap, batch 64")
    plan = sequential.Plan.between(3, 12)
    assert len(sequential.decide(plan, [[first], [later]])) == 1
    other = dataclasses.replace(first, key=_key("32"))
    with pytest.raises(ValueError):
        sequential.decide(plan, [[first], [other]])


def _estimate() -> analysis.estimates.Estimate:
    return analysis.estimates.estimate([0.3, 0.35, 0.4])


def _key(batch: str) -> analysis.estimates.Key:
    return analysis.estimates.Key("gap", (("batch_size", batch), ("epoch", "2")))
