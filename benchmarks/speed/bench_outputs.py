"""What the benchmark writes from its rows: bench.csv, bench_epochs.csv, bench.md (the tables, with
the issue's targets) and bench.png (wall times and throughput).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from benchmarks.common.training import EPOCH_COLUMNS, label
from benchmarks.speed.bench_tables import COMPARED, CSV_COLUMNS, Row, configs, required, value
from benchmarks.speed.commands import REPORT_AGAIN

TARGETS = {"overhead_b": 0.05, "speedup_c": 1.7, "command_seconds": 1.5, "cache_seconds": 1.0}


def write_outputs(rows: list[Row], epochs: list[Row], out: Path) -> dict[str, Path]:
    """bench.csv, bench_epochs.csv, bench.md and bench.png into `out`."""
    paths = {
        "csv": out / "bench.csv",
        "epochs": out / "bench_epochs.csv",
        "md": out / "bench.md",
        "png": out / "bench.png",
    }
    write_csv(rows, paths["csv"])
    write_csv(epochs, paths["epochs"], EPOCH_COLUMNS)
    paths["md"].write_text(markdown(rows), encoding="utf-8")
    figure(rows, paths["png"])
    return paths


def write_csv(rows: list[Row], path: Path, columns: tuple[str, ...] = CSV_COLUMNS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def markdown(rows: list[Row]) -> str:
    """The tables: wall times, throughput per batch size, agreement and the issue's targets."""
    if not rows:
        return ""
    first = rows[0]
    lines = [f"Machine: {first['machine']}. Run {first['when']} ({first['mode']} mode).", ""]
    if value(rows, "wall", "a", "train_eval") == 1.0:
        lines[-1:] = ["", "(a) also evaluates the harness's train subset every epoch (--baseline-train-eval).", ""]
    lines += _wall_table(rows) + _time_split(rows) + _throughput_table(rows)
    lines += ["", "| target (issue) | measured | met |", "|---|---|---|"] + _target_lines(rows)
    return "\n".join(lines) + "\n"


def _wall_table(rows: list[Row]) -> list[str]:
    lines = ["| configuration | processes x threads | wall (s) | runs per hour | vs (a) |", "|---|---|---|---|---|"]
    for c in configs(rows):
        wall, rph = required(rows, "wall", c, "wall_seconds"), required(rows, "wall", c, "runs_per_hour")
        workers, threads = required(rows, "wall", c, "workers"), required(rows, "wall", c, "threads_per_worker")
        if c == "a":
            versus = "1.00x"
        elif c == "b":
            versus = f"overhead {value(rows, 'wall', c, 'overhead_vs_a'):+.1%}"
        else:
            versus = f"speed-up {value(rows, 'wall', c, 'speedup_vs_a'):.2f}x"
        lines.append(f"| {label(c)} | {workers:.0f} x {threads:.0f} | {wall:.1f} | {rph:.0f} | {versus} |")
    return lines


def _time_split(rows: list[Row]) -> list[str]:
    """Where the harness's wall time went, and the mean seconds per run of every configuration."""
    lines, phases = [], []
    for c in configs(rows):
        worked = value(rows, "wall", c, "workers_phase_seconds")
        if worked is not None:
            rest = required(rows, "wall", c, "wall_seconds") - worked
            phases.append(f"{c}: workers {worked:.0f} s, the rest (queueing, CSV export, report) {rest:.0f} s")
    if phases:
        lines += [
            "",
            'Harness wall time split (from `run`\'s own "trained N run(s) in S s", whole seconds): '
            + "; ".join(phases)
            + ".",
        ]
    per_run = [(c, value(rows, "wall", c, "mean_run_seconds")) for c in configs(rows)]
    if any(v is not None for _, v in per_run):
        lines += [
            "",
            "Mean seconds per run ((a): seeding to its last validation; harness: claimed to finished "
            "in the store): " + ", ".join(f"{c} {v:.1f} s" for c, v in per_run if v is not None) + ".",
        ]
    return lines


def _throughput_table(rows: list[Row]) -> list[str]:
    batches = sorted({int(r["batch_size"]) for r in rows if r["section"] == "throughput"})
    if not batches:
        return []
    names = configs(rows)
    lines = [
        "",
        (
            "Samples per second per batch size (median over epochs 2+; per training process), and the "
            "training step's achieved FLOP/s as a share of the matrix-multiply peak at that process's "
            "thread count:"
        ),
        "",
        "| batch size | " + " | ".join(f"{c} samples/s | {c} GFLOP/s (share of peak)" for c in names) + " |",
        "|---|" + "---|---|" * len(names),
    ]
    for b in batches:
        cells = []
        for c in names:
            sps, gf, share = (
                value(rows, "throughput", c, m, b) for m in ("samples_per_second", "train_gflops", "peak_share")
            )
            cells += [
                f"{sps:.0f}" if sps is not None else "-",
                f"{gf:.2f} ({share:.1%})" if gf is not None and share is not None else "-",
            ]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    peaks = [r for r in rows if r["section"] == "peak" and r["metric"] == "gflops"]
    flops = value(rows, "model", "train_step", "flops_per_sample")
    measured = ", ".join(f"{float(r['value']):.1f} GFLOP/s at {r['config'].split('_')[1]} thread(s)" for r in peaks)
    return lines + [
        "",
        "Matrix-multiply peak (numpy float32 1024x1024): "
        + measured
        + (
            f"; training step {flops / 1e6:.1f} MFLOP per image (3 x forward convolutions and dense)." if flops else "."
        ),
    ]


