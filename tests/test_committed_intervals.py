"""Every interval in the committed reports is finite and of positive width: a model that did not train
enters none (it would give an interval of width 0, every seed at chance, and t = +-inf), and no check
is decided by a zero spread. Read from every committed results/*/tables/{claims,maps,readings}.csv."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.unit

RESULTS = Path(__file__).resolve().parent.parent / "results"
TABLES = sorted(p for name in ("claims.csv", "maps.csv", "readings.csv") for p in RESULTS.glob(f"*/tables/{name}"))


def test_the_committed_reports_have_their_tables() -> None:
    folders = {p.parent.parent.name for p in TABLES}
    assert {"reference", "map_c1", "map_c3", "batch_sizes", "causes", "lr_search"} <= folders


@pytest.mark.parametrize("path", TABLES, ids=lambda p: str(p.relative_to(RESULTS)))
def test_no_interval_is_infinite_or_of_zero_width(path: Path) -> None:
    if not path.read_text(encoding="utf-8").strip():  # a report with no maps writes an empty maps.csv
        return
    table = pd.read_csv(path)
    if "n" not in table:
        return
    rows = table[table["n"] >= 2]
    bad = [
        f"{r.get('claim')} {r.get('check')}: [{r['ci_low']}, {r['ci_high']}] (n={r['n']})"
        for _, r in rows.iterrows()
        if not (math.isfinite(r["ci_low"]) and math.isfinite(r["ci_high"]) and r["ci_high"] > r["ci_low"])
    ]
    assert not bad, bad
