"""The command line's entry: `main` parses the arguments with every command's parser (in the order `sweep --help`
lists them), calls the command's handler, and maps errors and signals to exit codes: a usage error to 2 with one
line on stderr, Ctrl-C and SIGTERM to 128 + the signal, a full disk and a crash to 1 (a crash's traceback without
the store's password), a database out of reach past the outage bound to 7 with one line.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence

from sweep import __version__
from sweep.cli import arguments, cli_cluster, cli_export, cli_study, cli_sweep
from sweep.cli.cli_storage import storage_arg
from sweep.config import SEARCH_DOCS, ConfigError, field_docs
from sweep.exits import EXIT_FAILED, EXIT_OK, EXIT_STORE_UNREACHABLE, EXIT_USAGE, StoreUnreachable, UsageError
from sweep.train.usercode import UserCodeError


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:  # a bare `sweep`: what it can do, not an error
        parser.print_help()
        return EXIT_OK
    args = _parsed(parser, argv)
    previous = signal.signal(signal.SIGTERM, _stop)  # `kill`, Slurm's scancel, a container's stop: as Ctrl-C
    try:
        return _handled(args)
    finally:  # a caller of `main` in its own process (a test, a notebook) keeps its own handler
        if previous is not None:  # None: a handler installed from C, which Python cannot put back
            signal.signal(signal.SIGTERM, previous)


def _parsed(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The arguments, with KEY=VALUE overrides anywhere on the line (argparse takes a positional list only before
    the flags: `sweep run grid.yaml --results X seeds=[0]` would leave `seeds=[0]` over). Anything else left over
    is an error with the command's own usage.
    """
    args, extra = parser.parse_known_args(argv)
    if not extra:
        return args
    if hasattr(args, "overrides") and all("=" in word and not word.startswith("-") for word in extra):
        args.overrides = [*args.overrides, *extra]  # in the order typed: the positional ones came first
        return args
    args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    raise AssertionError("argparse's error exits")  # pragma: no cover


def _handled(args: argparse.Namespace) -> int:
    """The command's handler, its errors and signals mapped to exit codes."""
    try:
        return args.handler(args)
    except (ConfigError, UsageError, UserCodeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except StoreUnreachable as err:  # the database stayed away past the outage bound (its password masked)
        print(f"error: {err}", file=sys.stderr)
        return EXIT_STORE_UNREACHABLE
    except KeyboardInterrupt as err:
        print(f"\n{STOPPED}", file=sys.stderr)
        return 128 + (err.signum if isinstance(err, Stopped) else signal.SIGINT)
    except OSError as err:
        from sweep.store import DISK_FULL_ADVICE, is_disk_full

        if not is_disk_full(err):
            return _crashed(args)
        print(
            f"error: no space left on device writing {err.filename or 'the store'}; {DISK_FULL_ADVICE}", file=sys.stderr
        )
        return EXIT_FAILED
    except Exception:  # noqa: BLE001 - a bug or a driver error: its traceback, without the store's password
        return _crashed(args)


STOPPED = "stopped; run the same command again to resume where it stopped"


class Stopped(KeyboardInterrupt):
    """A signal that asks the command to stop (SIGTERM): handled as Ctrl-C is, exit code 128 + its number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, frame: object) -> None:
    raise Stopped(signum)


def _crashed(args: argparse.Namespace) -> int:
    import traceback

    from sweep.store import redact

    try:
        target = storage_arg(getattr(args, "storage", None))
    except UsageError:
        target = None
    print(redact(traceback.format_exc(), target), file=sys.stderr, end="")
    return EXIT_FAILED


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sweep",
        description="Batch-size experiment sweeps on TensorFlow/Keras.",
        epilog="Grid file keys (dotted paths usable in grid:):\n"
        + "\n".join(f"  {k:<26} {doc}" for k, doc in field_docs().items())
        + "\n\nOptional search: block (a learning-rate search for every grid point, then its best lr "
        "at every seed):\n" + "\n".join(f"  {k:<26} {doc}" for k, doc in SEARCH_DOCS.items()),
        formatter_class=arguments.Help,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s (batchsweep) {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        cli_sweep.add_plan_parser,
        cli_sweep.add_run_parser,
        cli_sweep.add_status_parser,
        cli_sweep.add_worker_parser,
        cli_cluster.add_slurm_parser,
        cli_sweep.add_time_parser,
        cli_sweep.add_report_parser,
        cli_study.add_study_parsers,
        cli_export.add_export_parser,
    ):
        add(commands)
    for command in commands.choices.values():  # its own usage for an error found after parsing (`_parsed`)
        command.set_defaults(command_parser=command)
    return parser
