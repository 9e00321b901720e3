"""Every interval in the committed reports is finite, and none is of zero width but where the runs it reads sit
at chance or are stuck: an interval over seeds at chance is often of width 0 (every seed at exactly 1 / classes),
and such rows say so (a named outcome in claims.csv, a cell that prevents learning or cannot answer in maps.csv).
Read from every committed results/*/tables/*.csv.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pandas as pd
import pytest

from sweep import analysis
from sweep.analysis import health

pytestmark = pytest.mark.unit

RESULTS = Path(__file__).resolve().parent.parent / "results"
DECIDING = ("claims.csv", "maps.csv", "readings.csv")  # what verdicts and maps are read from
DESCRIBING = ("curves.csv", "gaps.csv")  # means over seeds per group and epoch
TABLES = sorted(p for name in DECIDING + DESCRIBING for p in RESULTS.glob(f"*/tables/{name}"))
EXACT = {"lr", "step"}  # the same for every seed by construction: an interval of width 0 is the truth


AT_CHANCE_CELLS = ("prevents learning", "control did not learn: cannot answer")  # maps.csv's cells of arms at chance


@functools.cache
def flat_runs_anywhere() -> bool:
    """Whether any committed run is at chance or stuck (predicts one class): its seeds can agree exactly, so a
    descriptive interval of width 0 is possible.
    """
    folders = sorted(p.parent for p in RESULTS.glob("*/runs.csv"))
    found = health.run_health(analysis.load(folders))
    return bool(found[health.IN_CLAIMS].astype(bool).any()) if len(found) else False


def at_chance(rows: pd.DataFrame) -> pd.Series:
    """The rows that read arms at chance: a named outcome (claims.csv) or such a cell (maps.csv)."""
    named = rows["named_outcome"].fillna("").astype(str).ne("") if "named_outcome" in rows else False
    cells = rows["cell"].isin(AT_CHANCE_CELLS) if "cell" in rows else False
    return pd.Series(named | cells, index=rows.index, dtype=bool)


def read(path: Path) -> pd.DataFrame:
    text = path.read_text(encoding="utf-8")
    return pd.read_csv(path) if text.strip() else pd.DataFrame()  # a report with no maps writes an empty file


def test_the_committed_reports_have_their_tables() -> None:
    folders = {p.parent.parent.name for p in TABLES}
    assert {"reference", "map_c1", "map_c3", "batch_sizes", "causes", "lr_search"} <= folders


@pytest.mark.parametrize("path", TABLES, ids=lambda p: str(p.relative_to(RESULTS)))
def test_no_interval_is_infinite_or_of_zero_width_but_from_runs_at_chance(path: Path) -> None:
    table = read(path)
    if "n" not in table or "ci_low" not in table:
        return
    rows = table[table["n"] >= 2]
    infinite = rows[~rows["ci_low"].map(math.isfinite) | ~rows["ci_high"].map(math.isfinite)]
    assert infinite.empty, infinite.head().to_dict("records")
    flat = rows[rows["ci_high"] <= rows["ci_low"]]
    if path.name in DECIDING:
        flat = flat[~at_chance(flat)]
        assert flat.empty, flat.head().to_dict("records")  # a spread of 0 only where the arms sit at chance
    else:
        inexact = flat[~flat["metric"].isin(EXACT)]
        assert inexact.empty or flat_runs_anywhere(), inexact.head().to_dict("records")
