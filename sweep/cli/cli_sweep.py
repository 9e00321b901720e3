"""Command line of a sweep's own commands: `plan` (the runs a grid file makes), `run`, `status` and `worker` (which
call `sweep.run.orchestrate`, `until` and `sweep_status`), `time` (quiet timing, `sweep.train.timing`) and `report`
(`sweep.report`, skipped when nothing changed). Each command is its parser and its `cmd_*` handler.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from sweep import vocab
from sweep.cli import arguments, cli_cluster
from sweep.config import load_grid, lr_range
from sweep.config.plan import RunSpec, plan
from sweep.exits import EXIT_OK, EXIT_ORPHANED, UsageError
from sweep.report import stamp
from sweep.train import backends, timing

# --- parsers


def add_plan_parser(commands: argparse._SubParsersAction) -> None:
    """The `plan` command."""
    p = commands.add_parser(
        "plan",
        help="list the runs a grid file would train (no training, no TensorFlow)",
        description="Print one line per run GRID would train (its run id and the settings that vary), then how "
        "many runs, grid points, seeds and epochs in all. Reads only the grid file.",
        epilog="example:\n  sweep plan experiments/article.yaml",
        formatter_class=arguments.Help,
    )
    p.add_argument("grid", help="the grid file (YAML)")
    arguments.override_args(p)
    p.set_defaults(handler=cmd_plan)


def add_run_parser(commands: argparse._SubParsersAction) -> None:
    """The `run` command (`run --no-train` is `cli_cluster.queue_only`)."""
    p = commands.add_parser(
        "run",
        help="train every pending run of a grid file, then export runs.csv and epochs.csv",
        description="Train every run of GRID that is not done yet. Safe to repeat: finished runs "
        "are never trained again, failed and interrupted ones are retried.",
        epilog="examples:\n  sweep run experiments/smoke.yaml\n  sweep run experiments/article.yaml --workers 2\n"
        "  sweep run experiments/article.yaml train.epochs=1 seeds=[0] --results results/quick\n"
        "  sweep run experiments/batch_sizes.yaml --until-decided --max-seeds 10\n"
        "  sweep run grid.yaml --storage @~/.sweep-db --no-train   # queue only, for workers elsewhere",
        formatter_class=arguments.Help,
    )
    p.add_argument("grid", help="the grid file (YAML)")
    arguments.override_args(p)
    arguments.results_args(p)
    arguments.worker_args(p)
    p.add_argument(
        "--in-process",
        action="store_true",
        help="train in this process instead of worker processes (one at a time; ignores --workers "
        "and --devices); for debugging and tests",
    )
    p.add_argument(
        "--until-decided",
        action="store_true",
        help="after the grid, add seeds (new values above the grid's largest) only to the grid points whose "
        "claims still have an undecided check, at planned seed counts (x1.5 per look) up to --max-seeds, "
        "with each claim's error rate kept under this optional stopping (docs/report.md, "
        "'Seeds until decided'); writes decisions.csv and looks.csv; rerun the same command to resume",
    )
    p.add_argument(
        "--no-train",
        action="store_true",
        help="queue the runs and exit without training (no TensorFlow, no check of model.builder and the other "
        "code references); then start `sweep worker` anywhere that reaches the store, or see `sweep slurm`",
    )
    p.add_argument(
        "--max-seeds",
        type=arguments.positive,
        default=None,
        metavar="N",
        help="with --until-decided: the cap on seeds per grid point, at least the grid's seed count "
        "(default 30); keep it the same when resuming",
    )
    p.set_defaults(handler=cmd_run)


def add_status_parser(commands: argparse._SubParsersAction) -> None:
    """The `status` command."""
    p = commands.add_parser(
        "status",
        help="count done / running / failed / diverged / pending runs",
        description="Say how far a sweep got: its runs done, running, failed, diverged and pending, and for each "
        "running run where it runs and how far it is. Given a grid file, the grid's runs are counted (those not "
        "queued yet as pending); given a results folder, the runs its store holds. The store is only read.",
        epilog="examples:\n  sweep status experiments/article.yaml\n  sweep status results/article\n"
        "  sweep status grid.yaml --storage @~/.sweep-db",
        formatter_class=arguments.Help,
    )
    p.add_argument("grid", metavar="GRID|DIR", help="a grid file (YAML) or a results folder, e.g. results/article")
    arguments.results_args(p)
    p.add_argument("--study", default=None, help="with a results folder whose store holds several sweeps: which one")
    p.set_defaults(handler=cmd_status)


def add_worker_parser(commands: argparse._SubParsersAction) -> None:
    """The `worker` command."""
    p = commands.add_parser(
        "worker",
        help="join a sweep: train queued runs from a store until none are left",
        description="Train queued runs of an existing sweep until the queue is empty. "
        "Started by `run`, or by hand on another machine.",
        epilog="examples:\n  sweep worker --study article --storage results/article/journal.log\n"
        "  BATCHSWEEP_STORAGE=@~/.sweep-db sweep worker --study causes",
        formatter_class=arguments.Help,
    )
    p.add_argument(
        "--storage",
        default=None,
        help="journal file path or database URL of the sweep, or @FILE to read it from a file "
        "(default: $BATCHSWEEP_STORAGE)",
    )
    p.add_argument("--study", required=True, help="the sweep's name (the grid file's name:)")
    p.add_argument(
        "--results",
        type=Path,
        default=None,
        help="the results folder: the workers' logs with --workers or --devices, --keep-models' models/, and "
        "a database store's checkpoints/ (default: the journal file's folder, else results/<study>)",
    )
    arguments.worker_args(p)
    p.set_defaults(handler=cmd_worker)


def add_time_parser(commands: argparse._SubParsersAction) -> None:
    """The `time` command."""
    p = commands.add_parser(
        "time",
        help="measure quiet training seconds per epoch and step of each batch size of a grid (writes timing.csv)",
        description="Time one training epoch of every configuration of GRID (model, input shape, optimizer, "
        "batch size, replicas), the repeats alternating between configurations, graphs traced first, and keep "
        "the best: a benchmark-style measurement for the report's seconds to target, to run on an otherwise "
        "idle machine. Writes <results>/timing.csv; repeat to replace it. Trains nothing into the store.",
        epilog="examples:\n  sweep time experiments/batch_sizes.yaml\n"
        "  sweep time experiments/batch_sizes.yaml --repeats 5\n"
        "  sweep time experiments/batch_sizes.yaml --max-load 1   # time on a busy machine anyway",
        formatter_class=arguments.Help,
    )
    p.add_argument("grid", help="the grid file (YAML)")
    arguments.override_args(p)
    p.add_argument("--results", type=Path, default=None, help="results folder (default results/<name>)")
    p.add_argument(
        "--repeats",
        type=arguments.positive,
        default=timing.DEFAULT_REPEATS,
        help=f"timed epochs per configuration, alternating (default {timing.DEFAULT_REPEATS})",
    )
    p.add_argument(
        "--max-load",
        type=arguments.non_negative_float,
        default=timing.MAX_LOAD_PER_CORE,
        metavar="L",
        help="refuse to time when the 1-minute load average per core is above L (default "
        f"{timing.MAX_LOAD_PER_CORE:g}: quiet means an otherwise idle machine; timing.csv records the load)",
    )
    p.add_argument(
        "--gpus",
        type=arguments.positive,
        default=None,
        help="only the configurations with this many replicas, in this process (default: every replica count, "
        "each in a fresh process, since TensorFlow keeps one per process)",
    )
    p.set_defaults(handler=cmd_time)


def add_report_parser(commands: argparse._SubParsersAction) -> None:
    """The `report` command."""
    p = commands.add_parser(
        "report",
        help="rebuild tables, figures and the claims report from results folders (no TensorFlow)",
        description="Read runs.csv and epochs.csv of each DIR and write tables/, figures/, "
        "report.md and report.html (self-contained) into OUT.",
        epilog="examples:\n  sweep report results/article\n"
        "  sweep report results/article results/causes --out results/reference --svg",
        formatter_class=arguments.Help,
    )
    p.add_argument("folders", nargs="+", metavar="DIR", type=Path, help="results folder(s), e.g. results/article")
    p.add_argument("--out", type=Path, default=None, help="where to write (default: DIR; required with several DIRs)")
    p.add_argument("--svg", action="store_true", help="also write every figure as SVG (for papers; PNG always)")
    p.set_defaults(handler=cmd_report)


# --- plan


def cmd_plan(args: argparse.Namespace) -> int:
    grid = load_grid(args.grid, args.overrides)
    runs = plan(grid)
    width = max(len(r.run_id) for r in runs)
    for spec in runs:
        print(f"{spec.run_id:<{width}}  " + " ".join(f"{k}={v}" for k, v in spec.varying))
    points = len(runs) // len(grid.seeds)
    seeds = f"{len(grid.seeds)} seed{'' if len(grid.seeds) == 1 else 's'}"  # not selection's: it loads pandas
    print(f"{len(runs)} runs ({points} points x {seeds}), {_budget_text(runs)}")
    if grid.search:
        search = grid.search
        space = f"{search.lr_low:g} to {search.lr_high:g}{', log scale' if search.lr_log else ''}"
        print(
            f"then a learning-rate search for each of the {points} points: {search.trials} trials at seed "
            f"{search.seed}, lr from {space} (TPE; {search.metric} at the last epoch"
            f"{'; trials below the median curve are pruned' if search.prune else ''}); each point's best lr "
            f"is re-run at every seed: {points * search.trials} search trials + {len(runs)} tuned runs"
        )
        if search.data_seed is not None:
            print(f"the trials train on data.seed {search.data_seed}, the re-runs on the grid's: held-out data")
        if search.rerun > 1:
            print(
                f"and the {search.rerun - 1} runner-up lr(s) of each point at every seed: "
                f"{len(runs) * (search.rerun - 1)} runner_up runs (search.rerun)"
            )
        if search.widen:
            more = lr_range.extra_trials(search.trials)
            print(
                f"a search whose best lr sits at an edge of its range reaches a decade past it with {more} more "
                f"trials, and every other search as many in its own range, at most {search.widen} time(s) "
                "(search.widen)"
            )
    return EXIT_OK


def _budget_text(runs: list[RunSpec]) -> str:
    """Epochs in all; a run with a steps budget counts its steps (its epochs depend on the data's size)."""
    by_epochs = [r for r in runs if r.point.train.budget == "epochs"]
    text = f"{sum(r.point.train.epochs for r in by_epochs)} epochs in all"
    if len(by_epochs) < len(runs):
        steps = sum(int(r.point.train.steps or 0) for r in runs if r.point.train.budget == "steps")
        text = (
            f"{text} for the {len(by_epochs)} runs with an epochs budget, and {steps} optimizer steps "
            f"for the {len(runs) - len(by_epochs)} with a steps budget"
        )
    return text


# --- run, status, worker


def cmd_run(args: argparse.Namespace) -> int:
    if args.no_train:
        return cli_cluster.queue_only(args)
    if args.max_seeds is not None and not args.until_decided:
        raise UsageError("--max-seeds is the cap of --until-decided; add --until-decided, or drop --max-seeds")
    grid = load_grid(args.grid, args.overrides)
    arguments.record_overrides(grid, args)
    if args.until_decided:
        from sweep.run import until

        max_seeds = until.DEFAULT_MAX_SEEDS if args.max_seeds is None else args.max_seeds
        return until.run_until_decided(grid, arguments.options(args), max_seeds).exit_code
    from sweep.run import orchestrate

    return orchestrate.run_sweep(grid, arguments.options(args)).exit_code


def cmd_status(args: argparse.Namespace) -> int:
    from sweep.run import sweep_status

    if Path(args.grid).is_dir():
        sweep_status.folder_status(Path(args.grid), arguments.options(args), study=args.study)
    else:
        sweep_status.status(load_grid(args.grid), arguments.options(args))
    return EXIT_OK


def cmd_worker(args: argparse.Namespace) -> int:
    from sweep.run import coordinator

    if not coordinator.watch_parent():  # before anything is claimed
        print(
            f"error: the coordinator that started this worker has exited; exiting without claiming a run "
            f"(exit {EXIT_ORPHANED})",
            file=sys.stderr,
        )
        return EXIT_ORPHANED
    from sweep.run import orchestrate

    options = arguments.options(args)
    if options.storage is None:
        raise UsageError("--storage is required (or set $BATCHSWEEP_STORAGE): the sweep's journal file or database URL")
    return orchestrate.join(options.storage, args.study, options)


# --- time


def cmd_time(args: argparse.Namespace) -> int:
    from sweep.run import orchestrate, stores

    grid = load_grid(args.grid, args.overrides)
    specs = plan(grid)  # search trials and tuned runs share their grid point's configuration
    backends.check(grid.source, [s.point for s in specs])
    results, _ = stores.locations(grid, orchestrate.Options(results=args.results))
    if args.gpus is None:
        _refuse_if_busy(args.max_load)
        results.mkdir(parents=True, exist_ok=True)
        return timing.time_each_replica_count(Path(args.grid), args.overrides, specs, results, args.repeats, print)
    chosen = [s for s in specs if s.point.train.gpus == args.gpus]
    if not chosen:
        counts = ", ".join(str(g) for g in sorted({s.point.train.gpus for s in specs}))
        raise UsageError(
            f"--gpus {args.gpus}: no run of {args.grid} uses {args.gpus} replica(s); its runs use {counts}"
        )
    _refuse_if_busy(args.max_load)
    rows = timing.measure(chosen, args.repeats, lambda line: print(line, flush=True))
    results.mkdir(parents=True, exist_ok=True)
    timing.merge(results / vocab.TIMING_CSV, rows)
    print(f"timed {len(rows)} configuration(s) with gpus {args.gpus}: {results / vocab.TIMING_CSV}", flush=True)
    return EXIT_OK


def _refuse_if_busy(max_load: float) -> None:
    """UsageError (exit 2, nothing written) where the machine is too busy to time quietly."""
    busy = timing.too_busy(os.getloadavg()[0], os.cpu_count() or 1, max_load)
    if busy:
        raise UsageError(busy)


# --- report


def cmd_report(args: argparse.Namespace) -> int:
    if len(args.folders) > 1 and args.out is None:
        raise UsageError(
            "several results folders need --out DIR for the combined report (e.g. --out results/reference)"
        )
    for folder in args.folders:  # before the imports: a typo should answer at once
        missing = [n for n in (vocab.RUNS_CSV, vocab.EPOCHS_CSV) if not (folder / n).is_file()]
        if missing:
            raise UsageError(
                f"{folder}: no {' or '.join(missing)} here; make it with `sweep run GRID --results {folder}`"
            )
    out = args.out if args.out is not None else args.folders[0]
    key = stamp.key(args.folders, out, args.svg)
    summary = stamp.unchanged(out, key)  # nothing changed since the last report: keep it
    if summary is None:
        from sweep import report

        stamp.forget(out)
        summary = report.build(args.folders, out, svg=args.svg).summary
        stamp.write(out, key, summary)
    for line in summary:
        print(line)
    print(f"report: {out / 'report.html'} (and report.md beside it)")
    return EXIT_OK
