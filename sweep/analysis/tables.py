"""The analysis tables on disk: curves.csv, gaps.csv and run_summary.csv in a report's tables/ folder."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sweep.analysis.curves import gap_table, summarize
from sweep.analysis.results import Results
from sweep.analysis.summary import run_summary
from sweep.base import atomic


def write_tables(results: Results, out: Path, trained: pd.DataFrame | None = None) -> list[Path]:
    """curves.csv (every metric at every epoch), gaps.csv, run_summary.csv into out/tables/.

    The curves and gaps summarise over seeds the records of `trained` (default: every done run's), the
    runs that trained (`sweep.analysis.health.trained`): an interval over seeds at chance says nothing of a setting;
    run_summary.csv keeps one row per run, every run.
    """
    folder = out / "tables"
    folder.mkdir(parents=True, exist_ok=True)
    trained = results.epochs if trained is None else trained
    tables = {
        "curves.csv": summarize(trained),
        "gaps.csv": gap_table(trained),
        "run_summary.csv": run_summary(results.epochs),
    }
    paths = []
    for name, table in tables.items():
        atomic.write_csv(table, folder / name)
        paths.append(folder / name)
    return paths
