"""Command line of the commands that queue a sweep for workers started elsewhere: `run --no-train`
and `slurm`. They parse, call `orchestrate.queue_sweep` and `sweep.run.slurm`, and print; no TensorFlow.

Exit codes as `sweep.cli`: 0 queued (and submitted); 2 bad input, one line on stderr, nothing written.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from sweep import vocab
from sweep.cli import arguments
from sweep.cli.cli_storage import storage_arg
from sweep.config import GridFile, load_grid
from sweep.exits import EXIT_OK, UsageError
from sweep.run import slurm
from sweep.store.queue import RetryPolicy

if TYPE_CHECKING:
    from sweep.run.orchestrate import Queued

# Flags of `run` that train or steer training: with --no-train they would silently do nothing.
TRAINING_FLAGS = (
    "workers",
    "devices",
    "trials_per_gpu",
    "retries",
    "max_requeues",
    "in_process",
    "until_decided",
    "max_seeds",
    "pack",
)
SLURM_EPILOG = """\
examples:
  sweep slurm grid.yaml --array 8 --storage @store.url --partition gpu --gpus-per-task 1 --time 4:00:00
  sweep slurm grid.yaml --array 8 --storage @store.url --dry-run     # print the script only
  squeue --me                        # the array's tasks
  sweep status grid.yaml --storage @store.url
  sweep export grid.yaml --storage @store.url   # any time: runs.csv, epochs.csv and the report
