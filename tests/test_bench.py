"""The "Fast sweeps" benchmark's guarantees, on tiny data: the plain Keras baseline computes exactly
the harness's per-epoch numbers for the same seed (the harness is faster, not different), and the
benchmark turns measurements into its CSV, Markdown and figure. Numbers and files, never timings.

In this process the CPU is split into logical devices (conftest), so the comparisons made here are
between two trainings in this process; the system tests compare fresh processes, as the benchmark runs them.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import TINY_GRID, write_grid

from benchmarks.common import machine, peaks, probes, synthetic, training
from benchmarks.costs import levers, recal_speed
from benchmarks.speed import bench_outputs, bench_tables, commands, keras_baseline, report_speed
from sweep.config import load_grid
from sweep.config.plan import RunSpec, plan
from sweep.train import devices
from sweep.train.session import Session
from sweep.train.trainer import Trainer

METRICS = ("train_acc", "train_loss", "val_acc", "val_loss", "train_eval_acc", "train_eval_loss")
NUMBERS = ("step", *METRICS[:4])
SMALL_SWEEP = """\
    name: bench4
    seeds: [0, 1]
    base:
      data: {samples_per_class: 30}
      train: {epochs: 3}
    grid:
      train.batch_size: [8, 64]
"""


@pytest.fixture(scope="module")
def specs(tmp_path_factory: pytest.TempPathFactory) -> list[RunSpec]:
    """The tiny grid's 2 runs (batch 4 and 8, 2 epochs)."""
    return plan(load_grid(write_grid(tmp_path_factory.mktemp("bench"), TINY_GRID)))


@pytest.fixture(scope="module")
def harness_records(specs: list[RunSpec]) -> dict[str, list[dict[str, Any]]]:
    """Each run as the harness's worker trains it (sweep.train.trainer.Trainer), by run id."""
    session = Session()  # one worker's
    return {spec.run_id: [record.to_dict() for record in Trainer.alone(spec, session).epochs()] for spec in specs}


@pytest.fixture(scope="module")
def baseline_rows(specs: list[RunSpec]) -> dict[str, list[dict[str, Any]]]:
    """Each run as the plain Keras loop trains it, every metric of the harness included, by run id."""
    return {spec.run_id: keras_baseline.train_run(spec, train_eval=True) for spec in specs}


def numbers(rows: list[dict[str, Any]], keys: tuple[str, ...] = NUMBERS) -> list[dict[str, Any]]:
    return [{k: row[k] for k in keys} for row in rows]


@pytest.mark.system  # the module's fixtures train the benchmark's runs twice (about 25 s)
def test_baseline_computes_the_harness_numbers(
    specs: list[RunSpec],
    baseline_rows: dict[str, list[dict[str, Any]]],
    harness_records: dict[str, list[dict[str, Any]]],
) -> None:
    for spec in specs:
        rows = baseline_rows[spec.run_id]
        assert [row["batch_size"] for row in rows] == [spec.point.train.batch_size] * 2
        assert [row["jit_compile"] for row in rows] == [False, False]
        # exactly: same seed, same order, same ops, same threads
        assert numbers(rows, ("epoch", *NUMBERS, *METRICS[4:])) == numbers(
            harness_records[spec.run_id], ("epoch", *NUMBERS, *METRICS[4:])
        )


@pytest.mark.system  # the module's fixtures train the benchmark's runs twice (about 25 s)
def test_reusing_the_compiled_model_changes_no_number(
    specs: list[RunSpec], baseline_rows: dict[str, list[dict[str, Any]]]
) -> None:
    """The lever behind docs/levers.md's start-up finding, with the harness's own reset: fresh weights
    in a reused compiled model (no new tracing) give the numbers of a fresh model, across batch sizes.
    """
    fresh = [numbers(baseline_rows[spec.run_id]) for spec in specs]
    keras_baseline._COMPILED.clear()
    reused = [numbers(keras_baseline.train_run(spec, reuse_model=True)) for spec in specs]
    assert len(keras_baseline._COMPILED) == 1  # one architecture and optimiser: the second run reused the first's
    assert reused == fresh and fresh[0] != fresh[1]


