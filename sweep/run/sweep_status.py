"""`sweep status`: how far a sweep got (done, running, failed, diverged, pending) and, for each running
run, where it runs and how far it is; the store is only read.
"""

from __future__ import annotations

from pathlib import Path

from sweep import vocab
from sweep.config import GridFile
from sweep.config.plan import RunSpec, plan, search_groups
from sweep.run import folders
from sweep.run.orchestrate import Console, Options, counts_text
from sweep.run.stores import locations, open_store
from sweep.store import Store, epochs_of, status_of, storage
from sweep.store.crash import WORKER_HOST, WORKER_PID
from sweep.store.queue import spec_of
from sweep.store.secrets import redact
from sweep.vocab import RunStatus


def status(grid: GridFile, options: Options | None = None, console: Console | None = None) -> dict[RunStatus, int]:
    """Say how many runs of the grid are done, running, failed, diverged, pending; return the counts."""
    options, console = options or Options(), console or Console()
    runs, groups = plan(grid), search_groups(grid)
    slots = len(groups) * grid.search.trials if grid.search else 0
    results, target = locations(grid, options)
    store = None
    if not storage.is_database(target) and not Path(target).exists():  # a journal not yet written
        console.say(redact(f"{grid.name}: nothing has run yet ({target} does not exist)", target))
        counts = dict.fromkeys(vocab.STATUSES, 0) | {RunStatus.PENDING: len(runs) + slots}
    else:
        store = open_store(target, grid.name, create=False, read_only=True)
        runs = runs + [spec for specs in store.tuned_runs(groups, grid.seeds).values() for spec in specs]
        slots = len(store.search_slots())  # widened searches have more than the grid's trials
        counts = store.counts([s.run_id for s in runs] + list(store.search_slots()))
    searched = f" + {slots} learning-rate search trials" if slots else ""
    console.say(f"{grid.name}: {len(runs)} runs{searched}: {counts_text(counts)}")
    if store is not None and counts[RunStatus.RUNNING]:
        _say_running(store, {s.run_id: s for s in runs} | store.search_slots(), console)
    return counts


def folder_status(
    folder: Path, options: Options | None = None, console: Console | None = None, study: str | None = None
) -> dict[RunStatus, int]:
    """`sweep status DIR`: the sweep a results folder's store holds (its journal.log, or --storage), counted
    from the store alone: every run the sweep queued is there.
    """
    options, console = options or Options(), console or Console()
    target = folders.store_of(folder, options.storage)
    store = open_store(target, folders.sweep_of(folder, target, study), create=False, read_only=True)
    current = store.current()
    counts = store.counts(list(current))
    console.say(f"{store.name}: {len(current)} runs in its store: {counts_text(counts)}")
    if counts[RunStatus.RUNNING]:
        _say_running(store, {run_id: spec_of(trial) for run_id, trial in current.items()}, console)
    return counts


def _say_running(store: Store, planned: dict[str, RunSpec], console: Console) -> None:
    """One line per running run: where it runs and how far it got."""
    for run_id, trial in sorted(store.current().items()):
        if run_id not in planned or status_of(trial) is not RunStatus.RUNNING:
            continue
        attrs = trial.user_attrs
        console.say(
            f"  running {run_id}: epoch {len(epochs_of(trial))}/{planned[run_id].point.train.epochs} "
            f"done, worker pid {attrs.get(WORKER_PID, '?')} on {attrs.get(WORKER_HOST, '?')}, "
            f"attempt {attrs.get(vocab.ATTEMPT, 1)}, since {trial.datetime_start:%Y-%m-%d %H:%M:%S}"
        )