Across nodes the store must be a postgresql:// URL; a journal file is safe only when every task runs
on one node. Cluster set-up, preemption and Kubernetes: docs/cluster.md."""


def add_slurm_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "slurm",
        help="queue a grid's runs and submit a Slurm job array of workers that train them (sbatch)",
        description="Queue every run of GRID (as `run --no-train`), write a batch script of a job array whose "
        "every task runs `python -m sweep worker` on the store into <results>/slurm/worker.sbatch, and submit it "
        "with sbatch. Each task trains queued runs until none are left; its log is "
        "<results>/slurm/worker-JOBID_TASK.out. Edit the script and `sbatch` it again to add workers.",
        epilog=SLURM_EPILOG,
        formatter_class=arguments.Help,
    )
    p.add_argument("grid", help="the grid file (YAML)")
    arguments.results_args(p)
    p.add_argument("--array", required=True, metavar="N", help="worker tasks in the job array (#SBATCH --array=0-N-1)")
    p.add_argument("--partition", metavar="P", help="Slurm partition (#SBATCH --partition)")
    p.add_argument(
        "--gpus-per-task",
        type=int,
        metavar="G",
        help="GPUs per task (#SBATCH --gpus-per-task); Slurm sets CUDA_VISIBLE_DEVICES and the worker keeps it; "
        "at least the grid's largest train.gpus",
    )
    p.add_argument("--time", metavar="T", help="time limit per task, e.g. 4:00:00 or 1-00:00:00 (#SBATCH --time)")
    p.add_argument(
        "--requeue",
        action="store_true",
        help="let Slurm requeue a preempted or failed-node task (#SBATCH --requeue); its run goes back in the "
        "sweep's queue either way",
    )
    p.add_argument(
        "--retries", type=int, default=1, help="times a worker retries a run that raised (default 1), as `sweep worker`"
    )
    p.add_argument(
        "--max-requeues",
        type=int,
        default=3,
        metavar="N",
        help="times a run whose worker died is queued again before it is left failed (default 3), as `sweep worker`",
    )
    p.add_argument(
        "--sbatch-arg",
        action="append",
        default=[],
        metavar="OPT",
        help="one more sbatch option as an #SBATCH line, repeatable; write it with '=': --sbatch-arg=--mem=8G",
    )
    p.add_argument("--dry-run", action="store_true", help="print the batch script; queue and submit nothing")
    p.set_defaults(handler=cmd_slurm)


# --- run --no-train


def refuse_training_flags(args: argparse.Namespace) -> None:
    """--no-train with a flag that only matters when this command trains: one line, nothing written."""
    given = [name for name in TRAINING_FLAGS if _given(getattr(args, name, None))]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise UsageError(
            f"{flag} steers training, and --no-train trains nothing: drop {flag}, or give it to `sweep worker`"
            if given[0] not in ("until_decided", "max_seeds")
            else f"{flag} needs the runs' results as they finish; use it without --no-train"
        )


def _given(value: object) -> bool:
    """A flag given on the command line: not its None default, not an unset switch (`--retries 0` counts)."""
    return value is not None and value is not False


def queue_only(args: argparse.Namespace) -> int:
    """`run GRID --no-train`: queue the runs, say how many and how to start workers."""
    from sweep.run import orchestrate

    refuse_training_flags(args)
    grid = load_grid(args.grid, args.overrides)
    arguments.record_overrides(grid, args)
    options = orchestrate.Options(results=args.results, storage=storage_arg(args.storage))
    queued = orchestrate.queue_sweep(grid, options)
    print(_queued_text(grid, queued))
    shown = _worker_storage(args.storage, queued.store.target)
    command = "sweep worker --study " + grid.name + (f" --storage {shown}" if shown else "")
    print(f"start workers, on this machine or others that reach the store: {command}")
    if shown is None:
        print(f"  (with ${vocab.STORAGE_ENV} set to the store: its password is not printed)")
    print(f"results, any time: sweep export {args.grid}" + (f" --storage {shown}" if shown else ""))
    return EXIT_OK


def _queued_text(grid: GridFile, queued: Queued) -> str:
    text = (
        f"{grid.name}: queued {queued.todo} run(s) to train of {queued.planned} "
        f"({queued.added} newly queued); store: {queued.store.shown}"
    )
    if queued.searching:
        text += (
            "\nnote: this grid has a learning-rate search: once its trials are done, queue each point's best lr "
            "at every seed with the same command again"
        )
    return text


def _worker_storage(raw: str | None, target: str) -> str | None:
    """The store as a worker's --storage anywhere: @FILE and a journal as absolute paths, a database URL
    as given; None when the URL holds a password (the worker then reads $BATCHSWEEP_STORAGE).
    """
    from sweep.store import storage
    from sweep.store.secrets import has_password

    raw = raw if raw is not None else os.environ.get(vocab.STORAGE_ENV)
    if raw and raw.startswith("@"):
        return "@" + str(Path(raw[1:]).expanduser().resolve())
    if storage.is_database(target):
        return None if has_password(target) else target
    return str(Path(target).resolve())


# --- slurm


def cmd_slurm(args: argparse.Namespace) -> int:
    from sweep.store import redact

    target_arg = storage_arg(args.storage)
    try:
        return _slurm(args, target_arg)
    except slurm.SlurmError as err:
        raise UsageError(redact(str(err), target_arg) if target_arg else str(err)) from None


def _slurm(args: argparse.Namespace, target_arg: str | None) -> int:
    from sweep.run import orchestrate, stores
    from sweep.store import storage

    tasks = slurm.parse_tasks(args.array)
    if not args.dry_run:
        slurm.sbatch_path()  # before anything is queued
    grid = load_grid(args.grid)
    options = orchestrate.Options(results=args.results, storage=target_arg)
    results, target = stores.locations(grid, options)
    job = _array_job(args, grid, tasks, results, target)
    if args.dry_run:
        print(slurm.script(job), end="")
        return EXIT_OK
    if tasks > 1 and not storage.is_database(target):
        print(
            "warning: a journal file is safe only when every task runs on one node (its locks and crash "
            "checks are local); pin them with --sbatch-arg=--nodelist=NODE, or use a postgresql:// store"
        )
    queued = orchestrate.queue_sweep(grid, options)
    print(_queued_text(grid, queued))
    if not queued.todo:
        print(f"every run of {grid.name} is finished; nothing to submit")
        return EXIT_OK
    path = slurm.write_script(job)
    env = dict(os.environ) | ({vocab.STORAGE_ENV: target} if job.storage is None else {})
    try:
        job_id = slurm.submit(path, env)
    except slurm.SlurmError as err:
        raise slurm.SlurmError(f"{err}; the runs stay queued: fix it, then sbatch {path}") from None
    print(f"submitted job array {job_id}: {tasks} worker task(s); script {path}")
    flag = f" --storage {job.storage}" if job.storage else ""
    print(f"logs: {job.folder}/worker-{job_id}_<task>.out")
    print(f"watch: squeue -j {job_id}; sweep status {args.grid}{flag}")
    print(
        f"results, any time: sweep export {args.grid}{flag} writes runs.csv, epochs.csv and the "
        "report of the finished runs (it only reads the store)"
    )
    return EXIT_OK


def _array_job(args: argparse.Namespace, grid: GridFile, tasks: int, results: Path, target: str) -> slurm.ArrayJob:
    needed = max(point.train.gpus for point, _ in grid.points())
    if args.gpus_per_task is not None and args.gpus_per_task < needed:
        raise UsageError(
            f"--gpus-per-task {args.gpus_per_task}: a run of {grid.name} has train.gpus {needed}; give at least that"
        )
    for flag, value in (("--retries", args.retries), ("--max-requeues", args.max_requeues)):
        if value < 0:
            raise UsageError(f"{flag} must be 0 or more, got {value}")
    return slurm.ArrayJob(
        study=grid.name,
        storage=_worker_storage(args.storage, target),
        tasks=tasks,
        folder=(results / "slurm").resolve(),
        workdir=Path.cwd(),
        partition=args.partition,
        gpus_per_task=args.gpus_per_task,
        time=args.time,
        requeue=args.requeue,
        policy=RetryPolicy(args.retries, args.max_requeues),
        extra=tuple(args.sbatch_arg),
    )
