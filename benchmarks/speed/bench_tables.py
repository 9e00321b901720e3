"""Every number of the benchmark as tidy rows (bench.csv: section, config, batch_size, metric, value,
unit), computed from what was measured; and how to look one up.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from benchmarks.common.training import Trained
from benchmarks.speed.commands import CommandTiming

CSV_COLUMNS = ("when", "machine", "mode", "section", "config", "batch_size", "metric", "value", "unit")
COMPARED = ("train_acc", "train_loss", "val_acc", "val_loss")  # what both (a) and the harness record
Row = dict[str, Any]


@dataclass(frozen=True)
class Stamp:
    """Which run of the benchmark a row belongs to."""

    when: str
    machine: str
    mode: str  # full, quick

    def row(self, section: str, config: str, metric: str, value: float, unit: str, batch_size: int | str = "") -> Row:
        return {
            "when": self.when,
            "machine": self.machine,
            "mode": self.mode,
            "section": section,
            "config": config,
            "batch_size": batch_size,
            "metric": metric,
            "value": value,
            "unit": unit,
        }


def summarize(
    stamp: Stamp,
    trained: list[Trained],
    peaks: dict[Any, float],
    flops_per_sample: float,
    commands: dict[str, CommandTiming],
    cache: dict[str, float],
    runs: int,
    measured: dict[Any, float] | None = None,
) -> list[Row]:
    """The rows, section by section: peaks, the model's FLOPs, wall times, throughput, agreement with
    (a), command timings and the dataset cache.
    """
    rows = _peak_rows(stamp, peaks, measured or {})
    rows.append(stamp.row("model", "train_step", "flops_per_sample", flops_per_sample, "FLOP"))
    base = next((t for t in trained if t.config == "a"), None)
    for t in trained:
        rows += _wall_rows(stamp, t, base, runs)
        rows += _throughput_rows(stamp, t, peaks, flops_per_sample)
        if base is not None and t.config != "a":
            rows += _agreement_rows(stamp, t.config, agreement(base.best.epochs, t.best.epochs))
    for name, timing in commands.items():
        rows.append(stamp.row("commands", name, "wall_seconds", timing.seconds, "s"))
        rows.append(stamp.row("commands", name, "tensorflow_imported", float(timing.tensorflow_imported), "bool"))
    rows += [stamp.row("cache", "glyphs120_default", metric, value, "s") for metric, value in cache.items()]
    return rows


def _peak_rows(stamp: Stamp, peaks: dict[Any, float], measured: dict[Any, float]) -> list[Row]:
    rows = []
    for threads, gflops in sorted(peaks.items(), key=str):
        rows.append(stamp.row("peak", f"matmul_{threads}_threads", "gflops", gflops, "GFLOP/s"))
        if threads in measured:
            rows.append(stamp.row("peak", f"matmul_{threads}_threads", "gflops_measured", measured[threads], "GFLOP/s"))
    return rows


def _wall_rows(stamp: Stamp, t: Trained, base: Trained | None, runs: int) -> list[Row]:
    best, config = t.best, t.config
    rows = [
        stamp.row("wall", config, "wall_seconds", best.seconds, "s"),
        stamp.row("wall", config, "runs", runs, "runs"),
        stamp.row("wall", config, "runs_per_hour", runs / best.seconds * 3600, "runs/h"),
        stamp.row("wall", config, "workers", best.workers, "processes"),
        stamp.row("wall", config, "threads_per_worker", best.threads, "threads"),
    ]
    if config == "a":
        rows.append(stamp.row("wall", config, "train_eval", float("--train-eval" in t.configuration.command), "bool"))
    if best.workers_phase_seconds is not None:
        rows.append(stamp.row("wall", config, "workers_phase_seconds", best.workers_phase_seconds, "s"))
    if best.run_seconds:
        rows.append(stamp.row("wall", config, "mean_run_seconds", statistics.mean(best.run_seconds), "s"))
    if base is not None and config != "a":
        rows.append(stamp.row("wall", config, "overhead_vs_a", best.seconds / base.best.seconds - 1, "fraction"))
        rows.append(stamp.row("wall", config, "speedup_vs_a", base.best.seconds / best.seconds, "x"))
    return rows


def _throughput_rows(stamp: Stamp, t: Trained, peaks: dict[Any, float], flops_per_sample: float) -> list[Row]:
    rows = []
    peak_key = "gpu" if t.configuration.on_gpu else t.best.threads
    for batch, sps in throughput(t.best.epochs).items():
        gflops = sps * flops_per_sample / 1e9
        rows.append(stamp.row("throughput", t.config, "samples_per_second", sps, "samples/s", batch))
        rows.append(stamp.row("throughput", t.config, "train_gflops", gflops, "GFLOP/s", batch))
        if peak_key in peaks:
            rows.append(stamp.row("throughput", t.config, "peak_share", gflops / peaks[peak_key], "fraction", batch))
    return rows


def _agreement_rows(stamp: Stamp, config: str, found: dict[str, float]) -> list[Row]:
    return [
        stamp.row(
            "agreement",
            config,
            f"max_abs_diff_{metric}" if metric in COMPARED else metric,
            value,
            "records" if metric in ("records", "expected") else "abs",
        )
        for metric, value in found.items()
    ]


def throughput(epochs: tuple[Row, ...] | list[Row]) -> dict[int, float]:
    """Median samples per second per batch size over epochs 2+ (epoch 1 includes tracing), else all epochs."""
    by_batch: dict[int, list[float]] = {}
    for later in (True, False):
        for row in epochs:
            if not later or float(row["epoch"]) > 1:
                by_batch.setdefault(int(row["batch_size"]), []).append(float(row["samples_per_second"]))
        if by_batch:
            break
    return {batch: statistics.median(values) for batch, values in sorted(by_batch.items())}


def agreement(reference: tuple[Row, ...] | list[Row], other: tuple[Row, ...] | list[Row]) -> dict[str, float]:
    """Max absolute difference per metric over the records both have (matched by run id and epoch),
    and how many records matched (`records`) out of the reference's (`expected`).
    """
    index = {(r["run_id"], float(r["epoch"])): r for r in other}
    keyed = [((r["run_id"], float(r["epoch"])), r) for r in reference]
    pairs = [(r, index[key]) for key, r in keyed if key in index]
    result = {m: max((abs(float(a[m]) - float(b[m])) for a, b in pairs), default=math.nan) for m in COMPARED}
    return {**result, "records": float(len(pairs)), "expected": float(len(reference))}


def value(rows: list[Row], section: str, config: str, metric: str, batch: int | str = "") -> float | None:
    """The value of one row, or None."""
    for r in rows:
        if (r["section"], r["config"], r["metric"], str(r["batch_size"])) == (section, config, metric, str(batch)):
            return float(r["value"])
    return None


def required(rows: list[Row], section: str, config: str, metric: str, batch: int | str = "") -> float:
    """The value of a row that is always written (a configuration's wall time, workers, threads)."""
    found = value(rows, section, config, metric, batch)
    if found is None:
        raise KeyError(f"no {section} {metric} of {config}")
    return found


def configs(rows: list[Row]) -> list[str]:
    """The trained configurations, in the order they were timed."""
    return list(dict.fromkeys(r["config"] for r in rows if r["section"] == "wall"))