@pytest.mark.system  # the module's fixtures train the benchmark's runs twice (about 25 s)
def test_keras_shuffle_feed_trains_the_same_runs_in_another_order(
    specs: list[RunSpec], harness_records: dict[str, list[dict[str, Any]]]
) -> None:
    records = harness_records[specs[0].run_id]
    rows = keras_baseline.train_run(specs[0], feed="keras")
    assert [r["epoch"] for r in rows] == [1, 2] and [r["step"] for r in rows] == [rec["step"] for rec in records]
    assert [r["train_acc"] for r in rows] != [rec["train_acc"] for rec in records]  # Keras's own shuffle


@pytest.mark.unit
def test_baseline_rejects_points_it_does_not_train(tmp_path: Path) -> None:
    grid = write_grid(
        tmp_path, TINY_GRID.replace("train: {epochs: 2, batch_size: 8}", "train: {epochs: 2, batch_size: 8, gpus: 2}")
    )
    with pytest.raises(SystemExit, match="train.gpus"):
        keras_baseline.main([str(grid), "--out", str(tmp_path / "x.csv")])
    assert not (tmp_path / "x.csv").exists()


def _epochs(config: str, shift: float = 0.0) -> tuple[dict[str, Any], ...]:
    """Per-epoch records of 2 runs (batch 4 and 8) x 2 epochs, as a configuration reads them."""
    return tuple(
        {
            "config": config,
            "run_id": f"bs{batch}",
            "seed": 0,
            "batch_size": batch,
            "epoch": epoch,
            "step": epoch * 32 // batch,
            "train_acc": 0.1 * epoch + shift,
            "train_loss": 3.0 - epoch,
            "val_acc": 0.05 * epoch,
            "val_loss": 3.5 - epoch,
            "epoch_seconds": 1.0 / epoch,
            "samples_per_second": 32.0 * epoch * batch,
        }
        for batch in (4, 8)
        for epoch in (1, 2)
    )


def _trained(
    config: str,
    seconds: list[float],
    workers: int = 1,
    threads: int = 2,
    shift: float = 0.0,
    run_seconds: tuple[float, ...] = (),
) -> training.Trained:
    attempts = tuple(training.Attempt(s, workers, threads, _epochs(config, shift), run_seconds) for s in seconds)
    return training.Trained(training.Configuration(config, ("train",)), attempts)


