"""Command line: `python -m sweep {plan,run,status,worker,report}`. The only place that wires stages.

Exit codes: 0 success; 1 some runs failed; 2 bad input (one line on stderr,
nothing written); 130 interrupted (the next `run` picks up where it stopped).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Sequence

from sweep import vocab
from sweep.config import SEARCH_DOCS, ConfigError, GridFile, field_docs, load_grid
from sweep.plan import RunSpec, plan, search_groups

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """Bad input that is not in the grid file (flags, store). One line for stderr."""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.handler(args)
    except (ConfigError, UsageError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\ninterrupted; run the same command again to continue where it stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as err:
        from sweep.store import DISK_FULL_ADVICE, is_disk_full

        if not is_disk_full(err):
            raise
        print(f"error: no space left on device writing {err.filename or 'the store'}; {DISK_FULL_ADVICE}",
              file=sys.stderr)
        return EXIT_FAILED


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sweep", description="Batch-size experiment sweeps on TensorFlow/Keras.",
        epilog="Grid file keys (dotted paths usable in grid:):\n"
               + "\n".join(f"  {k:<26} {doc}" for k, doc in field_docs().items())
               + "\n\nOptional search: block (a learning-rate search for every grid point, then its best lr "
                 "at every seed):\n"
               + "\n".join(f"  {k:<26} {doc}" for k, doc in SEARCH_DOCS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = commands.add_parser("plan", help="list the runs a grid file would train (no training, no TensorFlow)")
    p.add_argument("grid", help="the grid file (YAML)")
    p.set_defaults(handler=cmd_plan)

    p = commands.add_parser("run", help="train every pending run of a grid file, then export runs.csv and epochs.csv",
                            description="Train every run of GRID that is not done yet. Safe to repeat: finished runs "
                                        "are never trained again, failed and interrupted ones are retried.")
    p.add_argument("grid", help="the grid file (YAML)")
    _results_args(p)
    _worker_args(p)
    p.set_defaults(handler=cmd_run)

    p = commands.add_parser("status", help="count done / running / failed / diverged / pending runs")
    p.add_argument("grid", help="the grid file (YAML)")
    _results_args(p)
    p.set_defaults(handler=cmd_status)

    p = commands.add_parser("worker", help="join a sweep: train queued runs from a store until none are left",
                            description="Train queued runs of an existing sweep until the queue is empty. "
                                        "Started by `run`, or by hand on another machine.")
    p.add_argument("--storage", default=None,
                   help="journal file path or database URL of the sweep, or @FILE to read it from a file "
                        "(default: $BATCHSWEEP_STORAGE)")
    p.add_argument("--study", required=True, help="the sweep's name (the grid file's name:)")
    _worker_args(p)
    p.set_defaults(handler=cmd_worker)

    p = commands.add_parser("report", help="rebuild tables, figures and the claims report from results folders (no TensorFlow)",
                            description="Read runs.csv and epochs.csv of each DIR and write tables/, figures/, "
                                        "report.md and report.html (self-contained) into OUT.")
    p.add_argument("folders", nargs="+", metavar="DIR", type=Path, help="results folder(s), e.g. results/article")
    p.add_argument("--out", type=Path, default=None, help="where to write (default: DIR; required with several DIRs)")
    p.add_argument("--svg", action="store_true", help="also write every figure as SVG (for papers; PNG always)")
    p.set_defaults(handler=cmd_report)
    return parser


def _worker_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=_positive, default=None,
                   help="worker processes on this machine (default: one per device group with GPUs, else 1)")
    p.add_argument("--devices", default=None, metavar="IDS",
                   help="GPU ids to use, e.g. 0,2 (default: CUDA_VISIBLE_DEVICES, else every GPU, else the CPU); "
                        "a run with gpus: G takes G of them, and two runs never share one")
    p.add_argument("--trials-per-gpu", type=_positive, default=1, metavar="K",
                   help="let K runs share each GPU, for models too small to fill one (default 1)")
    p.add_argument("--retries", type=_non_negative, default=1,
                   help="times a run that raised is tried again before it is left failed (default 1)")


def _slots(args: argparse.Namespace, replicas: int) -> list[str | None]:
    """CUDA_VISIBLE_DEVICES per worker process, from --devices / --trials-per-gpu / --workers."""
    from sweep import devices

    pool = devices.device_pool(args.devices)
    if not pool:
        return [None] * (args.workers or 1)
    slots: list[str | None] = list(devices.worker_slots(pool, replicas, args.trials_per_gpu))
    return slots[: args.workers] if args.workers else slots


def _non_negative(text: str) -> int:
    return 0 if text.strip() == "0" else _positive(text)


def _results_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", type=Path, default=None, help="results folder (default results/<name>)")
    p.add_argument("--storage", default=None,
                   help="store: journal file path or postgresql:// URL, or @FILE to read it from a file "
                        "(default: $BATCHSWEEP_STORAGE, else <results>/journal.log)")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _locations(args: argparse.Namespace, grid: GridFile) -> tuple[Path, str]:
    results = args.results or Path("results") / grid.name
    return results, _storage_arg(args.storage) or str(results / vocab.JOURNAL_FILE)


def _storage_arg(value: str | None) -> str | None:
    """--storage, `@file` holding it, or $BATCHSWEEP_STORAGE: a password need not be on a command line."""
    from sweep.store import STORAGE_ENV

    value = value if value is not None else os.environ.get(STORAGE_ENV)
    if value and value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as err:
            raise UsageError(f"--storage {value}: cannot read {path}: {err.strerror}") from None
    return value or None


# --- plan


def cmd_plan(args: argparse.Namespace) -> int:
    grid = load_grid(args.grid)
    runs = plan(grid)
    width = max(len(r.run_id) for r in runs)
    for spec in runs:
        print(f"{spec.run_id:<{width}}  " + " ".join(f"{k}={v}" for k, v in spec.varying))
    points = len(runs) // len(grid.seeds)
    print(f"{len(runs)} runs ({points} points x {len(grid.seeds)} seeds), {_budget_text(runs)}")
    if grid.search:
        search = grid.search
        space = f"{search.lr_low:g} to {search.lr_high:g}{', log scale' if search.lr_log else ''}"
        print(f"then a learning-rate search for each of the {points} points: {search.trials} trials at seed "
              f"{search.seed}, lr from {space} (TPE; {search.metric} at the last epoch"
              f"{'; trials below the median curve are pruned' if search.prune else ''}); each point's best lr "
              f"is re-run at every seed: {points * search.trials} search trials + {len(runs)} tuned runs")
    return EXIT_OK


def _budget_text(runs: list[RunSpec]) -> str:
    """Epochs in all; a run with a steps budget counts its steps (its epochs depend on the data's size)."""
    by_epochs = [r for r in runs if r.point.train.budget == "epochs"]
    text = f"{sum(r.point.train.epochs for r in by_epochs)} epochs in all"
    if len(by_epochs) < len(runs):
        steps = sum(int(r.point.train.steps or 0) for r in runs if r.point.train.budget == "steps")
        text = (f"{text} for the {len(by_epochs)} runs with an epochs budget, and {steps} optimizer steps "
                f"for the {len(runs) - len(by_epochs)} with a steps budget")
    return text


# --- run


def cmd_run(args: argparse.Namespace) -> int:
    """Train the grid's runs and the searches' trials; then each finished search's best lr at every seed."""
    from sweep import store

    grid = load_grid(args.grid)
    runs, groups = plan(grid), search_groups(grid)
    results, target = _locations(args, grid)
    study = _open(target, grid.name, create=True)
    revived = store.requeue_dead_everywhere(study)
    if revived:
        print(f"re-queued {len(revived)} run(s) whose worker died: {', '.join(revived)}")
    added = store.enqueue(study, runs)
    store.register_searches(study, groups)
    code, planned, trained = EXIT_OK, list(runs), False
    for phase in range(3):  # grid and searches; then the tuned runs; a third pass only if a search finished late
        planned = runs + store.enqueue_tuned(study, groups, grid.seeds)
        if phase == 0:
            _warn_foreign(study, planned)
        todo = _pending_runs(study, planned) + _pending_slots(study)
        if not todo or code:
            break
        code = _train(args, study, grid.name, todo, len(planned), added, target, results, phase)
        trained = True
    if not trained:
        print(f"all {len(planned)} runs of {grid.name} are already finished; nothing to train.")
    result = _finish(study, planned, results)
    unfinished = len(_pending_runs(study, planned) + _pending_slots(study))
    if unfinished:
        print(f"{unfinished} run(s) not finished; run the same command again to train them", file=sys.stderr)
        return EXIT_FAILED
    return result


def _train(args: argparse.Namespace, study, name: str, todo: list[RunSpec], planned: int, added: int,
           target: str, results: Path, phase: int) -> int:
    """Start the workers for the queued runs and show their progress; return the workers' exit code."""
    from sweep import coordinator, store

    epochs_total = sum(s.point.train.epochs for s in todo)
    searching = len(store.search_slots(study))
    if phase == 0:
        extra = f" and {searching} learning-rate search trial(s)" if searching else ""
        print(f"{name}: {planned} runs{extra}; {len(todo)} to train ({epochs_total} epochs; "
              f"{added} newly queued). Store: {_shown(target)}")
    else:
        print(f"{name}: learning-rate searches finished; training their best lr at every seed: {len(todo)} run(s)")
    progress = coordinator.Progress(runs_total=len(todo), epochs_total=epochs_total)
    started = time.monotonic()
    slots = _slots(args, max(s.point.train.gpus for s in todo))
    print(f"starting {len(slots)} worker(s){_devices_note(slots)}; TensorFlow takes a few seconds to load. "
          f"Logs: {results / vocab.LOG_DIR}/")
    code = coordinator.run_workers(target, name, progress, results / vocab.LOG_DIR, slots=slots, retries=args.retries)
    print(f"trained {progress.runs_done} run(s) in {time.monotonic() - started:.0f} s")
    lost = store.requeue_dead_everywhere(study)  # a worker that crashed left its run RUNNING
    if lost:
        print(f"re-queued {len(lost)} run(s) of crashed workers: {', '.join(lost)}", file=sys.stderr)
    if code:
        print(f"a worker exited with code {code}; see {results / vocab.LOG_DIR}/", file=sys.stderr)
    return code


def _devices_note(slots: list[str | None]) -> str:
    used = [s for s in slots if s is not None]
    return f" on devices {' | '.join(used)} (CUDA_VISIBLE_DEVICES per worker)" if used else ""


def _open(target: str, name: str, create: bool):  # -> optuna.Study
    from sweep import store

    try:
        return store.open_study(store.open_storage(target), name, create=create)
    except store.NewerStoreError as err:
        raise UsageError(f"{_shown(target)}: {err}") from None
    except KeyError:
        raise UsageError(f"the store {_shown(target)} has no sweep named {name!r}") from None
    except Exception as err:  # a bad URL, an unreachable database, a corrupt journal
        detail = _shown(str(err).strip().splitlines()[0] if str(err).strip() else "")
        raise UsageError(f"cannot open the store {_shown(target)}: {type(err).__name__}: {detail}") from None


def _shown(text: str) -> str:
    from sweep.store import redact

    return redact(text)


def _pending_runs(study, runs: list[RunSpec]) -> list[RunSpec]:
    from sweep import store

    current = store.latest_by_run(study.get_trials(deepcopy=False))
    return [s for s in runs if s.run_id in current and store.status_of(current[s.run_id]) in (vocab.PENDING, vocab.RUNNING)]


def _pending_slots(study) -> list[RunSpec]:
    """Templates of the learning-rate search trials still queued or running."""
    from sweep import store

    current = store.latest_by_run(store.all_trials(study))
    return [spec for slot, spec in store.search_slots(study).items()
            if store.status_of(current[slot]) in (vocab.PENDING, vocab.RUNNING)]


def _warn_foreign(study, runs: list[RunSpec]) -> None:
    from sweep import store

    planned = {s.run_id for s in runs}
    foreign = [r for r in store.latest_by_run(study.get_trials(deepcopy=False)) if r not in planned]
    if foreign:
        print(f"note: the store also holds {len(foreign)} run(s) not in this grid file "
              f"(an earlier version of it?); they stay in runs.csv and epochs.csv")


def _finish(study, runs: list[RunSpec], results: Path) -> int:
    from sweep import store

    runs_csv, epochs_csv = store.export_csv(study, results)
    planned = {s.run_id for s in runs} | set(store.search_slots(study))
    counts = store.counts(study, planned)
    print(f"status: {_counts_text(counts)}")
    current = store.latest_by_run(store.all_trials(study))
    failed = [(rid, t) for rid, t in current.items() if rid in planned and store.status_of(t) == vocab.FAILED]
    for run_id, trial in failed:
        error = (trial.user_attrs.get("error") or "").strip().splitlines()
        print(f"FAILED {run_id}: {error[-1] if error else 'no error text'}", file=sys.stderr)
    print(f"results: {runs_csv} and {epochs_csv}")
    _write_report(results)
    return EXIT_FAILED if failed else EXIT_OK


# --- status


def cmd_status(args: argparse.Namespace) -> int:
    from sweep import store

    grid = load_grid(args.grid)
    runs, groups = plan(grid), search_groups(grid)
    slots = len(groups) * grid.search.trials if grid.search else 0
    results, target = _locations(args, grid)
    if "://" not in target and not Path(target).exists():  # a journal not yet written; a database is asked
        print(f"{grid.name}: nothing has run yet ({target} does not exist)")
        counts = {s: 0 for s in vocab.STATUSES} | {vocab.PENDING: len(runs) + slots}
    else:
        study = _open(target, grid.name, create=False)
        tuned = [spec for specs in store.tuned_runs(study, groups, grid.seeds).values() for spec in specs]
        runs = runs + tuned
        counts = store.counts(study, [s.run_id for s in runs] + list(store.search_slots(study)))
    searched = f" + {slots} learning-rate search trials" if slots else ""
    print(f"{grid.name}: {len(runs)} runs{searched}: {_counts_text(counts)}")
    if counts[vocab.RUNNING]:
        _print_running(study, {s.run_id: s for s in runs} | store.search_slots(study))
    return EXIT_OK


def _counts_text(counts: dict[str, int]) -> str:
    """"2 done, 0 running, ..."; pruned (learning-rate search trials only) when there are any."""
    return ", ".join(f"{counts[s]} {s}" for s in vocab.STATUSES if s != vocab.PRUNED or counts[s])


def _print_running(study, planned: dict[str, RunSpec]) -> None:
    """One line per running run: where it runs and how far it got."""
    from sweep import store

    for run_id, trial in sorted(store.latest_by_run(store.all_trials(study)).items()):
        if run_id not in planned or store.status_of(trial) != vocab.RUNNING:
            continue
        attrs = trial.user_attrs
        done = len(store.epochs_of(trial))
        print(f"  running {run_id}: epoch {done}/{planned[run_id].point.train.epochs} done, "
              f"worker pid {attrs.get('worker_pid', '?')} on {attrs.get('worker_host', '?')}, "
              f"attempt {attrs.get('attempt', 1)}, since {trial.datetime_start:%Y-%m-%d %H:%M:%S}")


# --- worker


def cmd_worker(args: argparse.Namespace) -> int:
    from sweep import worker

    args.storage = _storage_arg(args.storage)
    if args.storage is None:
        raise UsageError("--storage is required (or set $BATCHSWEEP_STORAGE): the sweep's journal file or database URL")
    if "://" not in args.storage and not Path(args.storage).exists():
        raise UsageError(f"--storage {args.storage}: no such journal file; start the sweep with `sweep run GRID` first")
    study = _open(args.storage, args.study, create=False)
    if args.workers is None and args.devices is None:
        return worker.work(study, retries=args.retries)  # this process trains
    return _coordinate_existing(args, study)


def _coordinate_existing(args: argparse.Namespace, study) -> int:
    """`worker --workers N` / `--devices IDS`: several worker processes for a sweep started elsewhere."""
    from sweep import coordinator, store

    queued = [RunSpec.from_json(t.user_attrs["spec"]) for t in study.get_trials(deepcopy=False)
              if store.status_of(t) == vocab.PENDING and "spec" in t.user_attrs] + _pending_slots(study)
    if not queued:
        print(f"{args.study}: no queued runs; nothing to do")
        return EXIT_OK
    slots = _slots(args, max(s.point.train.gpus for s in queued))
    print(f"{args.study}: {len(queued)} queued run(s); starting {len(slots)} worker(s){_devices_note(slots)}")
    progress = coordinator.Progress(runs_total=len(queued), epochs_total=sum(s.point.train.epochs for s in queued))
    log_dir = Path("results") / args.study / vocab.LOG_DIR
    return coordinator.run_workers(args.storage, args.study, progress, log_dir, slots=slots, retries=args.retries)


# --- report


def cmd_report(args: argparse.Namespace) -> int:
    if len(args.folders) > 1 and args.out is None:
        raise UsageError("several results folders need --out DIR for the combined report (e.g. --out results/reference)")
    for folder in args.folders:  # before the imports: a typo should answer at once
        missing = [n for n in (vocab.RUNS_CSV, vocab.EPOCHS_CSV) if not (folder / n).is_file()]
        if missing:
            raise UsageError(f"{folder}: no {' or '.join(missing)} here; "
                             f"make it with `python -m sweep run GRID --results {folder}`")
    from sweep import report

    written = report.build(args.folders, args.out, svg=args.svg)
    for claim, finding in written.findings:
        print(f"{claim.id}: {report.verdict_text(claim, finding)}")
    print(f"report: {written.markdown} and {written.html}")
    return EXIT_OK


def _write_report(results: Path) -> None:
    """`run` ends with the report. A report problem is printed but never changes the run's exit code."""
    from sweep import report

    try:
        written = report.build([results])
    except Exception as err:  # the runs are safe in the CSVs; `sweep report` can be run again by hand
        print(f"warning: report not written ({type(err).__name__}: {err}); "
              f"retry with `python -m sweep report {results}`", file=sys.stderr)
        return
    print(f"report: {written.markdown} and {written.html}")
