"""Command line of `sweep study` (a batch-size study of the user's own grid file: plan, quiet timing, train,
report; or, given a results folder, its report again) and `sweep advise` (a study's recommendation in a
few lines). The study's workflow is `sweep.run.study`, its plan `sweep.config.study_plan`, the numbers
`sweep.analysis.study` and `study_advice`, the report `sweep.report.study_report`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sweep.cli import arguments
from sweep.config import study_plan
from sweep.config.study_plan import StudySettings
from sweep.exits import EXIT_OK, UsageError

DEFAULTS = StudySettings()


def add_study_parsers(commands: argparse._SubParsersAction) -> None:
    _add_study(commands)
    _add_advise(commands)


def _add_study(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "study",
        help="which batch size for your model: a doubling ladder, an lr search per batch size, steps and "
        "seconds to target, the critical batch size, a recommendation (writes study.md and study.html)",
        description="Given GRID (your grid file: model.builder and data.loader, or a built-in dataset, and your "
        "training settings), plan the study: batch sizes on a doubling ladder, a learning-rate search per batch "
        "size at a held-out seed ranked on val_acc_recal, the best lr re-run at N seeds, records dense enough "
        "for steps to target, and a quiet timing of each batch size first (timing.csv). It says how many runs "
        "and roughly how long, then trains them as `run` does (workers, GPUs; safe to repeat and interrupt) "
        "and writes study.md, study.html and tables/study.csv into the results folder. The study as a grid "
        "file is <results>/grid.yaml: `sweep run` or `sweep slurm` it to train elsewhere. Given a results "
        "folder DIR, write its study report again from the CSVs (no TensorFlow). docs/study.md explains it.",
        epilog="examples:\n  sweep study experiments/own_model/my_grid.yaml --plan\n"
        "  sweep study experiments/own_model/my_grid.yaml --results results/study\n"
        "  sweep study my_grid.yaml train.epochs=10 --batch-sizes 16,256 --seeds 3 --lr 1e-4,1e-1\n"
        "  sweep study results/study --tolerance 0.02",
        formatter_class=arguments.Help,
    )
    p.add_argument("target", metavar="GRID|DIR", type=Path, help="your grid file (YAML), or a study's results folder")
    arguments.override_args(p)
    p.add_argument(
        "--batch-sizes",
        type=_pair(int),
        default=(DEFAULTS.smallest, DEFAULTS.largest),
        metavar="SMALLEST,LARGEST",
        help=f"the ladder's ends, LARGEST = SMALLEST doubled; at least {study_plan.MIN_RUNGS} batch sizes "
        f"(default {DEFAULTS.smallest},{DEFAULTS.largest})",
    )
    p.add_argument(
        "--seeds",
        type=arguments.positive,
        default=DEFAULTS.seeds,
        help=f"seeds per batch size (default {DEFAULTS.seeds})",
    )
    p.add_argument(
        "--trials",
        type=arguments.positive,
        default=DEFAULTS.trials,
        help=f"lrs tried per batch size (default {DEFAULTS.trials})",
    )
    p.add_argument(
        "--lr",
        type=_pair(float),
        default=(DEFAULTS.lr_low, DEFAULTS.lr_high),
        metavar="LOW,HIGH",
        help=f"the range each search draws from, log scale (default {DEFAULTS.lr_low:g},{DEFAULTS.lr_high:g}); "
        "a best lr at its edge reaches a decade past it once",
    )
    p.add_argument(
        "--search-seed",
        type=arguments.non_negative,
        default=DEFAULTS.search_seed,
        help="the held-out seed the searches run at (default 100)",
    )
    p.add_argument(
        "--records-per-epoch",
        type=arguments.positive,
        default=DEFAULTS.records_per_epoch,
        help="records per epoch at the smallest batch size, for steps to target (default 8; a grid file that "
        "sets train.eval_every_steps keeps its own)",
    )
    p.add_argument(
        "--repeats", type=arguments.positive, default=3, help="quiet timed epochs per batch size (default 3)"
    )
    p.add_argument("--plan", action="store_true", help="time and plan, write <results>/grid.yaml, train nothing")
    p.add_argument(
        "--in-process",
        action="store_true",
        help="train in this process instead of worker processes (as `run --in-process`); for debugging and tests",
    )
    _advice_args(p)
    arguments.results_args(p)
    arguments.worker_args(p)
    p.set_defaults(handler=cmd_study)


def _add_advise(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "advise",
        help="a batch-size study's recommendation in a few lines (no TensorFlow)",
        description="Read the batch-size study in DIR (made by `sweep study`, or any results folder whose "
        "learning-rate search was re-run at two or more batch sizes) and print which batch size to train with "
        "and why, the fastest to target, the critical batch size and the predicted effect of more devices. "
        "Writes nothing.",
        epilog="examples:\n  sweep advise results/study\n"
        "  sweep advise results/study --tolerance 0.02 --predict-devices 4",
        formatter_class=arguments.Help,
    )
    p.add_argument("folder", metavar="DIR", type=Path, help="a results folder holding a study, e.g. results/study")
    _advice_args(p)
    p.set_defaults(handler=cmd_advise)


def _advice_args(p: argparse.ArgumentParser) -> None:
    from sweep.analysis.study import DEFAULT_DEVICES, DEFAULT_TOLERANCE

    p.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help="how far below the best result a batch size may read and still count as good "
        f"(default {DEFAULT_TOLERANCE:g})",
    )
    p.add_argument(
        "--predict-devices",
        type=arguments.positive,
        default=DEFAULT_DEVICES,
        metavar="G",
        help=f"predict G devices at the recommended per-device batch (default {DEFAULT_DEVICES})",
    )


def _pair(kind: type) -> object:
    def parse(text: str) -> tuple:
        parts = text.split(",")
        try:
            values = tuple(kind(p) for p in parts)
        except ValueError:
            values = ()
        if len(values) != 2 or not all(v > 0 for v in values):
            raise argparse.ArgumentTypeError(f"give two positive {kind.__name__}s as A,B, got {text!r}")
        return values

    return parse


# --- advise


def cmd_advise(args: argparse.Namespace) -> int:
    from sweep.analysis import study, study_advice
    from sweep.report.study_words import no_advice_words, terminal_lines

    _check_folder(args.folder)
    _check_tolerance(args)
    try:
        found = study.read(args.folder, args.tolerance, args.predict_devices)
    except study.NoStudy as err:
        raise UsageError(str(err)) from None
    advice = study_advice.advise(found)
    if advice is None:
        raise UsageError(f"{args.folder}: {no_advice_words(found)}")
    for line in terminal_lines(advice):
        print(line)
    return EXIT_OK


def _check_folder(folder: Path) -> None:
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such results folder")


def _check_tolerance(args: argparse.Namespace) -> None:
    if not 0 <= args.tolerance < 1:
        raise UsageError(f"--tolerance {args.tolerance:g}: must be at least 0 and below 1 (a difference of accuracy)")


# --- study


def cmd_study(args: argparse.Namespace) -> int:
    """A grid file: the study, from plan to report (`sweep.run.study`). A results folder: its report again."""
    from sweep.analysis.study import NoStudy
    from sweep.run import study

    _check_tolerance(args)
    try:
        if args.target.is_dir():
            if args.overrides:
                raise UsageError(
                    f"{' '.join(args.overrides)}: KEY=VALUE settings change a grid file's study; {args.target} is a "
                    "results folder, whose report is written from its runs as they are"
                )
            return _report(args.target, args.tolerance, args.predict_devices)
        settings = StudySettings(
            smallest=args.batch_sizes[0],
            largest=args.batch_sizes[1],
            seeds=args.seeds,
            trials=args.trials,
            lr_low=args.lr[0],
            lr_high=args.lr[1],
            search_seed=args.search_seed,
            records_per_epoch=args.records_per_epoch,
        )
        settings.ladder()  # a bad ladder answers before anything loads
        code, results = study.study(
            args.target, args.overrides, settings, arguments.options(args), repeats=args.repeats, plan_only=args.plan
        )
        if code or args.plan:
            return code
        return _report(results, args.tolerance, args.predict_devices)
    except NoStudy as err:
        raise UsageError(str(err)) from None


def _report(folder: Path, tolerance: float, devices: int) -> int:
    """Write the study report of the results folder `folder` from its CSVs; `NoStudy` when it holds none."""
    from sweep.report import study_report

    written = study_report.build(folder, tolerance, devices)
    for line in written.lines:
        print(line, flush=True)
    print(f"study report: {written.html} (and {written.markdown.name} beside it)", flush=True)
    return EXIT_OK
