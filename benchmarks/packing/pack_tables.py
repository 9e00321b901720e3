"""The packed-training benchmark's rows (pack.csv, tidy) and its Markdown (pack.md), from what
benchmarks/packing/pack_bench.py measured. Reads only the rows: no TensorFlow, no training.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import csv
from collections.abc import Sequence
from typing import Any

Row = dict[str, Any]
CSV_COLUMNS = ("section", "grid", "batch_size", "k", "config", "repeat", "metric", "value", "unit")
CHOSEN_WITHIN = 0.05  # K per batch size: the smallest K within 5% of the best K's throughput
TARGETS = {"p/u": 1.5, "p/a": 1.8}  # issue 17, on the batch_sizes grid
RATIOS = (*TARGETS, "p/w")  # and packing against one worker per core, which also fills the cores
TARGET_GRID = "batch_sizes"
LABELS = {
    "p": "(p) `sweep run GRID --workers 1 --pack 3` (packed)",
    "u": "(u) `sweep run GRID --workers 1 --pack 1` (every run alone, every thread inside each op: the default)",
    "w": "(w) `sweep run GRID --workers N --pack 1` on N cores (every run alone, a worker and a thread per core)",
    "a": "(a) plain Keras loop `python -m benchmarks.speed.keras_baseline GRID`",
}


def summarize_ks(
    measured: list[dict[str, Any]], peak_gflops: float, flops_per_sample: float, alone: Sequence[dict[str, Any]] = ()
) -> list[Row]:
    """Every measurement, the best per (batch size, K) with its FLOP share, and the K chosen per batch
    size; `alone`: a run in an unpacked worker (section k_alone), which the chosen K is also weighed against.
    """
    rows: list[Row] = [
        {"section": "meta", "metric": "matmul_peak", "value": round(peak_gflops, 1), "unit": "GFLOP/s"},
        {"section": "meta", "metric": "train_flops_per_sample", "value": round(flops_per_sample), "unit": "FLOP"},
        {"section": "meta", "metric": "timed_images", "value": measured[0]["images"] if measured else None},
    ]
    best: dict[tuple[int, int], float] = {}
    for m in measured:
        where = {"section": "k_table", "batch_size": m["batch_size"], "k": m["k"], "repeat": m["repeat"]}
        rows.append({**where, "metric": "model_images_per_second", "value": m["model_images_per_second"]})
        rows.append({**where, "metric": "load_average", "value": m["load_average"]})
        key = (m["batch_size"], m["k"])
        best[key] = max(best.get(key, 0.0), m["model_images_per_second"])
    for (batch, k), rate in sorted(best.items()):
        where = {"section": "k_table", "batch_size": batch, "k": k, "repeat": "best"}
        rows.append({**where, "metric": "model_images_per_second", "value": round(rate, 1), "unit": "images/s"})
        share = rate * flops_per_sample / (peak_gflops * 1e9)
        rows.append({**where, "metric": "flop_share", "value": round(share, 4), "unit": "of matmul peak"})
    chosen_rates: dict[int, float] = {}  # per batch size, the chosen K's rate
    for batch in sorted({b for b, _ in best}):
        rates = {k: r for (b, k), r in best.items() if b == batch}
        chosen = _chosen(rates)
        chosen_rates[batch] = rates[chosen]
        rows.append(
            {"section": "k_chosen", "batch_size": batch, "metric": "best_k", "value": max(rates, key=rates.get)}
        )
        rows.append({"section": "k_chosen", "batch_size": batch, "metric": "chosen_k", "value": chosen})
        rows.append(
            {"section": "k_chosen", "batch_size": batch, "metric": "speedup_over_k1", "value": _ratio(rates, chosen)}
        )
    return rows + _alone_rows(alone, chosen_rates)


def _alone_rows(alone: Sequence[dict[str, Any]], chosen_rates: dict[int, float]) -> list[Row]:
    """The best of the unpacked worker's runs alone per batch size, and the chosen K's rate over it."""
    rows: list[Row] = []
    for batch in sorted({m["batch_size"] for m in alone}):
        rate = max(m["model_images_per_second"] for m in alone if m["batch_size"] == batch)
        rows.append(
            {"section": "k_alone", "batch_size": batch, "k": 1, "repeat": "best"}
            | {"metric": "model_images_per_second", "value": round(rate, 1), "unit": "images/s"}
        )
        if batch in chosen_rates:
            ratio = round(chosen_rates[batch] / rate, 3)
            rows.append({"section": "k_chosen", "batch_size": batch, "metric": "speedup_over_alone", "value": ratio})
    return rows


def _chosen(rates: dict[int, float]) -> int:
    """The smallest K within CHOSEN_WITHIN of the best K's rate."""
    top = max(rates.values())
    return min(k for k, r in rates.items() if r >= (1 - CHOSEN_WITHIN) * top)


