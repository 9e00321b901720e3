"""Quiet timing (`sweep time`): one row per configuration, matched to every run that shares it, and the
report's quiet seconds to target = steps x the configuration's best seconds per step.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from conftest import REPO, run_cli, write_grid

from sweep import analysis as an
from sweep import vocab
from sweep.analysis import scaling
from sweep.analysis import timing as timing_table
from sweep.config import declared, load_grid, timing_schema
from sweep.config.declare import INPUT, Key
from sweep.config.keys import PointConfig
from sweep.config.plan import RunSpec, plan
from sweep.report.sections import steps as steps_report
from sweep.train import timing

BATCH_SIZES = REPO / "results" / "batch_sizes"


def per_step(batch: int) -> float:
    """Made-up quiet seconds per step, different for every batch size, so a wrong match shows."""
    return 0.001 * batch + 0.0001


@pytest.fixture()
def timed_results(tmp_path: Path) -> Path:
    """The committed batch_sizes results with a timing.csv written from its grid's configurations."""
    folder = tmp_path / "batch_sizes"
    folder.mkdir()
    for name in (vocab.RUNS_CSV, vocab.EPOCHS_CSV):
        shutil.copy(BATCH_SIZES / name, folder / name)
    specs = timing_schema.configurations(plan(load_grid(REPO / "experiments" / "batch_sizes.yaml")))
    rows = []
    for key, spec in specs.items():
        flat = spec.flat()
        rows.append({timing_schema.CONFIG: key, **{k: flat[k] for k in timing_schema.timing_keys(flat)}})
        rows[-1][timing_schema.STEP_SECONDS] = per_step(spec.point.train.batch_size)
    timing.merge(folder / vocab.TIMING_CSV, rows)
    return folder


@pytest.mark.unit
def test_one_configuration_per_batch_size_whatever_the_seed_or_lr() -> None:
    specs = plan(load_grid(REPO / "experiments" / "lr_search.yaml"))
    chosen = timing_schema.configurations(specs)
    assert sorted(s.point.train.batch_size for s in chosen.values()) == [8, 32, 64, 128]
    assert len(specs) == 12  # 3 seeds each share their batch size's row


@pytest.mark.unit
def test_every_record_gets_its_configurations_seconds_through_the_csvs(timed_results: Path) -> None:
    """Values that went through runs.csv (1.0, True, an empty ghost batch size) match the spec's own."""
    epochs = an.load([timed_results]).epochs
    assert epochs[timing_schema.QUIET_STEP_SECONDS].notna().all()
    expected = epochs[an.BATCH_SIZE].map(per_step)
    # to the last bit where pandas parses floats exactly (3.1); within one rounding step before
    assert epochs[timing_schema.QUIET_STEP_SECONDS].to_numpy() == pytest.approx(expected.to_numpy(), rel=1e-15, abs=0)


@pytest.mark.unit
def test_a_runs_measured_seconds_to_its_first_record_are_its_steps_to_it_times_the_best_step(tmp_path: Path) -> None:
    """What the watchdog waits for before a worker's first record (sweep/run/watchdog.py): the grid records every
    50 steps, 50 x 4 ms = 0.2 s; recording every 400 steps, the epoch's 150 steps come first, 0.6 s; none for a
    configuration not timed.
    """
    grid = REPO / "experiments" / "batch_sizes.yaml"
    (spec, *others) = plan(load_grid(grid))
    flat = spec.flat()
    key = timing_schema.config_key(flat, timing_schema.timing_keys(flat))
    row = {timing_schema.CONFIG: key, **{k: flat[k] for k in timing_schema.timing_keys(flat)}}
    row |= {timing_schema.STEP_SECONDS: 0.004, timing_schema.STEPS_PER_EPOCH: 150}
    assert timing_table.first_record_seconds(tmp_path, spec) is None  # no timing.csv
    timing.merge(tmp_path / vocab.TIMING_CSV, [row])
    assert timing_table.first_record_seconds(tmp_path, spec) == pytest.approx(0.2)
    (rare, *_) = plan(load_grid(grid, ["train.eval_every_steps=400"]))
    assert rare.point.train.batch_size == spec.point.train.batch_size
    assert timing_table.first_record_seconds(tmp_path, rare) == pytest.approx(0.6)
    other = next(s for s in others if s.point.train.batch_size != spec.point.train.batch_size)
    assert timing_table.first_record_seconds(tmp_path, other) is None


