"""`sweep study` of a grid file, from plan to report: the study's grid (the user's grid file with the study's
overrides, sweep/config/study_plan.py), a quiet timing of each batch size measured first (timing.csv), from
which the records are set and the study's size estimated, the plan said, the study written as
<results>/grid.yaml, and its runs trained as `run` trains them. The command line (sweep/cli/cli_study.py)
parses the flags, calls `study`, writes the study report (sweep/report/study_report.py) of the folder it
returns, and maps errors to exit codes. Every line for the user goes through a `Console`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from sweep import vocab
from sweep.config import GridFile, load_grid, resolved, study_plan
from sweep.config import timing_schema as schema
from sweep.config.plan import RunSpec, plan
from sweep.config.study_plan import StudySettings
from sweep.exits import EXIT_OK
from sweep.run import orchestrate, stores, workforce
from sweep.run.orchestrate import Console, Options
from sweep.train import devices

if TYPE_CHECKING:
    import pandas as pd

PRINTED = Console()  # lines printed as they come, as the command line's


def study(
    target: Path,
    overrides: Sequence[str],
    settings: StudySettings,
    options: Options,
    *,
    repeats: int,
    plan_only: bool,
    console: Console = PRINTED,
) -> tuple[int, Path]:
    """Plan the study of the grid file `target` (with the user's `overrides`), time it, write it as a grid file,
    and unless `plan_only` train it: the exit code and the study's results folder, whose report is the caller's.
    """
    grid, study_overrides = _study_grid(target, tuple(overrides), settings, options, repeats, console)
    results = _results(grid, options)
    written = resolved.write(results, grid, study_overrides)  # the study as a grid file: `sweep run` or `slurm` it
    if not plan_only:
        return orchestrate.run_sweep(grid, replace(options, report=None)).exit_code, results
    console.say(f"planned only; the study as a grid file: {written}")
    return EXIT_OK, results


def _study_grid(
    target: Path,
    user: tuple[str, ...],
    settings: StudySettings,
    options: Options,
    repeats: int,
    console: Console,
) -> tuple[GridFile, tuple[str, ...]]:
    """The study's grid: the user's grid file with the study's overrides (then the user's own), records set
    from the smallest batch size's steps per epoch in the quiet timing, which is measured first.
    """
    own = load_grid(target, study_plan.study_overrides(settings, None, None) + user)
    study_plan.check_grid(own)
    stop = study_plan.study_stopping(own.base.train.early_stopping, own.base.train.recalibrate_bn)
    user = (*user, stop.override())  # after the user's own: no run of the study stops on a raw metric
    name = f"{own.name}_study"
    first = load_grid(target, study_plan.study_overrides(settings, name, None) + user)
    timing = _quiet_timing(first, plan(first), options, repeats, console)
    batches = timing[study_plan.BATCH_KEY]
    study_plan.check_ladder(settings, int(timing[schema.TRAIN_SAMPLES].min()))
    steps = {int(b): int(s) for b, s in zip(batches, timing[schema.STEPS_PER_EPOCH], strict=True)}
    seconds = {int(b): float(s) for b, s in zip(batches, timing[schema.EPOCH_SECONDS_BEST], strict=True)}
    kept = first.base.train.eval_every_steps is not None  # the grid file sets its own records
    every = None if kept else study_plan.records_every(steps[settings.smallest], settings.records_per_epoch)
    overrides = study_plan.study_overrides(settings, name, every) + user
    grid = load_grid(target, overrides)
    specs = plan(grid)
    workers = options.workers or workforce.cpu_workers(specs, devices.cpu_count())  # as `run` will start them
    size = study_plan.estimate_seconds(specs, settings, seconds, steps, workers)
    _say_plan(grid, settings, every, size, console)
    console.say(f"{grid.name}: {stop.words()}")
    return grid, overrides


def _say_plan(
    grid: GridFile, settings: StudySettings, every: int | None, size: study_plan.Estimate, console: Console
) -> None:
    train = grid.base.train
    records = f"a record every {every} steps" if every else f"records every {train.eval_every_steps} steps (the grid's)"
    console.say(
        f"{grid.name}: batch sizes {', '.join(map(str, settings.ladder()))}; per batch size a learning-rate search "
        f"of {settings.trials} trials at seed {settings.search_seed} over [{settings.lr_low:g}, {settings.lr_high:g}] "
        f"({train.optimizer}, ranked on val_acc_recal), then its best lr at seeds 0-{settings.seeds - 1}, and the "
        f"untuned lr {train.lr:g} at the same seeds; {train.epochs} epochs a run, {records}"
    )
    console.say(f"{grid.name}: {size.words()}")


def _results(grid: GridFile, options: Options) -> Path:
    folder, _ = stores.locations(grid, options)
    return folder


def _quiet_timing(
    grid: GridFile, specs: list[RunSpec], options: Options, repeats: int, console: Console
) -> pd.DataFrame:
    """timing.csv's rows for the study's configurations, measuring (in this process) those it lacks."""
    import pandas as pd

    from sweep.train import backends, timing

    results = _results(grid, options)
    path = results / vocab.TIMING_CSV
    wanted = schema.configurations(specs)
    known = pd.read_csv(path) if path.is_file() else pd.DataFrame(columns=[schema.CONFIG])
    missing = [spec for key, spec in wanted.items() if key not in set(known[schema.CONFIG])]
    if missing:
        backends.check(grid.source, [s.point for s in missing])
        console.say(f"{grid.name}: timing one epoch of each of {len(missing)} batch size(s), quietly, before training")
        rows = timing.measure(missing, repeats, console.say)
        results.mkdir(parents=True, exist_ok=True)
        known = timing.merge(path, rows)
    return known[known[schema.CONFIG].isin(wanted)]
