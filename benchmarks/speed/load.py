"""A 1,000-point sweep: how long planning, enqueueing, status and export take, and (with --train) training it.

    python benchmarks/speed/load.py [--points 1000] [--train --workers 4]

Times whole commands (`python -m sweep plan/status`) as a user sees them, and the
store calls (enqueue, export) inside Python with time.perf_counter. With
--train, `sweep run` trains every point (tiny runs: 4 classes, 8x8 images, 1
epoch) with N workers and the script checks each run completed exactly once.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import subprocess
import tempfile
import time

GRID = """\
name: load
seeds: [0]
base:
  data: {{dataset: glyphs120, classes: 4, samples_per_class: 10, image_size: 9}}
  train: {{epochs: 1, batch_size: 8}}
grid:
  data.seed: {seeds}
"""


def timed(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--train", action="store_true", help="also train every point")
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()

    from sweep.config import load_grid
    from sweep.config.plan import plan
    from sweep.store import Store

    folder = Path(tempfile.mkdtemp(prefix="batchsweep-load-"))
    grid_path = folder / "grid.yaml"
    grid_path.write_text(GRID.format(seeds=list(range(args.points))))
    sweep = [sys.executable, "-m", "sweep"]
    rows = [("plan (whole command)", timed([*sweep, "plan", str(grid_path)], folder))]
    runs = plan(load_grid(grid_path))
    store = Store.open(folder / "results" / "load" / "journal.log", "load")
    started = time.perf_counter()
    added = store.enqueue(runs)
    rows.append((f"enqueue {added} runs (in Python)", time.perf_counter() - started))
    started = time.perf_counter()
    assert store.enqueue(runs) == 0
    rows.append(("enqueue again: nothing added (in Python)", time.perf_counter() - started))
    rows.append(("status (whole command)", timed([*sweep, "status", str(grid_path)], folder)))
    started = time.perf_counter()
    store.export_csv(folder / "results" / "load")
    rows.append(("export runs.csv + epochs.csv (in Python)", time.perf_counter() - started))
    if args.train:
        rows.append(
            (
                f"run: train {args.points} tiny runs, {args.workers} workers (whole command)",
                timed([*sweep, "run", str(grid_path), "--workers", str(args.workers)], folder),
            )
        )
        done = [t.user_attrs["run_id"] for t in store.sweep.get_trials() if t.state.name == "COMPLETE"]
        assert len(done) == len(set(done)) == args.points, (len(done), len(set(done)))
        rows.append((f"every run completed exactly once ({len(done)})", 0.0))
    print("| step | seconds |\n|---|---|")
    for label, seconds in rows:
        print(f"| {label} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