def _ratio(rates: dict[int, float], k: int) -> float | None:
    return round(rates[k] / rates[1], 3) if 1 in rates else None


def summarize_grids(timed: list[dict[str, Any]], planned: dict[str, int], checks: dict[str, dict]) -> list[Row]:
    """Every timing, the best per (grid, config) with runs per hour, the ratios, records and targets."""
    rows: list[Row] = []
    best: dict[tuple[str, str], float] = {}
    for t in timed:
        where = {"section": "grids", "grid": t["grid"], "config": t["config"], "repeat": t["repeat"]}
        rows.append({**where, "metric": "wall_seconds", "value": round(t["seconds"], 2), "unit": "s"})
        rows.append({**where, "metric": "load_average", "value": round(t["load_average"], 2)})
        rows.append({**where, "metric": "runs_trained", "value": t["runs"]})
        key = (t["grid"], t["config"])
        best[key] = min(best.get(key, float("inf")), t["seconds"])
    for (grid, config), seconds in sorted(best.items()):
        where = {"section": "grids", "grid": grid, "config": config, "repeat": "best"}
        rows.append({**where, "metric": "wall_seconds", "value": round(seconds, 2), "unit": "s"})
        rows.append({**where, "metric": "runs_per_hour", "value": round(planned[grid] * 3600 / seconds, 1)})
    for grid in planned:
        rows.append({"section": "grids", "grid": grid, "metric": "runs", "value": planned[grid]})
        for ratio in RATIOS:
            top, bottom = ratio.split("/")
            if (grid, top) in best and (grid, bottom) in best:
                value = round(best[(grid, bottom)] / best[(grid, top)], 3)
                rows.append(
                    {
                        "section": "ratios",
                        "grid": grid,
                        "config": ratio,
                        "metric": "runs_per_hour_ratio",
                        "value": value,
                    }
                )
                if grid == TARGET_GRID and ratio in TARGETS:
                    met = value >= TARGETS[ratio]
                    rows.append(
                        {
                            "section": "targets",
                            "grid": grid,
                            "config": ratio,
                            "metric": f">= {TARGETS[ratio]}x",
                            "value": "met" if met else "not met",
                        }
                    )
        for metric, value in checks.get(grid, {}).items():
            rows.append({"section": "records", "grid": grid, "config": "p vs w", "metric": metric, "value": value})
    return rows


def write_outputs(rows: list[Row], out: Path) -> dict[str, Path]:
    """pack.csv and pack.md into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / "pack.csv", "md": out / "pack.md"}
    with open(paths["csv"], "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows({c: row.get(c, "") for c in CSV_COLUMNS} for row in rows)
    paths["md"].write_text(markdown(rows), encoding="utf-8")
    return paths


def read_rows(path: Path) -> list[Row]:
    """pack.csv's rows back, numbers as numbers (to write pack.md again: `python -m benchmarks.packing.pack_tables`)."""
    with open(path, newline="", encoding="utf-8") as handle:
        return [{k: _typed(v) for k, v in row.items() if v != ""} for row in csv.DictReader(handle)]


