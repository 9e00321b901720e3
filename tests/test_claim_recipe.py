"""docs/design.md's "Adding a claim", followed with a throw-away claim: one entry in the registry (its check
reused) and the claim is checked, corrected with the others, tabled, sectioned and coloured like C1-C9.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pandas as pd
import pytest

from sweep.claims import registry
from sweep.report import build

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parent / "fixtures"


def test_a_claim_added_to_the_registry_alone_is_reported_like_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c2 = registry.by_id("C2")
    c10 = dataclasses.replace(c2, id="C10", brief="a throw-away claim", part=None)
    monkeypatch.setattr(registry, "CLAIMS", (*registry.CLAIMS, c10))
    folder = tmp_path / "causes"
    shutil.copytree(FIXTURES / "fx_causes", folder)
    written = build([folder])
    table = pd.read_csv(folder / "tables" / "claims.csv")
    mine, its_twin = table[table["claim"] == "C10"], table[table["claim"] == "C2"]
    assert len(mine) == len(its_twin) == 2
    assert mine["mean"].tolist() == its_twin["mean"].tolist() and mine["check"].tolist() == its_twin["check"].tolist()
    assert mine["level"].tolist() == its_twin["level"].tolist()  # a claim's own levels, whatever else is read
    markdown = written.markdown.read_text(encoding="utf-8")
    assert "## C10: a throw-away claim" in markdown and "[C10](#c10-a-throw-away-claim" in markdown
    html = written.html.read_text(encoding="utf-8")
    verdicts = dict(written.verdicts)
    assert verdicts["C10"] == verdicts["C2"] and verdicts["C2"].startswith("supported (equal epochs")
    first_row = html.split(">C10</a>: a throw-away claim</td>")[1].split("</tr>")[0]
    assert first_row.startswith('<td><span class="supported">supported</span>')  # coloured as C1-C9's are
    assert "C10 (a throw-away claim): supported" in written.summary
