"""The peers benchmark's pure parts (benchmarks/peers/peer_bench.py): its alternating order, its table and
ratios from given timings, and its refusal without the peers installed. No TensorFlow, no process:
what it measures is the benchmark's own business, run by hand (`python -m benchmarks.peers.peer_bench`).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from benchmarks.peers import peer_bench

CONFIGS = ["sweep", "sweep-w1", "ray", "ray-reuse", "kerastuner"]
STAMP = peer_bench.Stamp(
    grid="benchmarks/grid.yaml",
    runs=6,
    repeats=2,
    date="2026-12-06 10:00 UTC",
    machine="2 cores (a CPU), Linux x86_64, Python 3.11.7, TensorFlow 2.21.0",
    load=1.5,
    commit="abc1234",
    versions="ray 2.60.0, keras-tuner 1.4.8",
    command="python -m benchmarks.peers.peer_bench --repeats 2",
    threads={"sweep": "1 x 2", "ray": "2 x 1", "ray-reuse": "2 x 1"},
)


def _timings(seconds: dict[str, list[float]]) -> list[peer_bench.Timing]:
    return [peer_bench.Timing(config, i + 1, s) for config, each in seconds.items() for i, s in enumerate(each)]


@pytest.mark.unit
def test_configurations_alternate_every_one_once_then_all_again() -> None:
    assert peer_bench.schedule(CONFIGS[:3], 2) == [
        (1, "sweep"),
        (1, "sweep-w1"),
        (1, "ray"),
        (2, "sweep"),
        (2, "sweep-w1"),
        (2, "ray"),
    ]
    assert peer_bench.schedule(CONFIGS, 1) == [(1, config) for config in CONFIGS]


@pytest.mark.unit
def test_the_five_configurations_in_order_each_from_a_folder_of_its_own(tmp_path: Path) -> None:
    made = peer_bench.peers(Path("benchmarks/grid.yaml"), tmp_path)
    assert [p.config for p in made] == CONFIGS
    assert [p.at_once for p in made] == [None, 1, 2, 2, 1]  # None: `sweep run` picks its default workers
    assert made[0].command[-2:] == ("--results", str(tmp_path / "results_sweep"))  # default flags only
    assert "--reuse-actors" in made[3].command and "--reuse-actors" not in made[2].command
    assert len({p.folder for p in made}) == len(made)


@pytest.mark.unit
def test_the_table_keeps_each_ones_best_and_its_ratio_to_the_default_sweep_run() -> None:
    timings = _timings({"sweep": [100.0, 80.0], "ray": [130.0, 120.0], "ray-reuse": [90.0, 100.0]})
    assert peer_bench.best(timings) == {"sweep": 80.0, "ray": 120.0, "ray-reuse": 90.0}
    text = peer_bench.table(timings, STAMP)
    assert "Ray Tune with `reuse_actors=True`: 90.0 s (1.12x the harness's time)" in text
    assert "| `sweep run` (default flags) | 1 x 2 | 80.0 | 100.0, 80.0 | 1.00x |" in text
    assert "| Ray Tune, 2 trials at once (default settings) | 2 x 1 | 120.0 | 130.0, 120.0 | 1.50x |" in text
    for said in (STAMP.machine, "load average 1.50", STAMP.date, STAMP.commit, STAMP.versions, f"`{STAMP.command}`"):
        assert said in text


@pytest.mark.unit
def test_each_write_replaces_both_files_whole(tmp_path: Path) -> None:
    peer_bench.write(_timings({"sweep": [50.0, 40.0], "kerastuner": [70.0]}), STAMP, tmp_path)
    paths = peer_bench.write(_timings({"sweep": [10.0]}), STAMP, tmp_path)
    with paths["csv"].open(encoding="utf-8") as handle:
        assert list(csv.reader(handle)) == [["config", "repeat", "seconds"], ["sweep", "1", "10.000"]]
    assert "KerasTuner GridSearch" not in paths["md"].read_text(encoding="utf-8")


@pytest.mark.unit
def test_without_the_peers_it_says_how_to_install_them_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(peer_bench.importlib.util, "find_spec", lambda name: None)
    assert peer_bench.main(["--repeats", "1"]) == 2
    err = capsys.readouterr().err
    assert "ray, keras-tuner not importable" in err and "pip install -e '.[peers]'" in err
