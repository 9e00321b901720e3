"""The lever experiments of docs/levers.md: small standalone trainings, each in a fresh process, with
the harness's code unedited and one thing changed.

    python -m benchmarks.costs.levers [--repeats 2] [--out results/bench]   # about 15 minutes on 2 cores

Each probe (`python -m benchmarks.common.probes lever SETTINGS`) trains the bench model as sweep/train/trainer.py
does, at a given thread count; every probe runs `--repeats` times in alternating order. Writes
levers.csv (one row per probe, repeat and run) and levers.md (each setting against its reference:
wall and CPU speed ratios, and whether every per-epoch number is the same).
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import json
import math
import statistics
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from benchmarks.common import machine
from benchmarks.common.probes import LEVER_DATA
from benchmarks.speed.bench_outputs import write_csv
from benchmarks.speed.bench_tables import COMPARED, Row

RESULTS = machine.REPO / "results" / "bench"


@dataclass(frozen=True)
class Lever:
    """One probe: the lever it tests, its settings (benchmarks.common.probes.lever), the thread count it
    trains with (0: every core), and the label of the probe it is compared with ("": none).
    """

    lever: str
    label: str
    settings: dict[str, Any] = field(hash=False)
    threads: int
    reference: str = ""


def _ref(batch: int, threads: str = "1 thread") -> str:
    return f"batch {batch}, {threads} (harness settings)"


LEVERS = [
    *[Lever("reference", _ref(b), {"batch": b}, 1) for b in (8, 32, 128)],
    *[Lever("reference", _ref(b, "all cores"), {"batch": b}, 0) for b in (8, 128)],
    Lever("steps_per_execution", "batch 8, steps_per_execution 16", {"batch": 8, "spe": 16}, 1, _ref(8)),
    Lever("steps_per_execution", "batch 32, steps_per_execution 8", {"batch": 32, "spe": 8}, 1, _ref(32)),
    Lever("feed", "batch 8, numpy arrays to fit (--feed numpy)", {"batch": 8, "feed": "numpy"}, 1, _ref(8)),
    Lever("feed", "batch 8, tf.data without prefetch", {"batch": 8, "feed": "tfdata_plain"}, 1, _ref(8)),
    Lever("determinism", "batch 8, op determinism off", {"batch": 8, "determinism": False}, 1, _ref(8)),
    Lever("determinism", "batch 128, op determinism off", {"batch": 128, "determinism": False}, 1, _ref(128)),
    # Keras turns jit_compile=True into False while op determinism is on (trainer.model_supports_jit),
    # so XLA is measured with determinism off, against determinism off
    Lever(
        "jit_compile",
        "batch 8, determinism off, jit_compile true",
        {"batch": 8, "determinism": False, "jit": True},
        1,
        "batch 8, op determinism off",
    ),
    Lever(
        "jit_compile",
        "batch 128, determinism off, jit_compile true",
        {"batch": 128, "determinism": False, "jit": True},
        1,
        "batch 128, op determinism off",
    ),
    Lever("threads", "batch 8, 1 thread against all cores", {"batch": 8}, 1, _ref(8, "all cores")),
    Lever("threads", "batch 128, 1 thread against all cores", {"batch": 128}, 1, _ref(128, "all cores")),
    Lever("startup", "2 runs, a fresh model per run (harness)", {"batch": 32, "runs": 2, "first_batch": True}, 0),
    Lever(
        "startup",
        "2 runs, the compiled model reused",
        {"batch": 32, "runs": 2, "first_batch": True, "reuse": True},
        0,
        "2 runs, a fresh model per run (harness)",
    ),
]


def run_probe(lever: Lever, env: dict[str, str], epochs: int) -> dict[str, Any]:
    """The probe in a fresh process with its thread count set as a worker's would be."""
    from sweep.train.devices import worker_environment

    threads = lever.threads or machine.cores()
    _, result = machine.probe(
        "lever", [json.dumps({"epochs": epochs, **lever.settings})], worker_environment(env, threads=threads)
    )
    return result


def run_levers(env: dict[str, str], repeats: int, epochs: int = 2, levers: list[Lever] = LEVERS) -> list[Row]:
    """Every probe `repeats` times in alternating order; one row per probe, repeat and run."""
    rows = []
    for repeat in range(repeats):
        for lever in levers if repeat % 2 == 0 else levers[::-1]:
            result = run_probe(lever, env, epochs)
            rows += [_lever_row(lever, repeat, i, result, run) for i, run in enumerate(result["runs"], start=1)]
            print(
                f"lever {lever.lever}: {lever.label}: {rows[-1]['samples_per_second']:.0f} samples/s, "
                f"run {rows[-1]['run_seconds']:.1f} s",
                flush=True,
            )
    return rows