@pytest.mark.unit
def test_bench_writes_its_tables_from_measurements(tmp_path: Path) -> None:
    trained = [
        _trained("a", [10.0], run_seconds=(4.0, 6.0)),
        _trained("b", [11.0, 10.4]),
        _trained("d", [5.0], workers=2, threads=1, shift=0.001),
    ]  # made-up records, for the tables' arithmetic; (d)'s real records: test_one_worker_per_core_...
    measured = {1: 60.0, 2: 40.0}
    effective = peaks.effective_peaks(measured)
    assert effective == {1: 60.0, 2: 60.0}  # 2 threads measured slower than 1 (a busy machine): 1 thread's counts
    assert peaks.effective_peaks({"gpu": 9000.0}) == {"gpu": 9000.0}
    stamp = bench_tables.Stamp("now", "test machine", "test")
    rows = bench_tables.summarize(
        stamp,
        trained,
        effective,
        peaks.train_flops_per_sample(12, 4),
        {
            "plan": commands.CommandTiming(0.4, False),
            "status": commands.CommandTiming(1.2, False),
            "report": commands.CommandTiming(2.0, True),
        },
        {"first_build_seconds": 3.0, "second_load_seconds": 0.1},
        runs=2,
        measured=measured,
    )
    paths = bench_outputs.write_outputs(rows, [r for t in trained for r in t.best.epochs], tmp_path)

    with open(paths["csv"], newline="") as handle:
        table = list(csv.DictReader(handle))
    assert tuple(table[0]) == bench_tables.CSV_COLUMNS
    assert {"peak", "model", "wall", "throughput", "agreement", "commands", "cache"} == {r["section"] for r in table}

    def value(section: str, config: str, metric: str, batch: str = "") -> float:
        (row,) = [
            r
            for r in table
            if (r["section"], r["config"], r["metric"], r["batch_size"]) == (section, config, metric, batch)
        ]
        return float(row["value"])

    assert value("wall", "b", "wall_seconds") == 10.4  # the best repeat
    assert value("wall", "b", "overhead_vs_a") == pytest.approx(0.04)
    assert value("wall", "d", "speedup_vs_a") == pytest.approx(2.0)
    assert value("wall", "a", "runs_per_hour") == pytest.approx(720)
    assert value("wall", "a", "mean_run_seconds") == 5.0
    assert value("agreement", "b", "records") == value("agreement", "b", "expected") == 4
    assert [value("agreement", "b", f"max_abs_diff_{m}") for m in bench_tables.COMPARED] == [0.0] * 4
    assert value("agreement", "d", "max_abs_diff_train_acc") == pytest.approx(0.001)
    assert value("throughput", "a", "samples_per_second", "8") == 512  # epoch 2 only: epoch 1 includes tracing
    share = value("throughput", "d", "peak_share", "8")
    assert share == pytest.approx(value("throughput", "d", "train_gflops", "8") / 60.0)

    md = paths["md"].read_text()
    assert "test machine" in md and "overhead +4.0%" in md and "speed-up 2.00x" in md
    assert "| (b) within 5% of (a) | +4.0% | yes |" in md
    assert "| `sweep report` on 100 runs under 1.5 s, no TensorFlow | 2.00 s, TensorFlow imported | no |" in md
    assert "| per-epoch numbers of b equal (a)'s, same seed | 4/4 records;" in md
    assert "per-epoch numbers of d equal (a)'s, same seed | 4/4 records; max abs diff train_acc 0.001" in md
    assert paths["png"].stat().st_size > 1000
    with open(paths["epochs"], newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 12  # 3 configurations x 2 runs x 2 epochs


@pytest.mark.unit
def test_configurations_alternate_and_one_worker_per_core_is_added_when_the_default_uses_fewer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []

    def time_once(configuration: training.Configuration, env: dict[str, str], folder: Path) -> training.Attempt:
        order.append(configuration.config)
        return training.Attempt(1.0, 1, 2, (), ())

    monkeypatch.setattr(training, "time_once", time_once)
    monkeypatch.setattr(machine, "cores", lambda: 2)
    grid = tmp_path / "grid.yaml"
    configurations = [
        training.baseline(grid, tmp_path),
        training.harness("b", grid, tmp_path, workers=1),
        training.harness("c", grid, tmp_path),
    ]
    one_per_core = training.harness("d", grid, tmp_path, workers=2)
    trained = training.time_all(configurations, 2, {}, tmp_path, one_per_core)
    assert order == ["a", "b", "c", "d", "d", "c", "b", "a"]  # (d) joins from the second round on
    assert [len(t.attempts) for t in trained] == [2, 2, 2, 2]
    assert configurations[0].command[1:3] == ("-m", "benchmarks.speed.keras_baseline")
    assert one_per_core.command[1:4] == ("-m", "sweep", "run") and one_per_core.command[-2:] == ("--workers", "2")


@pytest.mark.unit
def test_training_step_flops_match_the_model() -> None:
    # sweep/train/model.py: about 5.8 MFLOP per 32x32 image forward at 120 classes; a training step is 3x
    assert peaks.train_flops_per_sample(32, 120) == 3 * 5_773_824


@pytest.mark.unit
def test_matmul_peak_is_measured_in_process_at_a_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    import time
    from types import SimpleNamespace

    from threadpoolctl import threadpool_info

    n, flops = 64, 2 * 64**3  # a multiply and an add per term of each of the n x n results
    started = time.perf_counter()
    measured = peaks.matmul_peak(1, n=n, budget=0.01)
    wall = time.perf_counter() - started
    # its best multiply took no longer than the whole call; one core does well under 1 TFLOP/s in float32
    assert flops / wall / 1e9 <= measured < 1000

    # On a clock whose multiplies take these seconds: the budget (0.01 s) is spent after the 4th, the
    # best is the 2nd; every multiply runs with the 1 BLAS thread asked for
    took = iter([0.004, 0.002, 0.003, 0.005])
    now, calls, threads = [100.0], [0], []

    def clock() -> float:
        threads.append({p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"})
        calls[0] += 1
        if calls[0] % 2 == 0:  # the end of a multiply
            now[0] += next(took)
        return now[0]

    monkeypatch.setattr(peaks, "time", SimpleNamespace(perf_counter=clock))
    assert peaks.matmul_peak(1, n=n, budget=0.01) == pytest.approx(flops / 0.002 / 1e9)  # 0.262 GFLOP/s
    assert calls[0] == 8 and threads == [{1}] * 8


@pytest.mark.unit
def test_synthetic_sweep_is_a_real_store_that_status_reads(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from sweep.cli import main

    grid = write_grid(tmp_path, SMALL_SWEEP)
    results = synthetic.synthetic_sweep(tmp_path, grid)
    with open(results / "epochs.csv", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 4 * 3
    capsys.readouterr()
    assert main(["status", str(grid), "--results", str(results)]) == 0
    assert "4 runs: 4 done" in capsys.readouterr().out


def _lever_rows(label: str, reference: str, samples_per_second: float, cpu: float, train_acc: float) -> list[dict]:
    return [
        {
            "lever": "feed" if reference else "reference",
            "label": label,
            "reference": reference,
            "repeat": 0,
            "run_in_process": 1,
            "samples_per_second": samples_per_second,
            "fit_cpu_seconds": cpu,
            "fit_seconds": 2.0,
            "train_eval_seconds": 0.25,
            "val_seconds": 0.25,
            "numbers": f'[{{"train_acc": {train_acc}}}]',
        }
    ]


@pytest.mark.unit
def test_levers_markdown_compares_each_setting_with_its_reference() -> None:
    chosen = [
        levers.Lever("reference", "ref", {"batch": 8}, 1),
        levers.Lever("feed", "same", {"batch": 8, "feed": "numpy"}, 1, "ref"),
        levers.Lever("feed", "other", {"batch": 8, "feed": "tfdata_plain"}, 1, "ref"),
    ]
    rows = (
        _lever_rows("ref", "", 100.0, 4.0, 0.5)
        + _lever_rows("same", "ref", 150.0, 2.0, 0.5)
        + _lever_rows("other", "ref", 50.0, 8.0, 0.25)
    )
    text = levers.levers_markdown(rows, chosen)
    assert "| feed | same | 150 (reference 100) | 1.50x | 2.00x | yes |" in text
    assert "| feed | other | 50 (reference 100) | 0.50x | 0.50x | no |" in text
    assert "| ref | 2.00 | 0.25 | 0.25 | 10.0% |" in text


@pytest.mark.system
def test_baseline_and_sweep_run_agree_in_their_own_processes(tmp_path: Path) -> None:
    """(a) and (b) of the benchmark on the tiny grid, each a fresh process with the thread count a
    worker of `sweep run --workers 1` gets (numbers depend on it, docs/levers.md).
    """
    grid = write_grid(tmp_path, TINY_GRID)
    env = devices.worker_environment(
        machine.clean_env(Path(os.environ["BATCHSWEEP_CACHE"])), threads=devices.cpu_count()
    )
    a = training.time_once(training.baseline(grid, tmp_path, train_eval=True), env, tmp_path)
    b = training.time_once(training.harness("b", grid, tmp_path, workers=1), env, tmp_path)
    assert (a.workers, b.workers) == (1, 1) and len(a.run_seconds) == len(b.run_seconds) == 2
    found = bench_tables.agreement(a.epochs, b.epochs)
    assert found == {**{metric: 0.0 for metric in bench_tables.COMPARED}, "records": 4.0, "expected": 4.0}


@pytest.mark.system
def test_one_worker_per_core_computes_the_baseline_numbers_at_its_thread_count(tmp_path: Path) -> None:
    """(d) of the benchmark, `sweep run --workers <cores>` in its own processes, against (a) trained
    independently by the plain Keras loop in a fresh process with (d)'s thread count, cores // cores = 1
    (numbers depend on it, docs/levers.md).
    """
    cores = machine.cores()
    if cores < 2:
        pytest.skip("(d) is one worker per core: it needs 2 cores to differ from (b)")
    grid = write_grid(tmp_path, TINY_GRID)
    clean = machine.clean_env(Path(os.environ["BATCHSWEEP_CACHE"]))
    d = training.time_once(training.harness("d", grid, tmp_path, workers=cores), clean, tmp_path)
    a = training.time_once(
        training.baseline(grid, tmp_path, train_eval=True), devices.worker_environment(clean, threads=1), tmp_path
    )
    found = bench_tables.agreement(a.epochs, d.epochs)
    assert found == {**{metric: 0.0 for metric in bench_tables.COMPARED}, "records": 4.0, "expected": 4.0}
    runs = pd.read_csv(training.results_folder(tmp_path, "d") / "runs.csv")
    assert (d.workers, d.threads) == (cores, 1) and runs.threads.tolist() == [1, 1]  # as recorded by its workers


@pytest.mark.system
def test_commands_are_timed_without_tensorflow(tmp_path: Path) -> None:
    grid = write_grid(tmp_path, SMALL_SWEEP)
    timings = commands.time_commands(tmp_path / "commands", machine.clean_env(tmp_path / "cache"), grid, repeats=1)
    assert set(timings) == {"plan", "status", "report", commands.REPORT_AGAIN}
    assert all(t.seconds > 0 and not t.tensorflow_imported for t in timings.values())
    assert (tmp_path / "commands" / "report-0").is_dir()


@pytest.mark.system
def test_dataset_cache_is_built_then_loaded(tmp_path: Path) -> None:
    timings = commands.time_dataset_cache(machine.clean_env(tmp_path / "cache"), tmp_path / "default")
    assert set(timings) == {
        "first_build_seconds",
        "first_build_process_seconds",
        "second_load_seconds",
        "second_load_process_seconds",
    }
    assert timings["second_load_seconds"] < timings["first_build_seconds"]
    assert any((tmp_path / "default").iterdir())


@pytest.mark.system
def test_lever_probe_reuses_the_compiled_model_with_the_same_numbers(tmp_path: Path) -> None:
    tiny = levers.Lever(
        "startup",
        "tiny",
        {
            "batch": 8,
            "runs": 2,
            "first_batch": True,
            "reuse": True,
            "data": {"classes": 4, "samples_per_class": 10, "image_size": 12},
        },
        1,
    )
    rows = levers.run_levers(machine.clean_env(tmp_path / "cache"), repeats=1, epochs=2, levers=[tiny])
    assert [r["run_in_process"] for r in rows] == [1, 2]
    assert rows[0]["numbers"] == rows[1]["numbers"]  # the same seed, a reset model: the same training
    assert not any(r["jit_compile"] for r in rows) and rows[0]["import_tf"] > 0
    assert probes.LEVER_DATA == {"samples_per_class": 15, "image_size": 32}


@pytest.mark.integration
def test_report_speed_table_gives_medians_ratio_and_targets() -> None:
    rows = [
        {"code": code, "command": command, "repeat": repeat, "seconds": seconds}
        for code, scale in (("this checkout", 1.0), ("against", 2.0))
        for command, base in (("into an empty folder", 2.0), ("again, nothing changed", 0.3))
        for repeat, seconds in enumerate((base * scale, base * scale * 3, base * scale * 1.5))
    ]
    text = report_speed.markdown(rows, {"this checkout": Path("."), "against": Path("/old")}, "now", "2 cores")
    assert "| into an empty folder | 3.00 | 6.00 | 2.00x | under 3 s | no |" in text  # medians: 3.0 vs 6.0
    assert "| again, nothing changed | 0.45 | 0.90 | 2.00x | under 1.5 s | yes |" in text
    assert "3 repeat(s)" in text


@pytest.mark.system
def test_report_speed_times_both_checkouts_and_refuses_bad_input(tmp_path: Path) -> None:
    """A real run against this same checkout: every command timed for each, the CSV and Markdown written."""
    import subprocess
    import sys

    def bench(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "benchmarks.speed.report_speed", "--out", str(tmp_path), *args]
        return subprocess.run(command, cwd=machine.REPO, capture_output=True, text=True, check=False)

    done = bench("--repeats", "1", "--against", str(machine.REPO))
    assert done.returncode == 0, done.stderr
    rows = pd.read_csv(tmp_path / "report_speed.csv")
    assert sorted(zip(rows["code"], rows["command"], strict=True)) == sorted(
        (code, command) for code in ("this checkout", "against") for command in report_speed.COMMANDS
    )
    assert (rows["seconds"] > 0).all()
    assert "| into an empty folder |" in (tmp_path / "report_speed.md").read_text(encoding="utf-8")
    for bad, words in ((("--repeats", "0"), "--repeats must be at least 1"), (("--against", "/nowhere"), "/nowhere")):
        refused = bench(*bad)
        assert refused.returncode == 2 and words in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.unit
def test_records_table_says_when_runs_had_fewer_threads_than_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.costs import record_cost as bench

    monkeypatch.setattr(bench.devices, "cpu_count", lambda: 4)
    assert bench._threads(bench._parser().parse_args([])) == ""
    assert bench._threads(bench._parser().parse_args(["--threads", "4"])) == ""
    assert bench._threads(bench._parser().parse_args(["--threads", "1"])) == ", 1 thread per run"
    assert bench._threads(bench._parser().parse_args(["--threads", "2"])) == ", 2 threads per run"
    with pytest.raises(SystemExit) as refused:
        bench._parser().parse_args(["--threads", "0"])
    assert refused.value.code == 2


@pytest.mark.integration
def test_recal_speed_table_gives_medians_ratio_and_whether_the_bits_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [
        {"code": code, "repeat": repeat, "seconds": seconds, "digest": digest}
        for code, scale, digest in (("this checkout", 1.0, "a"), ("against", 2.0, "a"))
        for repeat, seconds in enumerate((0.2 * scale, 0.6 * scale, 0.3 * scale))
    ]
    checkouts = {"this checkout": Path("."), "against": Path("/old")}
    text = recal_speed.markdown(rows, checkouts, "now")
    assert "| this checkout | 0.300 |" in text and "| against | 0.600 |" in text and "Speed-up: 2.00x." in text
    assert "the same bits in every process" in text
    rows[-1]["digest"] = "b"
    assert "2 different digests" in recal_speed.markdown(rows, checkouts, "now")
    monkeypatch.setenv("KERAS_BACKEND", "jax")  # the backend the timed processes ran on is named
    assert "; Keras backend jax. Run now;" in recal_speed.markdown(rows, checkouts, "now")


@pytest.mark.system
def test_recal_speed_times_both_checkouts_and_refuses_bad_input(tmp_path: Path) -> None:
    """A real run against this same checkout: a pass timed with each, the same statistics' bits."""
    import subprocess
    import sys

    def bench(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "benchmarks.costs.recal_speed", "--out", str(tmp_path), *args]
        return subprocess.run(command, cwd=machine.REPO, capture_output=True, text=True, check=False)

    done = bench("--repeats", "1", "--against", str(machine.REPO))
    assert done.returncode == 0, done.stderr
    rows = pd.read_csv(tmp_path / "recal_speed.csv")
    assert sorted(rows["code"]) == ["against", "this checkout"] and (rows["seconds"] > 0).all()
    assert rows["digest"].nunique() == 1
    assert "the same bits in every process" in (tmp_path / "recal_speed.md").read_text(encoding="utf-8")
    for bad, words in ((("--repeats", "0"), "--repeats must be at least 1"), (("--against", "/nowhere"), "/nowhere")):
        refused = bench(*bad)
        assert refused.returncode == 2 and words in refused.stderr and "Traceback" not in refused.stderr
