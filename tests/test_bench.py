"""The "Fast sweeps" benchmark's guarantees, on tiny data: the plain Keras baseline
(benchmarks/keras_baseline.py) computes exactly the harness's per-epoch numbers for the
same seed (the harness is faster, not different), and benchmarks/bench.py turns
measurements into its CSV, Markdown and figure. Numbers and files, never timings."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import REPO, TINY_GRID, run_cli, write_grid

from sweep.config import load_grid
from sweep.plan import plan

METRICS = ("train_acc", "train_loss", "val_acc", "val_loss", "train_eval_acc", "train_eval_loss")


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "benchmarks" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


# The harness's side, as a worker of `sweep run --workers 1` runs it: its own process, the worker's
# environment, sweep.train.Run for every planned run; prints one JSON object per record.
HARNESS_CODE = """\
import json, sys
from sweep.config import load_grid
from sweep.plan import plan
from sweep.train import Run
import keras
for spec in plan(load_grid(sys.argv[1])):
    for record in Run(spec).epochs():
        print(json.dumps({"run_id": spec.run_id, **record.to_dict()}))
    keras.backend.clear_session()
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The tiny grid (2 runs, 2 epochs) trained by the baseline script and by the harness's training
    code, each in a fresh process as the benchmark runs them (both at once: numbers do not depend on timing).
    Numbers do depend on TensorFlow's thread and device set-up, so neither runs in this test process,
    whose CPU is split into logical devices (conftest)."""
    from sweep import devices

    folder = tmp_path_factory.mktemp("bench")
    grid = write_grid(folder, TINY_GRID)
    out = folder / "baseline_epochs.csv"
    # The thread counts a worker of `sweep run --workers 1` gets, for both: TensorFlow's own default
    # (what the benchmark's baseline runs with) is the same on a plain machine, but not under every
    # container CPU quota, and the numbers depend on the thread count (docs/levers.md).
    env = devices.worker_environment(dict(os.environ), threads=devices.cpu_count())
    baseline = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "keras_baseline.py"), str(grid),
                                 "--out", str(out), "--train-eval"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    harness = subprocess.Popen([sys.executable, "-c", HARNESS_CODE, str(grid)], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    harness_out, harness_err = harness.communicate(timeout=600)
    _, baseline_err = baseline.communicate(timeout=600)
    assert baseline.returncode == 0, baseline_err[-3000:]
    assert harness.returncode == 0, harness_err[-3000:]
    records: dict[str, list[dict[str, Any]]] = {}
    for line in harness_out.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            records.setdefault(record["run_id"], []).append(record)
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    specs = {spec.run_id: spec for spec in plan(load_grid(grid))}
    return {"folder": folder, "grid": grid, "baseline": rows, "harness": records, "specs": specs}


def test_baseline_per_epoch_numbers_equal_the_harness(tiny: dict[str, Any]) -> None:
    baseline, harness, specs = tiny["baseline"], tiny["harness"], tiny["specs"]
    assert {r["run_id"] for r in baseline} == set(harness) == set(specs) and len(specs) == 2
    for run_id, records in harness.items():
        rows = [r for r in baseline if r["run_id"] == run_id]
        assert [float(r["epoch"]) for r in rows] == [rec["epoch"] for rec in records] == [1, 2]
        for row, rec in zip(rows, records):
            assert int(row["step"]) == rec["step"]
            assert int(row["batch_size"]) == specs[run_id].point.train.batch_size
            for metric in METRICS:  # exactly: same seed, same order, same ops, same threads
                assert float(row[metric]) == rec[metric], (run_id, rec["epoch"], metric)
            assert float(row["samples_per_second"]) > 0 and row["jit_compile"] == "False"


def test_keras_shuffle_feed_trains_the_same_runs_in_another_order(tiny: dict[str, Any], tf_replicas: None) -> None:
    baseline = _module("keras_baseline")
    run_id, records = next(iter(tiny["harness"].items()))
    rows = baseline.train_run(tiny["specs"][run_id], feed="keras")
    assert [r["epoch"] for r in rows] == [1, 2] and [r["step"] for r in rows] == [rec["step"] for rec in records]
    assert [r["train_acc"] for r in rows] != [rec["train_acc"] for rec in records]  # Keras's own shuffle


def test_reusing_the_compiled_model_changes_no_number(tiny: dict[str, Any], tf_replicas: None) -> None:
    """The lever behind docs/levers.md's start-up finding: fresh weights in a reused compiled model
    (no new tracing) give the numbers of a fresh model, across batch sizes (4 then 8)."""
    baseline = _module("keras_baseline")
    specs = list(tiny["specs"].values())
    fresh = [baseline.train_run(spec) for spec in specs]
    reused = [baseline.train_run(spec, reuse_model=True) for spec in specs]
    assert len(baseline._COMPILED) == 1  # one architecture and optimiser: the second run reuses the first's model
    numbers = [[{k: r[k] for k in METRICS[:4] + ("step",)} for r in rows] for rows in fresh]
    assert [[{k: r[k] for k in METRICS[:4] + ("step",)} for r in rows] for rows in reused] == numbers


def test_baseline_rejects_points_it_does_not_train(tmp_path: Path) -> None:
    grid = write_grid(tmp_path, TINY_GRID.replace("train: {epochs: 2, batch_size: 8}",
                                                  "train: {epochs: 2, batch_size: 8, gpus: 2}"))
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "keras_baseline.py"), str(grid),
                           "--out", str(tmp_path / "x.csv")], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0 and "train.gpus" in done.stderr and not (tmp_path / "x.csv").exists()


def test_bench_writes_its_tables_from_measurements(tiny: dict[str, Any], tmp_path: Path) -> None:
    bench = _module("bench")
    folder = tiny["folder"]
    epochs_a = bench.read_epochs("a", folder)
    specs = tiny["specs"]
    epochs_b = [{"config": "b", "run_id": run_id, "seed": specs[run_id].seed,
                 "batch_size": specs[run_id].point.train.batch_size,
                 **{k: v for k, v in rec.items() if k in bench.EPOCH_COLUMNS}}
                for run_id, records in tiny["harness"].items() for rec in records]
    trainings = [bench.Training("a", ["baseline"], workers=1, threads=2, seconds=[10.0], epochs=epochs_a,
                                run_seconds=bench.read_run_seconds("a", folder)),
                 bench.Training("b", ["run"], workers=1, threads=2, seconds=[10.4, 11.0], epochs=epochs_b),
                 bench.Training("d", ["run", "--workers", "2"], workers=2, threads=1, seconds=[5.0],
                                epochs=[dict(r, config="d") for r in epochs_b])]
    peaks = bench.effective_peaks({1: 60.0, 2: 40.0})
    assert peaks == {1: 60.0, 2: 60.0}  # 2 threads measured slower than 1 (a busy machine): 1 thread's counts
    assert bench.effective_peaks({"gpu": 9000.0}) == {"gpu": 9000.0}
    rows = bench.summarize(trainings, peaks, bench.train_flops_per_sample(12, 4),
                           {"plan": (0.4, False), "status": (1.2, False), "report": (2.0, False)},
                           {"first_build_seconds": 3.0, "second_load_seconds": 0.1}, runs=2,
                           mode="test", machine="test machine", when="now")
    paths = bench.write_outputs(rows, [r for t in trainings for r in t.epochs], tmp_path)

    with open(paths["csv"], newline="") as handle:
        table = list(csv.DictReader(handle))
    assert tuple(table[0]) == bench.CSV_COLUMNS
    sections = {r["section"] for r in table}
    assert {"peak", "model", "wall", "throughput", "agreement", "commands", "cache"} <= sections

    def value(section: str, config: str, metric: str, batch: str = "") -> float:
        (row,) = [r for r in table if (r["section"], r["config"], r["metric"], r["batch_size"]) == (section, config, metric, batch)]
        return float(row["value"])

    assert value("wall", "b", "overhead_vs_a") == pytest.approx(0.04)
    assert value("wall", "d", "speedup_vs_a") == pytest.approx(2.0)
    assert value("wall", "a", "runs_per_hour") == pytest.approx(720)
    assert value("wall", "a", "mean_run_seconds") > 0
    for config in ("b", "d"):  # the harness's records are the baseline's, number for number
        assert value("agreement", config, "records") == value("agreement", config, "expected") == 4
        for metric in bench.COMPARED:
            assert value("agreement", config, f"max_abs_diff_{metric}") == 0.0
    assert {r["batch_size"] for r in table if r["section"] == "throughput"} == {"4", "8"}
    share = value("throughput", "d", "peak_share", "8")
    assert share == pytest.approx(value("throughput", "d", "train_gflops", "8") / 60.0)

    md = paths["md"].read_text()
    assert "test machine" in md and "overhead +4.0%" in md and "speed-up 2.00x" in md
    assert "| (b) within 5% of (a) | +4.0% | yes |" in md
    assert paths["png"].stat().st_size > 1000
    with open(paths["epochs"], newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 12  # 3 configurations x 2 runs x 2 epochs


def test_training_step_flops_match_the_model() -> None:
    bench = _module("bench")
    # sweep/model.py: about 5.8 MFLOP per 32x32 image forward at 120 classes; a training step is 3x
    assert bench.train_flops_per_sample(32, 120) == 3 * 5_773_824


def test_synthetic_sweep_is_a_real_store_that_status_reads(tmp_path: Path) -> None:
    bench = _module("bench")
    grid_text = bench.SYNTHETIC_GRID.replace("name: bench100", "name: bench4").replace(
        "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]", "[0, 1]").replace("[8, 16, 24, 32, 48, 64, 96, 128, 192, 256]", "[8, 64]")
    grid, results = bench.synthetic_sweep(tmp_path, grid_text)
    with open(results / "epochs.csv", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 4 * 3
    done = run_cli("status", str(grid), "--results", str(results), cwd=tmp_path)
    assert done.returncode == 0 and "4 runs: 4 done" in done.stdout