def _typed(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _find(rows: list[Row], **match: Any) -> list[Row]:
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def _one(rows: list[Row], **match: Any) -> Any:
    found = _find(rows, **match)
    return found[0]["value"] if found else None


def markdown(rows: list[Row]) -> str:
    meta = {r["metric"]: r["value"] for r in _find(rows, section="meta")}
    scale = "; ".join(f"{k[len('scale.') :]}: {v}" for k, v in meta.items() if k.startswith("scale."))
    lines = [
        "# Packed training: K per batch size, runs per hour",
        "",
        f"`python -m benchmarks.packing.pack_bench{' --quick' if meta.get('mode') == 'quick' else ''}`, "
        f"{meta.get('mode')} mode, "
        f"started {meta.get('started')}; {meta.get('machine')}. Load average {meta.get('load_average_start')} at the "
        f"start, {meta.get('load_average_end')} at the end (before each measurement: pack.csv, `load_average`). "
        f"Repeats: {meta.get('repeats')} of the K table and {meta.get('grid_repeats')} of the grids, in alternating "
        "order; best of them shown.",
        "",
        *(_k_section(rows, meta) + [""] if _find(rows, section="k_table") else []),
        *(_grid_section(rows, scale) if _find(rows, section="grids") else []),
    ]
    return "\n".join(lines) + "\n"


def _k_section(rows: list[Row], meta: dict[str, Any]) -> list[str]:
    best = _find(rows, section="k_table", repeat="best", metric="model_images_per_second")
    ks = sorted({r["k"] for r in best})
    batches = sorted({r["batch_size"] for r in best})
    lines = [
        "## 1. Towers K per batch size",
        "",
        "Model-images per second of one training epoch of a pack of K runs in a packing worker (its towers "
        "side by side: one intra-op thread, an inter-op thread per core; benchmarks/packing/pack_k.py: default "
        "model, 120 classes, 32x32, 40 training images per class = 4,800, Adam lr 0.001, no records inside the "
        f"epoch; timed: a `fit` epoch of the first {meta.get('timed_images')} images of each tower's epoch order, "
        "after a short first epoch that traces), best of the repeats; in brackets the training step's "
        f"FLOP/s as a share of a float32 matmul peak of {meta.get('matmul_peak')} GFLOP/s measured in this run "
        f"({meta.get('train_flops_per_sample')} FLOP per image). **Rule: K = the smallest K within "
        f"{CHOSEN_WITHIN:.0%} of the best K's throughput.** Alone: one run in an unpacked worker (every thread "
        "inside each op), the default the chosen K is weighed against.",
        "",
        "| batch | alone | " + " | ".join(f"K={k}" for k in ks) + " | chosen K | chosen / K=1 | chosen / alone |",
        "|---" * (len(ks) + 5) + "|",
    ]
    for batch in batches:
        cells = []
        for k in ks:
            rate = _one(rows, section="k_table", repeat="best", metric="model_images_per_second", batch_size=batch, k=k)
            share = _one(rows, section="k_table", repeat="best", metric="flop_share", batch_size=batch, k=k)
            cells.append(f"{rate:,.0f} ({share:.1%})")
        chosen = _one(rows, section="k_chosen", batch_size=batch, metric="chosen_k")
        speedup = _one(rows, section="k_chosen", batch_size=batch, metric="speedup_over_k1")
        over_alone = _one(rows, section="k_chosen", batch_size=batch, metric="speedup_over_alone")
        alone = _one(rows, section="k_alone", batch_size=batch, metric="model_images_per_second")
        alone_cell = f"{alone:,.0f}" if alone is not None else "-"
        tail = f" | **{chosen}** | {speedup}x | {_cell(over_alone)}x |"
        lines.append(f"| {batch} | {alone_cell} | " + " | ".join(cells) + tail)
    chosen = {b: _one(rows, section="k_chosen", batch_size=b, metric="chosen_k") for b in batches}
    lines += ["", f"As `sweep.train.pack.PACK_SIZES`: `{chosen}`"]
    return lines


def _grid_section(rows: list[Row], scale: str) -> list[str]:
    grids = [r["grid"] for r in _find(rows, section="grids", metric="runs")]
    lines = [
        "## 2. Runs per hour on the grids",
        "",
        f"experiments/<grid>.yaml scaled down so that the benchmark fits its time, in `base` ({scale}); "
        "seeds, batch sizes, variants, records inside epochs (`eval_every_steps`) and BatchNorm recalibration "
        "kept. Each configuration timed as a whole process (TensorFlow import included) from an empty results "
        "folder. (a) trains the same runs (model, data, seeds, epochs, data order) but without the harness's "
        "extra evaluations: no records inside epochs, no train-subset evaluation, no recalibration (its copy of "
        "the grid leaves out `eval_every_steps` and `recalibrate_bn`), and no store, export or report. "
        "(p)'s worker runs its towers side by side at one intra-op thread each, so its records are compared "
        "with (w)'s, the runs alone at one thread; (u) runs at every thread, whose float rounding differs.",
        "",
        *[f"- {label}" for label in LABELS.values()],
        "",
        "| grid | runs | (p) s | (u) s | (w) s | (a) s | (p) runs/h | (u) runs/h | (w) runs/h | (a) runs/h "
        "| p/u | p/a | p/w | records p = w | p's pack sizes |",
        "|---" * 15 + "|",
    ]
    for grid in grids:
        seconds = [
            _one(rows, section="grids", grid=grid, config=c, repeat="best", metric="wall_seconds") for c in "puwa"
        ]
        per_hour = [
            _one(rows, section="grids", grid=grid, config=c, repeat="best", metric="runs_per_hour") for c in "puwa"
        ]
        ratios = [_one(rows, section="ratios", grid=grid, config=r) for r in RATIOS]
        equal = _one(rows, section="records", grid=grid, metric="records_equal")
        total = _one(rows, section="records", grid=grid, metric="records_total")
        sizes = _one(rows, section="records", grid=grid, metric="pack_sizes")
        cells = [grid, _one(rows, section="grids", grid=grid, metric="runs"), *seconds, *per_hour, *ratios]
        lines.append("| " + " | ".join(map(_cell, cells)) + f" | {equal}/{total} | {sizes} |")
    for grid in grids:
        differing = _one(rows, section="records", grid=grid, metric="differing_columns")
        if differing is not None:
            lines.append(f"- {grid}: columns where p's records differ from w's (records): {differing}")
    lines += ["", "Each repeat (wall seconds, load average before):", ""]
    for grid in grids:
        for config in "puwa":
            tries = _find(rows, section="grids", grid=grid, config=config, metric="wall_seconds")
            loads = _find(rows, section="grids", grid=grid, config=config, metric="load_average")
            shown = [
                f"{t['value']} s ({load['value']})"
                for t, load in zip(tries, loads, strict=False)
                if t["repeat"] != "best"
            ]
            lines.append(f"- {grid} ({config}): {', '.join(shown)}")
    lines += ["", "## Targets (issue 17, on the batch_sizes grid)", ""]
    for ratio, target in TARGETS.items():
        value = _one(rows, section="ratios", grid=TARGET_GRID, config=ratio)
        state = _one(rows, section="targets", grid=TARGET_GRID, config=ratio)
        lines.append(f"- {ratio} >= {target}x: {state or 'not measured'} (measured {_cell(value)}x)")
    return lines


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}" if value >= 10 else f"{value:.2f}"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    """pack.md again from a pack.csv, beside it."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.packing.pack_tables", description="pack.md again from a pack.csv, beside it."
    )
    parser.add_argument("csv", type=Path, help="a pack.csv, e.g. results/bench/pack.csv")
    source = parser.parse_args(argv).csv
    write_outputs(read_rows(source), source.parent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
