"""The packed-training benchmark (issue 17): how many towers K a pack should have per batch size, and
how many more runs per hour packing gives on the project's grids.

    python -m benchmarks.packing.pack_bench          # about 40 minutes on 2 busy cores; results/bench/pack.md, pack.csv
    python -m benchmarks.packing.pack_bench --quick  # a few minutes; writes results/bench/quick/

In one run, on one machine (the grids first, then the K table):

1. K per batch size (benchmarks/packing/pack_k.py, one fresh process per repeat): model-images per second of
   a pack's training epoch for every batch size and K, in a packing worker's environment (the
   towers side by side), Ks in alternating order across repeats, best of the repeats; K is chosen as
   the smallest K within CHOSEN_WITHIN of the best. Beside it, a run alone in an unpacked worker's
   environment (every thread inside each op), the default it is weighed against. With it, the
   training step's FLOP/s as a share of a float32 matmul peak measured in this run (benchmarks/common/peaks.py).
2. Runs per hour on experiments/article.yaml, batch_sizes.yaml and causes.yaml, each scaled down
   (SCALE: one epoch, fewer images; `--epochs` and `--samples-per-class` set others; seeds, batch
   sizes, variants, records inside epochs and recalibration kept), each timed
   as a whole process from an empty results folder, configurations in alternating order across
   repeats, best of the repeats: (p) `sweep run GRID --workers 1 --pack 3` (packed); (u) the same
   with `--pack 1` (every run alone, the harness's default); (w) `--workers N --pack 1` on N cores
   (every run alone, one worker and one thread per core); (a) the plain Keras loop
   `python -m benchmarks.speed.keras_baseline` on the same runs, without the records inside epochs, the
   train-subset evaluation and the BatchNorm recalibration, which it does not do. A packing worker
   runs its towers side by side at one intra-op thread (sweep/train/devices.py), so p's per-epoch records
   are compared with w's, the runs alone at that thread count: every column of epochs.csv but
   epoch_seconds and samples_per_second, matched by run id and epoch.

Timings are benchmarks, not tests: the machine may be shared, so the load average is recorded before
every measurement.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import json
import tempfile
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import yaml

from benchmarks.common import machine, training
from benchmarks.common.peaks import effective_peaks, measure_peaks, train_flops_per_sample
from benchmarks.packing import pack_k
from benchmarks.packing.pack_tables import Row, summarize_grids, summarize_ks, write_outputs

RESULTS = machine.REPO / "results" / "bench"
EXPERIMENTS = machine.REPO / "experiments"
GRIDS = ("article", "batch_sizes", "causes")
CONFIGS = ("p", "u", "w", "a")
# What the full and the quick mode change in each grid's `base` (variants and grid axes are kept): one
# epoch of 12 training images per class, so that the whole benchmark fits in about 40 minutes on 2 busy
# cores. causes keeps its variant `data.samples_per_class: 25` ("half the data"), now the larger set.
SMALL = {"train.epochs": 1, "data.samples_per_class": 15}
SCALE = {
    "full": {"article": SMALL, "batch_sizes": SMALL, "causes": SMALL},
    "quick": {"batch_sizes": SMALL},
}
QUICK = {"grids": ("batch_sizes",), "batch_sizes": (8, 64), "ks": (1, 2, 4)}
# Left out of the plain loop's copy: it cannot record inside epochs and does not recalibrate BatchNorm.
NOT_PLAIN = ("eval_every_steps", "recalibrate_bn")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"one grid, batch sizes and Ks {QUICK}, one repeat")
    parser.add_argument("--out", type=Path, default=None, help="default results/bench (quick: results/bench/quick)")
    parser.add_argument("--repeats", type=int, default=None, help="alternating repeats (default 2; quick 1)")
    parser.add_argument("--grid-repeats", type=int, default=None, help="repeats of the grids (default --repeats)")
    parser.add_argument(
        "--grids", nargs="*", choices=GRIDS, default=None, help=f"default {' '.join(GRIDS)}; none: skip"
    )
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=None, help=f"default {pack_k.BATCH_SIZES}")
    parser.add_argument("--ks", type=int, nargs="*", default=None, help=f"default {pack_k.KS}; none: skip the K table")
    parser.add_argument("--epochs", type=int, default=None, help=f"each grid's train.epochs (default {SMALL})")
    parser.add_argument(
        "--samples-per-class", type=int, default=None, help="each grid's data.samples_per_class (default as above)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    mode = "quick" if args.quick else "full"
    out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    repeats = args.repeats or (1 if args.quick else 2)
    grid_repeats = args.grid_repeats or repeats
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{machine.describe()}; load average {machine.load_average():.2f} at start", flush=True)
    grids = args.grids if args.grids is not None else (QUICK["grids"] if args.quick else GRIDS)
    batch_sizes = args.batch_sizes or (QUICK["batch_sizes"] if args.quick else pack_k.BATCH_SIZES)
    ks = args.ks if args.ks is not None else (QUICK["ks"] if args.quick else pack_k.KS)
    with tempfile.TemporaryDirectory(prefix="bench-pack-") as tmp:
        folder = Path(tmp)
        env = machine.clean_env(folder / "cache")
        rows: list[Row] = [meta("started", started), meta("machine", machine.describe()), meta("mode", mode)]
        rows += [meta("repeats", repeats), meta("grid_repeats", grid_repeats)]
        rows.append(meta("load_average_start", round(machine.load_average(), 2)))
        scale = {name: SCALE[mode].get(name, SMALL) | overrides(args) for name in grids}
        rows += [meta(f"scale.{name}.{key}", v) for name in grids for key, v in scale[name].items()]
        scaled = {name: scale_grid(EXPERIMENTS / f"{name}.yaml", folder / name, scale[name]) for name in grids}
        if scaled:
            rows += time_grids(scaled, grid_repeats, env)
            write_outputs(rows, out)  # the grids' part, in case the K table fails
        if ks:
            rows += measure_ks(list(batch_sizes), list(ks), repeats, env, folder, {})
        rows.append(meta("load_average_end", round(machine.load_average(), 2)))
    paths = write_outputs(rows, out)
    print()
    print(paths["md"].read_text(), end="")
    print(f"\nwritten: {', '.join(str(p) for p in paths.values())}")
    return 0


def meta(metric: str, value: Any) -> Row:
    return {"section": "meta", "metric": metric, "value": value}


def measure_ks(
    batch_sizes: list[int], ks: list[int], repeats: int, env: dict[str, str], folder: Path, data: dict[str, int]
) -> list[Row]:
    """Part 1: the pack_k process once per repeat (Ks reversed on odd repeats), the matmul peak, the rows."""
    from sweep.train import data as data_module
    from sweep.train import devices

    probe_data = {"samples_per_class": pack_k.SAMPLES_PER_CLASS, **data}
    spec = pack_k.specs_for(batch_sizes[0], 1, probe_data, folder)[0]
    data_module.raw_arrays(spec.point.data, Path(env["BATCHSWEEP_CACHE"]))  # no measurement pays for the render
    # As `sweep run --workers 1`'s worker: packing (towers side by side), and unpacked (the default)
    packing = devices.worker_environment(env, threads=machine.cores(), towers=True)
    unpacked = devices.worker_environment(env, threads=machine.cores())
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in data.items()]
    measured: list[dict[str, Any]] = []
    alone: list[dict[str, Any]] = []
    for repeat in range(repeats):
        for what, worker_env, towers, found in (("K table", packing, ks, measured), ("alone", unpacked, [1], alone)):
            load = machine.load_average()
            command = machine.python_module(
                "benchmarks.packing.pack_k",
                "--batch-sizes",
                *map(str, batch_sizes),
                "--ks",
                *map(str, towers),
                "--folder",
                str(folder / "pack_k"),
                *flags,
                *(["--reverse"] if repeat % 2 else []),
            )
            finished = machine.timed(command, worker_env)
            results = json.loads(finished.stdout.strip().splitlines()[-1])
            found += [{**result, "repeat": repeat + 1, "load_average": load} for result in results]
            print(f"{what}, repeat {repeat + 1}: {finished.seconds:.0f} s (load average {load:.2f})", flush=True)
    peak = effective_peaks(measure_peaks([], env))[machine.cores()]
    flops = train_flops_per_sample(spec.point.data.image_size, spec.point.data.classes or 120, spec.point.model.width)
    return summarize_ks(measured, peak, flops, alone)


def overrides(args: argparse.Namespace) -> dict[str, int]:
    """--epochs and --samples-per-class, where given: the grids at a length closer to the real one."""
    given = {"train.epochs": args.epochs, "data.samples_per_class": args.samples_per_class}
    return {key: value for key, value in given.items() if value is not None}


def scale_grid(source: Path, folder: Path, scale: dict[str, Any]) -> tuple[Path, Path]:
    """Scaled copies of a grid file: (the harness's, the plain loop's without NOT_PLAIN)."""
    text = yaml.safe_load(source.read_text())
    for key, value in scale.items():
        section, field = key.split(".")
        text.setdefault("base", {}).setdefault(section, {})[field] = value
    folder.mkdir(parents=True, exist_ok=True)
    harness = folder / source.name
    harness.write_text(yaml.safe_dump(text, sort_keys=False))
    train = text["base"].get("train", {})
    text["base"]["train"] = {k: v for k, v in train.items() if k not in NOT_PLAIN}
    plain = folder / f"plain_{source.name}"
    plain.write_text(yaml.safe_dump(text, sort_keys=False))
    return harness, plain


PACKED = 3  # (p)'s --pack: the grids' seeds per point (packing is off by default, sweep.train.pack.PACK_SIZES)


def configurations(harness: Path, plain: Path, folder: Path) -> dict[str, training.Configuration]:
    """(p), (u), (w) and (a) of one scaled grid, each writing into `folder`."""
    unpacked = training.harness("u", harness, folder, workers=1)
    packed = training.harness("p", harness, folder, workers=1)
    per_core = training.harness("w", harness, folder, workers=machine.cores())
    return {
        "p": replace(packed, command=(*packed.command, "--pack", str(PACKED))),
        "u": replace(unpacked, command=(*unpacked.command, "--pack", "1")),
        "w": replace(per_core, command=(*per_core.command, "--pack", "1")),
        "a": training.baseline(plain, folder),
    }


def time_grids(scaled: dict[str, tuple[Path, Path]], repeats: int, env: dict[str, str]) -> list[Row]:
    """Part 2: every grid's configurations, in alternating order across repeats; then the records check."""
    from sweep.config import load_grid
    from sweep.config.plan import plan

    timed: list[dict[str, Any]] = []
    for repeat in range(repeats):
        for name, (harness, plain) in scaled.items():
            configs = configurations(harness, plain, harness.parent)
            for config in CONFIGS if repeat % 2 == 0 else reversed(CONFIGS):
                load = machine.load_average()
                attempt = training.time_once(configs[config], env, harness.parent)
                runs = len({row["run_id"] for row in attempt.epochs})
                timed.append(
                    {"grid": name, "config": config, "repeat": repeat + 1, "seconds": attempt.seconds, "runs": runs}
                )
                timed[-1]["load_average"] = load
                print(f"{name} ({config}): {attempt.seconds:.1f} s, {runs} runs (load {load:.2f} before)", flush=True)
    planned = {name: len(plan(load_grid(harness))) for name, (harness, _) in scaled.items()}
    checks = {name: compare_records(harness.parent) for name, (harness, _) in scaled.items()}
    return summarize_grids(timed, planned, checks)