def _lever_row(lever: Lever, repeat: int, run_in_process: int, result: dict[str, Any], run: dict[str, Any]) -> Row:
    later = [e for e in run["epochs"] if e["epoch"] > 1] or run["epochs"]  # epoch 1 includes tracing

    def median(key: str) -> float:
        return statistics.median(e[key] for e in later)

    return {
        "lever": lever.lever,
        "label": lever.label,
        "reference": lever.reference,
        "repeat": repeat,
        "run_in_process": run_in_process,
        "batch": lever.settings["batch"],
        "threads": lever.threads or machine.cores(),
        "jit_compile": run["jit_compile"],
        "import_tf": result["import_tf"],
        "to_first_step": run["first_step"] - run["start"],
        "run_seconds": run["end"] - run["start"],
        "samples_per_second": median("samples_per_second"),
        "fit_seconds": median("fit_seconds"),
        "fit_cpu_seconds": median("fit_cpu_seconds"),
        # epochs 2+: epoch 1's first evaluation also traces the test function
        "train_eval_seconds": median("train_eval_seconds"),
        "val_seconds": median("val_seconds"),
        "epoch1_train_eval_seconds": run["epochs"][0]["train_eval_seconds"],
        "numbers": json.dumps([{k: e[k] for k in COMPARED} for e in run["epochs"]]),
    }


def levers_markdown(rows: list[Row], levers: list[Lever] = LEVERS) -> str:
    """Per probe: best over repeats, and its ratio to its reference probe; then evaluation cost and start-up."""
    best: dict[tuple[str, int], Row] = {}
    cpu: dict[tuple[str, int], float] = {}  # least CPU seconds per epoch over repeats
    for r in rows:
        key = (r["label"], r["run_in_process"])
        if key not in best or r["samples_per_second"] > best[key]["samples_per_second"]:
            best[key] = r
        cpu[key] = min(cpu.get(key, math.inf), float(r["fit_cpu_seconds"]))
    return "\n".join(_ratio_table(best, cpu, levers) + _evaluation_table(best, levers) + _startup_table(rows))


def _ratio_table(best: dict[tuple[str, int], Row], cpu: dict[tuple[str, int], float], levers: list[Lever]) -> list[str]:
    lines = [
        (
            "Speed ratios: the setting's over its reference's (above 1 = faster), from wall time (samples/s, best "
            "of repeats) and from the process's CPU seconds per epoch (least over repeats; less sensitive to other "
            "load; meaningful for same-thread comparisons only)."
        ),
        "",
        (
            "| lever | setting | samples/s (best of repeats) | wall speed ratio | CPU speed ratio | "
            "same numbers as reference |"
        ),
        "|---|---|---|---|---|---|",
    ]
    for lever in levers:
        if lever.lever in ("reference", "startup"):
            continue
        r, ref = best[(lever.label, 1)], best[(lever.reference, 1)]
        lines.append(
            f"| {lever.lever} | {lever.label} | {r['samples_per_second']:.0f} (reference "
            f"{ref['samples_per_second']:.0f}) | {r['samples_per_second'] / ref['samples_per_second']:.2f}x | "
            f"{cpu[(lever.reference, 1)] / cpu[(lever.label, 1)]:.2f}x | "
            f"{'yes' if r['numbers'] == ref['numbers'] else 'no'} |"
        )
    return lines


def _evaluation_table(best: dict[tuple[str, int], Row], levers: list[Lever]) -> list[str]:
    lines = [
        "",
        (
            "| reference | fit s per epoch | train-subset evaluation s | validation s | "
            "train-subset evaluation, share of the epoch |"
        ),
        "|---|---|---|---|---|",
    ]
    for lever in levers:
        if lever.lever == "reference":
            r = best[(lever.label, 1)]
            total = r["fit_seconds"] + r["train_eval_seconds"] + r["val_seconds"]
            lines.append(
                f"| {lever.label} | {r['fit_seconds']:.2f} | {r['train_eval_seconds']:.2f} | "
                f"{r['val_seconds']:.2f} | {r['train_eval_seconds'] / total:.1%} |"
            )
    return lines


def _startup_table(rows: list[Row]) -> list[str]:
    lines = [
        "",
        (
            "| start-up probe | repeat | process start -> TensorFlow imported (s) | run | "
            "run start -> first step done (s) | whole run (s) | same numbers as run 1 |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["lever"] == "startup":
            first = next(
                x for x in rows if (x["label"], x["repeat"], x["run_in_process"]) == (r["label"], r["repeat"], 1)
            )
            lines.append(
                f"| {r['label']} | {r['repeat'] + 1} | {r['import_tf']:.1f} | {r['run_in_process']} | "
                f"{r['to_first_step']:.2f} | {r['run_seconds']:.1f} | "
                f"{'yes' if r['numbers'] == first['numbers'] else 'no'} |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=1, help="repeats of each probe (alternating order)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write levers.csv and levers.md")
    args = parser.parse_args(argv)
    print(f"{machine.describe()}; load average {machine.load_average():.2f} at start", flush=True)
    with tempfile.TemporaryDirectory(prefix="levers-") as tmp:
        from sweep.config import DataConfig
        from sweep.train.data import raw_arrays

        raw_arrays(DataConfig(**LEVER_DATA), Path(tmp) / "cache")  # rendered once, before any probe is timed
        rows = run_levers(machine.clean_env(Path(tmp) / "cache"), args.repeats)
    write_csv(rows, args.out / "levers.csv", tuple(rows[0]))
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = f"Machine: {machine.describe()}. Run {when}.\n\n" + levers_markdown(rows)
    (args.out / "levers.md").write_text(text + "\n", encoding="utf-8")
    print(text)
    print(f"written: {args.out / 'levers.csv'}, {args.out / 'levers.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
