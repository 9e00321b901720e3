"""Planning: grid x seeds -> runs with stable, readable ids; no TensorFlow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, write_grid

from sweep import cli
from sweep.analysis import decisions
from sweep.base.seeds import derive_seed
from sweep.config import GridFile, load_grid
from sweep.config.plan import RunSpec, at_lr, plan, search_groups
from sweep.run import until

GRID = """
    name: p
    seeds: [0, 1, 2]
    base: {train: {epochs: 4}}
    grid: {train.batch_size: [8, 64], data.shuffle: [true, false]}
"""


@pytest.mark.unit
def test_grid_times_seeds(tmp_path: Path) -> None:
    runs = plan(load_grid(write_grid(tmp_path, GRID)))
    # 2 batch sizes x 2 shuffle settings x 3 seeds -> 12 runs
    assert len(runs) == 12
    assert len({r.run_id for r in runs}) == 12
    assert runs[0].varying == (("train.batch_size", 8), ("data.shuffle", True), ("seed", 0))
    assert runs[0].run_id.startswith("bs8-shuf1-s0-") and runs[-1].run_id.startswith("bs64-shuf0-s2-")
    assert {r.point.train.batch_size for r in runs} == {8, 64}
    assert all(r.point.train.epochs == 4 for r in runs)


@pytest.mark.unit
def test_ids_are_stable_and_change_with_any_value(tmp_path: Path) -> None:
    first = [r.run_id for r in plan(load_grid(write_grid(tmp_path, GRID)))]
    again = [r.run_id for r in plan(load_grid(write_grid(tmp_path, GRID)))]
    assert first == again
    changed = [r.run_id for r in plan(load_grid(write_grid(tmp_path, GRID.replace("epochs: 4", "epochs: 5"))))]
    # the slug names only the varying values, so it stays; the hash covers everything
    assert [i.rsplit("-", 1)[0] for i in changed] == [i.rsplit("-", 1)[0] for i in first]
    assert not set(changed) & set(first)


@pytest.mark.unit
def test_the_sweep_name_does_not_change_ids(tmp_path: Path) -> None:
    renamed = GRID.replace("name: p", "name: q")
    assert [r.run_id for r in plan(load_grid(write_grid(tmp_path, GRID)))] == [
        r.run_id for r in plan(load_grid(write_grid(tmp_path, renamed)))
    ]


@pytest.mark.unit
def test_spec_round_trips_through_json(tmp_path: Path) -> None:
    spec = plan(load_grid(write_grid(tmp_path, GRID)))[5]
    assert RunSpec.from_json(spec.to_json()) == spec


@pytest.mark.unit
def test_derived_seeds_differ_by_name_and_are_stable() -> None:
    assert derive_seed(0, "data-order", 1) == derive_seed(0, "data-order", 1)
    assert len({derive_seed(0, "init"), derive_seed(0, "data-order", 1), derive_seed(1, "init")}) == 3


@pytest.mark.unit
def test_plan_command_lists_runs_and_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plan", str(write_grid(tmp_path, GRID))]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 13
    assert lines[-1] == "12 runs (4 points x 3 seeds), 48 epochs in all"
    assert "train.batch_size=8 data.shuffle=True seed=0" in lines[0]


@pytest.mark.system  # a fresh interpreter: this process has TensorFlow loaded already
def test_light_modules_do_not_import_tensorflow() -> None:
    code = (
        "import sys, sweep.config.plan, sweep.config, sweep.config.keys, sweep.config.rules, sweep.store, sweep.cli, "
        "sweep.run.coordinator, sweep.run.worker; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.unit
def test_a_published_run_id_never_changes() -> None:
    from sweep.config import PointConfig

    # the id of the default point at seed 0; if this fails, existing results lose their runs
    assert RunSpec(sweep="any", seed=0, point=PointConfig(), varying=(("seed", 0),)).run_id == "s0-e428119f"


def committed_sweeps() -> list[tuple[Path, Path]]:
    """(grid file, its runs.csv) for every committed experiment and test fixture with results."""
    experiments = sorted(REPO.glob("experiments/*.yaml"))
    pairs = [(grid, REPO / "results" / load_grid(grid).name / "runs.csv") for grid in experiments]
    pairs += [
        (grid, REPO / "tests" / "fixtures" / grid.stem / "runs.csv")
        for grid in sorted((REPO / "tests" / "fixtures" / "grids").glob("*.yaml"))
    ]
    return [(grid, runs) for grid, runs in pairs if runs.exists()]


def until_seeds(grid: GridFile, folder: Path) -> set[str]:
    """The ids of the seeds `run --until-decided` may add to a committed sweep (none without decisions.csv)."""
    got = decisions.read(folder)
    if got is None:
        return set()
    layout = until.Layout.of(grid, int(got[0]["cap"].max()))
    return {spec.run_id for runs in layout.runs for spec in runs[len(grid.seeds) :]}


@pytest.mark.unit
def test_every_committed_result_keeps_its_run_id() -> None:
    """Re-planning the committed grid files gives exactly the ids in their committed runs.csv:
    grid runs, learning-rate searches, their trials and their tuned re-runs.
    """
    checked = 0
    for grid_path, runs_csv in committed_sweeps():
        grid = load_grid(grid_path)
        stored = pd.read_csv(runs_csv, float_precision="round_trip")  # a tuned lr's every bit is in its id
        role = stored["role"] if "role" in stored else pd.Series("grid", index=stored.index)
        planned = {r.run_id for r in plan(grid)}
        assert planned == set(stored.loc[role == "grid", "run_id"]) - until_seeds(grid, runs_csv.parent), grid_path.name
        groups = {g.group_id: g for g in search_groups(grid)}
        for _, row in stored[role != "grid"].iterrows():
            group = groups[row["search_group"]]
            spec = (
                at_lr(group.template, row["train.lr"])
                if row["role"] == "search"
                else next(r for r in group.tuned_runs(row["train.lr"], grid.seeds) if r.seed == row["seed"])
            )
            assert spec.run_id == row["run_id"], grid_path.name
        checked += len(stored)
    assert checked >= 130  # every experiment with results and every fixture was read


@pytest.mark.unit
def test_a_run_id_is_at_most_200_bytes_and_a_long_folder_name_keeps_ids_apart(tmp_path: Path) -> None:
    """A 240-character data folder made a 260-byte id, and every checkpoint's file name was too long."""
    folders = [tmp_path / (letter * 240) for letter in "ab"]
    for folder in folders:
        folder.mkdir()
    grid = f"""
        name: long
        seeds: [0]
        base: {{data: {{dataset: folder}}}}
        grid: {{data.path: ["{folders[0]}", "{folders[1]}"]}}
    """
    runs = plan(load_grid(write_grid(tmp_path, grid)))
    ids = [r.run_id for r in runs]
    assert all(len(i.encode()) <= 200 for i in ids) and len(set(ids)) == 2
    assert all(i.rsplit("-", 1)[1] == r.spec_hash for i, r in zip(ids, runs, strict=True))  # the hash stays whole
    short = plan(load_grid(write_grid(tmp_path, GRID)))[0]
    assert short.run_id == f"{short.slug}-{short.spec_hash}"  # ids that fit are unchanged
