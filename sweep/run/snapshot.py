"""`sweep export GRID|DIR` without a target: a sweep's runs.csv, epochs.csv and report, written from its
store however far the sweep got, and what is still missing.

For sweeps whose workers run elsewhere (`sweep run --no-train`, a Slurm array, `sweep worker` by hand):
the tables and the report can be had at any time without training or waiting. The store is only read
(nothing is queued, claimed or re-queued) and TensorFlow is never imported. The report reads finished
runs only, as always; unfinished runs are in runs.csv with their status and their records so far.
"""

from __future__ import annotations

from pathlib import Path

from sweep.config import GridFile
from sweep.config.plan import plan, search_groups
from sweep.run import folders
from sweep.run.orchestrate import Console, Options, counts_text, write_report
from sweep.run.stores import locations, open_store
from sweep.store import Store
from sweep.vocab import RunStatus

CONSOLE = Console()


def from_grid(grid: GridFile, options: Options, console: Console = CONSOLE) -> Path:
    """The grid's sweep, from its store (--storage, else <results>/journal.log) into its results folder;
    returns that folder.
    """
    results, target = locations(grid, options)
    store = open_store(folders.existing(target), grid.name, create=False, read_only=True)
    runs = plan(grid) + [s for specs in store.tuned_runs(search_groups(grid), grid.seeds).values() for s in specs]
    # the grid's runs (those not queued yet count as pending) and whatever else the sweep holds: seeds
    # added by --until-decided, runs of an earlier version of the grid file
    planned = [s.run_id for s in runs] + list(store.search_slots())
    return _write(store, list(dict.fromkeys([*planned, *store.current()])), results, options, console)


def from_folder(folder: Path, options: Options, study: str | None, console: Console = CONSOLE) -> Path:
    """A results folder's sweep, from its store (--storage, else the folder's journal.log) into the folder.
    The sweep is --study, else the one named in the folder's runs.csv, else the one its store holds.
    """
    target = folders.store_of(folder, options.storage)
    store = open_store(target, folders.sweep_of(folder, target, study), create=False, read_only=True)
    return _write(store, list(store.current()), folder, options, console)


def _write(store: Store, planned: list[str], results: Path, options: Options, console: Console) -> Path:
    """The CSVs of every run in the store, the report of the finished ones, and a line on what is missing."""
    runs_csv, epochs_csv = store.export_csv(results)
    counts = store.counts(planned)
    finished = sum(n for s, n in counts.items() if s.final)  # runs whose records are complete
    console.say(f"{store.name}: {len(planned)} runs: {counts_text(counts)}")
    console.say(f"results: {runs_csv} and {epochs_csv} (every run, with its status and its records so far)")
    missing = len(planned) - finished
    if missing:
        console.say(missing_line(counts, missing, len(planned)))
    if finished and options.report:
        write_report(results, options.report, console)
    elif not finished:
        console.say("no run has finished yet: no report (run `sweep export` again later)")
    return results


def missing_line(counts: dict[RunStatus, int], missing: int, planned: int) -> str:
    """What the report cannot read yet, by status."""
    parts = [f"{counts[s]} {s}" for s in (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.FAILED) if counts.get(s)]
    return (
        f"missing: {missing} of {planned} runs have no final records ({', '.join(parts)}); the report reads "
        "the finished runs only; run `sweep export` again when the workers are done"
    )