def _target(text: str, measured: str, ok: bool | None) -> str:
    return f"| {text} | {measured} | {'yes' if ok else ('no' if ok is not None else '-')} |"


def _target_lines(rows: list[Row]) -> list[str]:
    names = configs(rows)
    out = []
    overhead = value(rows, "wall", "b", "overhead_vs_a")
    if overhead is not None:
        out.append(_target("(b) within 5% of (a)", f"{overhead:+.1%}", overhead <= TARGETS["overhead_b"]))
    for c in names[2:]:
        speedup = value(rows, "wall", c, "speedup_vs_a")
        if speedup is not None:
            workers = value(rows, "wall", c, "workers")
            out.append(
                _target(
                    f"{label(c)} at least 1.7x faster than (a)",
                    f"{speedup:.2f}x ({workers:.0f} worker(s))",
                    speedup >= TARGETS["speedup_c"],
                )
            )
    out += _command_targets(rows) + _cache_targets(rows)
    out += [line for c in names[1:] if (line := _agreement_target(rows, c))]
    return out


def _command_targets(rows: list[Row]) -> list[str]:
    out = []
    for name in ("plan", "status", "report", REPORT_AGAIN):
        seconds = value(rows, "commands", name, "wall_seconds")
        if seconds is not None:
            tf = value(rows, "commands", name, "tensorflow_imported")
            out.append(
                _target(
                    f"`sweep {name}` on 100 runs under 1.5 s, no TensorFlow",
                    f"{seconds:.2f} s, TensorFlow {'imported' if tf else 'not imported'}",
                    seconds < TARGETS["command_seconds"] and not tf,
                )
            )
    return out


def _cache_targets(rows: list[Row]) -> list[str]:
    second = value(rows, "cache", "glyphs120_default", "second_load_seconds")
    if second is None:
        return []
    first = value(rows, "cache", "glyphs120_default", "first_build_seconds")
    process = value(rows, "cache", "glyphs120_default", "second_load_process_seconds")
    detail = ", ".join(
        text
        for text in (
            f"first build {first:.1f} s" if first is not None else "",
            f"whole process {process:.2f} s" if process is not None else "",
        )
        if text
    )
    return [
        _target(
            "default dataset: second build from the cache under 1 s",
            f"{second:.2f} s" + (f" ({detail})" if detail else ""),
            second < TARGETS["cache_seconds"],
        )
    ]


def _agreement_target(rows: list[Row], c: str) -> str | None:
    records, expected = value(rows, "agreement", c, "records"), value(rows, "agreement", c, "expected")
    if records is None:
        return None
    diffs = {m: value(rows, "agreement", c, f"max_abs_diff_{m}") for m in COMPARED}
    worst = max(v for v in diffs.values() if v is not None and not math.isnan(v)) if records else math.nan
    text = f"{records:.0f}/{expected:.0f} records; max abs diff " + ", ".join(f"{m} {v:.2g}" for m, v in diffs.items())
    threads, base_threads = value(rows, "wall", c, "threads_per_worker"), value(rows, "wall", "a", "threads_per_worker")
    if threads != base_threads and worst != 0.0:
        text += (
            f" ({threads:.0f} TensorFlow thread(s) per process against (a)'s {base_threads:.0f}: "
            f"CPU kernels split their sums by thread count)"
        )
    return _target(f"per-epoch numbers of {c} equal (a)'s, same seed", text, records == expected and worst == 0.0)


def figure(rows: list[Row], path: Path) -> None:
    """Left: wall time per configuration, with its ratio to (a); right: samples/s per batch size."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    _wall_bars(left, rows)
    _throughput_lines(right, rows)
    fig.suptitle(f"{rows[0]['machine']} - {rows[0]['when']} ({rows[0]['mode']})", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def _wall_bars(axes: Any, rows: list[Row]) -> None:
    names = configs(rows)
    walls = [required(rows, "wall", c, "wall_seconds") for c in names]
    colors = ["#777777", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    bars = axes.bar(
        [label(c).split(" (--")[0].replace(", ", ",\n") for c in names],
        walls,
        color=[colors[i % len(colors)] for i in range(len(names))],
    )
    for bar, wall in zip(bars, walls, strict=True):
        ratio = walls[0] / wall if names[0] == "a" else 1.0
        axes.annotate(
            f"{wall:.0f} s\n{ratio:.2f}x",
            (bar.get_x() + bar.get_width() / 2, wall),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    axes.set_ylabel("wall time of the whole grid (s)")
    axes.set_title("Wall time (lower is better)")
    axes.tick_params(axis="x", labelsize=7)
    axes.margins(y=0.2)


def _throughput_lines(axes: Any, rows: list[Row]) -> None:
    for c in configs(rows):
        points = sorted(
            (int(r["batch_size"]), float(r["value"]))
            for r in rows
            if (r["section"], r["config"], r["metric"]) == ("throughput", c, "samples_per_second")
        )
        if points:
            axes.plot(*zip(*points, strict=True), marker="o", label=label(c))
    axes.set_xscale("log", base=2)
    batches = sorted({int(r["batch_size"]) for r in rows if r["section"] == "throughput"})
    if batches:
        axes.set_xticks(batches, [str(b) for b in batches])
        axes.minorticks_off()
    axes.set_xlabel("batch size")
    axes.set_ylabel("samples per second per process (epochs 2+)")
    axes.set_title("Training throughput")
    axes.legend(fontsize=7)
