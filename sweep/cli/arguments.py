"""The flags several commands share: where results and the store are (`--results`, `--storage`), how
workers train (`--workers`, `--devices`, `--pack`, `--retries`, ...), and the orchestrator's `Options`
read from them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sweep.cli.cli_storage import storage_arg
from sweep.config import GridFile

if TYPE_CHECKING:
    from sweep.report import Written
    from sweep.run.orchestrate import Options


class Help(argparse.HelpFormatter):
    """Descriptions wrapped to the terminal, except text laid out by hand (examples, lists): any with a line
    break is kept as written.
    """

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def override_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="settings over the grid file's, dotted keys and YAML values: train.epochs=1 seeds=[0,1] "
        "(a section.key is set for every point; grid.section.key=[...] makes an axis)",
    )


def record_overrides(grid: GridFile, args: argparse.Namespace) -> None:
    """With overrides, the grid as run goes into its results folder (grid.yaml), and a line says so: a rerun
    of that file trains the same runs.
    """
    if not args.overrides:
        return
    from sweep.config import resolved
    from sweep.run import stores

    results, _ = stores.locations(grid, options(args))
    path = resolved.write(results, grid, tuple(args.overrides))
    print(f"{grid.name}: with {' '.join(args.overrides)}; the grid as run: {path} (rerun: sweep run {path})")


def results_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", type=Path, default=None, help="results folder (default results/<name>)")
    p.add_argument(
        "--storage",
        default=None,
        help="store: journal file path or postgresql:// URL, or @FILE to read it from a file "
        "(default: $BATCHSWEEP_STORAGE, else <results>/journal.log)",
    )


def worker_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workers",
        type=positive,
        default=None,
        help="worker processes on this machine (default: one per device group with GPUs; without GPUs one per "
        "core, a thread each, up to one per run, or 1 where a run has gpus above 1; --workers 1 gives one run "
        "every core)",
    )
    p.add_argument(
        "--devices",
        default=None,
        metavar="IDS",
        help="GPU ids to use, e.g. 0,2 (default: CUDA_VISIBLE_DEVICES, else every GPU, else the CPU); "
        "a run with gpus: G takes G of them, and two runs never share one",
    )
    p.add_argument(
        "--trials-per-gpu",
        type=positive,
        default=None,
        metavar="K",
        help="let K runs share each GPU, for models too small to fill one (default 1)",
    )
    p.add_argument(
        "--keep-models",
        action="store_true",
        help="keep each run's checkpoint after it ends (normally removed once it is done, failed or diverged), "
        "and save each done run's final model as <results>/models/<run_id>.keras "
        "(sweep.train.checkpoint.load_model, or keras.saving.load_model with the custom objects in docs/internals.md)",
    )
    p.add_argument(
        "--pack",
        type=positive,
        default=None,
        metavar="K",
        help="train up to K runs that share a compiled graph as towers of one model, same records as alone "
        "(default 1: every run alone; packs speed up training steps, not a grid's records: docs/levers.md)",
    )
    p.add_argument(
        "--retries",
        type=non_negative,
        default=None,
        help="times a run that raised is tried again before it is left failed (default 1)",
    )
    p.add_argument(
        "--max-requeues",
        type=non_negative,
        default=None,
        metavar="N",
        help="times a run whose worker died (kill -9, out of memory, a lost node, no progress) is queued again; "
        "the next death leaves it failed and the sweep goes on (default 3)",
    )


def report_writer(folder: Path) -> Written:
    """The report of one results folder (`sweep.report.build`), which `run` and `export` end with."""
    from sweep.report import build

    return build([folder])


def options(args: argparse.Namespace) -> Options:
    """The flags, as the orchestrator's options; the store from --storage, @FILE or $BATCHSWEEP_STORAGE."""
    from sweep.run.orchestrate import Options

    return Options(
        report=report_writer,
        results=args.results,
        storage=storage_arg(args.storage),
        workers=getattr(args, "workers", None),
        devices=getattr(args, "devices", None),
        trials_per_gpu=given_or(args, "trials_per_gpu", 1),
        retries=given_or(args, "retries", 1),
        max_requeues=given_or(args, "max_requeues", 3),
        in_process=getattr(args, "in_process", False),
        keep_models=getattr(args, "keep_models", False),
        pack=getattr(args, "pack", None),
    )


def given_or(args: argparse.Namespace, name: str, default: int) -> int:
    """A flag's value, its default when not given (None marks "not given" for `run --no-train`)."""
    value = getattr(args, name, None)
    return default if value is None else value


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number >= 0 (inf: no limit), got {text!r}") from None
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"must be a number >= 0 (inf: no limit), got {text}")
    return value


def non_negative(text: str) -> int:
    return 0 if text.strip() == "0" else positive(text)