# What every timing.csv written so far holds: its columns in this order (and its configuration strings in
# this order of keys), which `merge` and `sweep study` match as written.
COMMITTED_TIMING = sorted((REPO / "results").rglob(vocab.TIMING_CSV))
COST_KEYS = [
    *("model.builder", "model.options", "model.width", "model.batchnorm", "model.bn_momentum"),
    *("model.ghost_batch_size", "data.dataset", "data.classes", "data.image_size"),
    *("train.optimizer", "train.batch_size", "train.gpus"),
]
AFTER_KEYS = [
    *(timing_schema.SWEEP, timing_schema.TIMED_RUN_ID, timing_schema.TRAIN_SAMPLES, timing_schema.STEPS_PER_EPOCH),
    *(timing_schema.REPEATS, timing_schema.EPOCH_SECONDS_BEST, timing_schema.EPOCH_SECONDS_MEDIAN),
    *(timing_schema.REPEATS_SECONDS, timing_schema.STEP_SECONDS, timing_schema.THREADS, timing_schema.CPU),
    *(timing_schema.LOAD_BEFORE, timing_schema.LOAD_AFTER, timing_schema.MEASURED),
]


@pytest.fixture()
def redeclare(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Change some keys' declarations for one test; the tables derived from them are made again."""

    def change(**costs: str | None) -> None:
        real = declared.declarations()
        changed: dict[str, Key] = {
            name: dataclasses.replace(k, cost=costs[name.replace(".", "__")]) if name.replace(".", "__") in costs else k
            for name, k in real.items()
        }
        monkeypatch.setattr(declared, "declarations", lambda: changed)
        declared.cost_keys.cache_clear()

    yield change
    declared.cost_keys.cache_clear()  # before monkeypatch puts the real declarations back: computed again from them


@pytest.mark.unit
def test_a_configuration_is_every_key_declared_to_set_a_steps_cost(redeclare: Callable[..., None]) -> None:
    """timing_keys follows the declarations (`cost=` in sweep/config/keys.py), not a list of its own: a key that
    starts to set the cost joins the configuration, one that stops leaves it.
    """
    flat = RunSpec(sweep="t", seed=0, point=PointConfig(), varying=()).flat()
    assert timing_schema.timing_keys(flat) == COST_KEYS == list(declared.cost_keys())
    redeclare(data__channels=INPUT, train__optimizer=None, train__lr="update")
    keys = timing_schema.timing_keys(flat)
    assert "data.channels" in keys and "train.optimizer" not in keys and "train.lr" in keys
    assert keys == [k for k in declared.cost_keys() if k in flat]
    # grouped by what of the cost a key sets (the model, the input, the update, the batch), then in file order
    assert keys[keys.index("data.dataset") + 1] == "data.channels"
    assert keys[keys.index("data.image_size") + 1 :] == ["train.lr", "train.batch_size", "train.gpus"]


@pytest.mark.unit
@pytest.mark.parametrize("path", COMMITTED_TIMING, ids=lambda p: str(p.relative_to(REPO)))
def test_committed_timing_files_keep_their_columns_and_configuration_strings(path: Path) -> None:
    table = pd.read_csv(path)
    keys = timing_schema.timing_keys(table.columns)
    assert list(table.columns) == [timing_schema.CONFIG, *keys, *AFTER_KEYS]
    assert keys == [k for k in COST_KEYS if k in table]
    for _, row in table.iterrows():
        assert row[timing_schema.CONFIG] == timing_schema.config_key(row, keys)


@pytest.mark.unit
def test_every_column_timing_writes_is_a_schema_name() -> None:
    spec = RunSpec(sweep="t", seed=0, point=PointConfig(), varying=())
    info = SimpleNamespace(steps_per_epoch=10, train_samples=100, threads=2, cpu="cpu")
    key = timing_schema.config_key(spec.flat(), COST_KEYS)
    row: dict[str, Any] = timing._row(key, spec, SimpleNamespace(info=info), [2.0, 1.0], (0.5, 0.7))
    assert list(row) == [timing_schema.CONFIG, *COST_KEYS, *AFTER_KEYS]
    newest = pd.read_csv(REPO / "results" / "study" / vocab.TIMING_CSV, nrows=0)
    assert list(row) == list(newest.columns)
    assert (row[timing_schema.STEP_SECONDS], row[timing_schema.REPEATS_SECONDS]) == (0.1, "2.0000 1.0000")


@pytest.mark.unit
def test_one_spelling_for_what_a_csv_may_have_retyped() -> None:
    """A column with an empty cell comes back from pandas as float (8 -> 8.0) or object ('True')."""
    keys = ["data.classes", "model.batchnorm", "model.ghost_batch_size", "train.optimizer"]
    spec = {"data.classes": 8, "model.batchnorm": True, "model.ghost_batch_size": None, "train.optimizer": "adam"}
    csv = {"data.classes": 8.0, "model.batchnorm": "True", "model.ghost_batch_size": math.nan}
    csv["train.optimizer"] = "adam"
    assert timing_schema.config_key(spec, keys) == timing_schema.config_key(csv, keys)
    assert timing_schema.config_key({**spec, "data.classes": 16}, keys) != timing_schema.config_key(csv, keys)


@pytest.mark.unit
def test_a_run_of_another_configuration_gets_none(timed_results: Path) -> None:
    table = pd.read_csv(timed_results / vocab.TIMING_CSV)
    table = table[table["train.batch_size"] != 64]
    table.to_csv(timed_results / vocab.TIMING_CSV, index=False)
    epochs = an.load([timed_results]).epochs
    missing = epochs[timing_schema.QUIET_STEP_SECONDS].isna()
    assert (missing == (epochs[an.BATCH_SIZE] == 64)).all()


@pytest.mark.unit
def test_quiet_seconds_to_target_are_steps_times_seconds_per_step(timed_results: Path) -> None:
    [reading] = [r for r in scaling.read(an.load([timed_results])) if r.targets]
    hit = reading.reaches[reading.reaches["reached"]]
    assert len(hit) > 10
    expected = hit["step"] * hit["batch_size"].map(per_step)
    assert hit["quiet_seconds"].to_numpy() == pytest.approx(expected.to_numpy(), rel=1e-12)
    table = steps_report.steps_table([reading])
    means = table["steps_mean"] * table["batch_size"].map(per_step)
    shown = table["seconds_quiet_mean"].notna()
    assert shown.sum() > 10
    assert table.loc[shown, "seconds_quiet_mean"].to_numpy() == pytest.approx(means[shown].to_numpy(), rel=1e-9)
    # the runs' own seconds are still there, and are another number
    assert not (table.loc[shown, "seconds_runs_mean"] == table.loc[shown, "seconds_quiet_mean"]).any()


@pytest.mark.unit
def test_c6_names_the_quiet_epoch_times_beside_the_runs_own(timed_results: Path) -> None:
    from sweep import report

    runs = pd.read_csv(timed_results / vocab.RUNS_CSV).drop_duplicates("train.batch_size")
    steps = dict(zip(runs["train.batch_size"], runs["steps_per_epoch"], strict=True))
    summary = an.run_summary(an.load([timed_results]).epochs)
    expected = summary[an.BATCH_SIZE].map(lambda b: per_step(b) * steps[b])
    assert summary[an.QUIET_EPOCH_SECONDS].to_numpy() == pytest.approx(expected.to_numpy(), rel=1e-9)
    [c6] = [c for c in report.CLAIMS if c.id == "C6"]
    finding = c6.evaluate(summary)
    change = per_step(256) * steps[256] / (per_step(8) * steps[8]) - 1
    [note] = [n for n in finding.notes if n.startswith("The quiet measurement")]
    assert f"batch 8: {per_step(8) * steps[8]:.2f} s" in note
    assert f"a relative change of {change:+.3f} at batch 256" in note


@pytest.mark.unit
def test_no_timing_csv_no_quiet_column(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    for name in (vocab.RUNS_CSV, vocab.EPOCHS_CSV):
        shutil.copy(BATCH_SIZES / name, folder / name)
    assert timing_schema.QUIET_STEP_SECONDS not in an.load([folder]).epochs
    [reading] = [r for r in scaling.read(an.load([folder])) if r.targets]
    assert all(math.isnan(r.quiet_seconds.mean) for r in reading.rows)
    assert timing_table.describe(folder) == ""


TIMED_GRID = """\
    name: timed
    seeds: [0, 1]
    base:
      data: {dataset: glyphs120, classes: 4, samples_per_class: 10, image_size: 12}
      train: {epochs: 1}
    grid:
      train.batch_size: [4, 8]
      train.gpus: [1, 2]
"""


QUIET_ANYWAY = ("--max-load", "inf")  # a test suite keeps the machine busy: time anyway


@pytest.mark.system  # three processes start TensorFlow
def test_sweep_time_writes_one_row_per_configuration_and_replaces_only_its_own(tmp_path: Path) -> None:
    grid = write_grid(tmp_path, TIMED_GRID)
    results = tmp_path / "out"
    done = run_cli("time", str(grid), "--results", str(results), "--repeats", "2", *QUIET_ANYWAY, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "timing the configurations with gpus 2 in a fresh process" in done.stdout
    table = pd.read_csv(results / vocab.TIMING_CSV)
    assert sorted(zip(table["train.batch_size"], table["train.gpus"], strict=True)) == [(4, 1), (4, 2), (8, 1), (8, 2)]
    assert (table["repeats"] == 2).all()
    for _, row in table.iterrows():
        repeats = [float(s) for s in row["epoch_seconds_all"].split()]
        assert len(repeats) == 2 and min(repeats) == pytest.approx(row["epoch_seconds_best"], abs=1e-4)
        assert row["steps_per_epoch"] == math.ceil(row["train_samples"] / row["train.batch_size"])
        assert row[timing_schema.STEP_SECONDS] == pytest.approx(row["epoch_seconds_best"] / row["steps_per_epoch"])
    assert sorted(p.name for p in results.iterdir()) == [vocab.TIMING_CSV]  # nothing trained into a store

    again = run_cli(
        "time", str(grid), "--results", str(results), "--repeats", "1", "--gpus", "1", *QUIET_ANYWAY, cwd=tmp_path
    )
    assert again.returncode == 0, again.stderr
    table = pd.read_csv(results / vocab.TIMING_CSV).set_index(["train.batch_size", "train.gpus"])
    assert table.index.is_unique and len(table) == 4
    assert table["repeats"].to_dict() == {(4, 2): 2, (8, 2): 2, (4, 1): 1, (8, 1): 1}


@pytest.mark.system  # one process starts TensorFlow
def test_sweep_time_times_the_grid_with_its_overrides(tmp_path: Path) -> None:
    """Overrides reach the process that times each replica count: 20 images a class, one replica only."""
    from sweep.train import data

    grid = write_grid(tmp_path, TIMED_GRID)
    overrides = ["data.samples_per_class=20", "train.gpus=1"]
    done = run_cli("time", str(grid), *overrides, "--results", "out", "--repeats", "1", *QUIET_ANYWAY, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(tmp_path / "out" / vocab.TIMING_CSV)
    assert sorted(zip(table["train.batch_size"], table["train.gpus"], strict=True)) == [(4, 1), (8, 1)]
    split = data.load_split(plan(load_grid(grid, overrides))[0].point.data)
    assert (table["train_samples"] == len(split.y_train)).all() and len(split.y_train) > 40  # 4 classes x 20


@pytest.mark.system
def test_sweep_time_refuses_a_replica_count_the_grid_has_not(tmp_path: Path) -> None:
    grid = write_grid(tmp_path, TIMED_GRID)
    results = tmp_path / "out"
    done = run_cli("time", str(grid), "--results", str(results), "--gpus", "3", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: --gpus 3: no run of {grid} uses 3 replica(s); its runs use 1, 2"
    ]
    assert not results.exists()


@pytest.mark.unit
def test_quiet_timing_refuses_a_busy_machine_and_says_why() -> None:
    """0.5 per core is the default limit's edge on 2 cores: 0.5 passes, 0.6 is refused, with the numbers."""
    from sweep.train import timing

    assert timing.too_busy(0.5, 2) == ""
    said = timing.too_busy(1.2, 2)
    assert said.startswith("the machine is busy: 1-minute load average 1.20 on 2 core(s), 0.60 per core, above 0.25")
    assert timing.too_busy(1.2, 2, max_per_core=math.inf) == ""


@pytest.mark.unit
def test_a_new_timing_replaces_one_written_before_a_key_was_added(tmp_path: Path) -> None:
    """An earlier timing.csv row without model.builder (written before the key existed) is the same configuration
    as today's row with model.builder=none: measuring again replaces it, in today's column order.
    """
    spec = RunSpec(sweep="t", seed=0, point=PointConfig(), varying=()).flat()
    keys = timing_schema.timing_keys(spec)
    today = {timing_schema.CONFIG: timing_schema.config_key(spec, keys), **{k: spec[k] for k in keys}}
    older_keys = [k for k in keys if k not in ("model.builder", "model.options")]
    before = {timing_schema.CONFIG: timing_schema.config_key(spec, older_keys), **{k: spec[k] for k in older_keys}}
    path = tmp_path / vocab.TIMING_CSV
    pd.DataFrame([before | {timing_schema.STEP_SECONDS: 0.5}]).to_csv(path, index=False)
    written = timing.merge(path, [today | {timing_schema.STEP_SECONDS: 0.1}])
    assert written[timing_schema.STEP_SECONDS].tolist() == [0.1]
    assert list(pd.read_csv(path).columns) == [timing_schema.CONFIG, *keys, timing_schema.STEP_SECONDS]