def compare_records(folder: Path) -> dict[str, Any]:
    """p's and w's last epochs.csv (both at one intra-op thread per run): records equal in every column
    but the timings, matched by run and epoch; and the pack sizes p's runs trained in (runs.csv).
    """
    import pandas as pd

    timing = ["epoch_seconds", "samples_per_second"]
    packed = pd.read_csv(training.results_folder(folder, "p") / "epochs.csv").drop(columns=timing)
    alone = pd.read_csv(training.results_folder(folder, "w") / "epochs.csv").drop(columns=timing)
    keys = ["run_id", "epoch"]
    both = packed.merge(alone, on=keys, how="outer", suffixes=("_p", "_w"), indicator=True)
    equal = both["_merge"] == "both"
    differing: dict[str, int] = {}
    for column in (c for c in packed.columns if c not in keys):
        if column not in alone.columns:
            equal &= False
            continue
        p, w = both[f"{column}_p"], both[f"{column}_w"]
        same = (p == w) | (p.isna() & w.isna())
        equal &= same
        differing |= {column: int((~same).sum())} if not same.all() else {}
    sizes = pd.read_csv(training.results_folder(folder, "p") / "runs.csv")["pack_size"].value_counts().sort_index()
    return {
        "records_equal": int(equal.sum()),
        "records_total": len(both),
        "differing_columns": ", ".join(f"{c} ({n})" for c, n in differing.items()) or "none",
        "pack_sizes": ", ".join(f"K={int(size)}: {int(n)} runs" for size, n in sizes.items()),
    }


if __name__ == "__main__":
    raise SystemExit(main())
