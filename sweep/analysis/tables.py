"""The analysis tables on disk: curves.csv, gaps.csv and run_summary.csv in a report's tables/ folder."""

from __future__ import annotations

from pathlib import Path

from sweep.analysis.curves import gap_table, summarize
from sweep.analysis.results import Results
from sweep.analysis.summary import run_summary
from sweep.base import atomic


def write_tables(results: Results, out: Path) -> list[Path]:
    """curves.csv (every metric at every epoch), gaps.csv, run_summary.csv into out/tables/: the curves and gaps
    over every done run's records (a run at chance too: it is what its setting did), one row per run.
    """
    folder = out / "tables"
    atomic.own_folder(folder)
    tables = {
        "curves.csv": summarize(results.epochs),
        "gaps.csv": gap_table(results.epochs),
        "run_summary.csv": run_summary(results.epochs),
    }
    paths = []
    for name, table in tables.items():
        atomic.write_csv(table, folder / name)
        paths.append(folder / name)
    return paths
