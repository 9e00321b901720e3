"""Command line of `sweep export`: a sweep's CSVs and report from its store (`sweep.run.snapshot`), or a
results folder's runs for each export target (`sweep.export`): TensorBoard, MLflow. The targets' flags, their
help and the command's words about them are derived from the registry, `sweep.export.targets.TARGETS`.
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from sweep.cli import arguments
from sweep.config import load_grid
from sweep.exits import EXIT_OK, UsageError
from sweep.export.targets import TARGETS

if TYPE_CHECKING:
    from sweep.run.orchestrate import Options

GRID_SUFFIXES = (".yaml", ".yml")
WRITES_WIDTH = 102  # the description's lines of what each target writes, wrapped at this width


def _listed(words: list[str], last: str) -> str:
    """["a", "b", "c"], "or" -> "a, b or c"."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {last} {words[-1]}"


def _flags() -> list[str]:
    return [f"--{name}" for name in TARGETS]


def _description() -> str:
    writes = ";\n".join(
        textwrap.fill(t.writes, WRITES_WIDTH, initial_indent="  ", subsequent_indent="  ") for t in TARGETS.values()
    )
    extras = _listed([f"'batchsweep[{name}]'" for name in TARGETS], "or")
    return (
        "Without a target: read the sweep's store (GRID's, or DIR's journal.log; --storage for a "
        "database) and write runs.csv, epochs.csv and the report into the results folder, whatever is still "
        "pending or running, and say how many runs are missing. The store is only read: nothing is queued or "
        "trained. The report reads the finished runs.\n\n"
        f"With {_listed(_flags(), 'or')}: write every run of the results folder's CSVs to each target given\n"
        "(a GRID's CSVs are written from the store first):\n"
        f"{writes}.\n"
        f"Each target needs its extra: pip install {extras}."
    )


def add_export_parser(commands: argparse._SubParsersAction) -> None:
    """The `export` command; --results and --storage (@FILE, $BATCHSWEEP_STORAGE) read as `run` reads them."""
    p = commands.add_parser(
        "export",
        help="write a sweep's CSVs and report from its store, however far it got; or its runs for "
        f"{_listed([t.tool for t in TARGETS.values()], 'or')} (no TensorFlow)",
        description=_description(),
        epilog="examples:\n  sweep export grid.yaml --storage postgresql://user@db/sweeps\n"
        "  sweep export results/article" + "".join(f"\n  {line}" for t in TARGETS.values() for line in t.examples),
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
    for t in TARGETS.values():
        p.add_argument(f"--{t.name}", dest=t.name, metavar=t.metavar, help=t.help)
    p.set_defaults(handler=lambda args: cmd_export(args, arguments.options(args)))


def cmd_export(args: argparse.Namespace, options: Options) -> int:
    """No target: CSVs and report from the store. A target: the folder's CSVs (a grid's refreshed first)."""
    from sweep import export
    from sweep.run import snapshot

    destinations = {name: getattr(args, name) for name in TARGETS if getattr(args, name, None)}
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
            f"--results, --storage and --study read a store; {_listed(_flags(), 'and')} of a results folder read "
            "its CSVs (drop them, or give the grid file to refresh the CSVs from the store first)"
        )
    else:
        folder = source
    if not destinations:
        return EXIT_OK
    try:
        lines = export.export(folder, destinations)
    except export.ExportError as err:
        raise UsageError(_masked(str(err), destinations)) from None
    for line in lines:
        print(_masked(line, destinations))
    return EXIT_OK


def _masked(text: str, destinations: dict[str, str]) -> str:
    """`text` with the password of any destination masked: a server's URL may hold one (http://user:pw@host)."""
    from sweep.store import redact

    for where in destinations.values():
        text = redact(text, where)
    return text
