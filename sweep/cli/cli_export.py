"""Command line of `sweep export`: a sweep's CSVs and report from its store (`sweep.run.snapshot`), or a
results folder's runs for TensorBoard or MLflow (`sweep.export`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sweep.cli import arguments
from sweep.config import load_grid
from sweep.exits import EXIT_OK, UsageError

if TYPE_CHECKING:
    from sweep.run.orchestrate import Options

GRID_SUFFIXES = (".yaml", ".yml")


def add_export_parser(commands: argparse._SubParsersAction) -> None:
    """The `export` command; --results and --storage (@FILE, $BATCHSWEEP_STORAGE) read as `run` reads them."""
    p = commands.add_parser(
        "export",
        help="write a sweep's CSVs and report from its store, however far it got; or its runs for TensorBoard "
        "or MLflow (no TensorFlow)",
        description="Without a target: read the sweep's store (GRID's, or DIR's journal.log; --storage for a "
        "database) and write runs.csv, epochs.csv and the report into the results folder, whatever is still "
        "pending or running, and say how many runs are missing. The store is only read: nothing is queued or "
        "trained. The report reads the finished runs.\n\n"
        "With --tensorboard or --mlflow: write every run of the results folder's CSVs to each target given\n"
        "(a GRID's CSVs are written from the store first):\n"
        "  TensorBoard event files: one run per run id, a scalar per metric per epoch, the HParams view's data;\n"
        "  MLflow runs: params, per-epoch metrics, report.md and report.html as artifacts, in an experiment\n"
        "  named after the sweep.\n"
        "Each target needs its extra: pip install 'batchsweep[tensorboard]' or 'batchsweep[mlflow]'.",
        epilog="examples:\n  sweep export grid.yaml --storage postgresql://user@db/sweeps\n"
        "  sweep export results/article\n"
        "  sweep export results/article --tensorboard runs/article\n"
        "  tensorboard --logdir runs/article\n"
        "  sweep export results/article --mlflow sqlite:///mlflow.db\n"
        "  mlflow ui --backend-store-uri sqlite:///mlflow.db",
        formatter_class=arguments.Help,
    )
    p.add_argument(
        "source", metavar="GRID|DIR", type=Path, help="a grid file (YAML) or a results folder, e.g. results/article"
    )
    arguments.results_args(p)
    p.add_argument(
        "--study",
        default=None,
        help="with a results folder: the sweep's name in the store (default: the one in its runs.csv, "
        "else the folder's name)",
    )
    p.add_argument("--tensorboard", metavar="OUT", help="folder for the event files (tensorboard --logdir OUT)")
    p.add_argument(
        "--mlflow", metavar="URI", help="MLflow tracking URI: sqlite:///mlflow.db (a local file) or a server's URL"
    )
    p.set_defaults(handler=lambda args: cmd_export(args, arguments.options(args)))


def cmd_export(args: argparse.Namespace, options: Options) -> int:
    """No target: CSVs and report from the store. A target: the folder's CSVs (a grid's refreshed first)."""
    from sweep import export
    from sweep.run import snapshot

    destinations = {name: getattr(args, name) for name in export.TARGETS if getattr(args, name, None)}
    source: Path = args.source
    if source.suffix in GRID_SUFFIXES or source.is_file():
        if args.study:
            raise UsageError("--study is for a results folder; a grid file names its sweep (drop --study)")
        folder = snapshot.from_grid(load_grid(str(source)), options)
    elif not destinations:
        if args.results:
            raise UsageError("--results is for a grid file; a results folder is written in place (drop --results)")
        snapshot.from_folder(source, options, args.study)
        return EXIT_OK
    elif args.results or args.storage or args.study:
        raise UsageError(
            "--results, --storage and --study read a store; --tensorboard and --mlflow of a results folder read "
            "its CSVs (drop them, or give the grid file to refresh the CSVs from the store first)"
        )
    else:
        folder = source
    if not destinations:
        return EXIT_OK
    from sweep.store import redact

    try:
        lines = export.export(folder, destinations)
    except export.ExportError as err:  # an MLflow server's URL may hold a password (http://user:pw@host)
        raise UsageError(redact(str(err), args.mlflow)) from None
    for line in lines:
        print(redact(line, args.mlflow))
    return EXIT_OK
