"""`sweep run|plan|time GRID key=value ...`: overrides from the command line, checked as the grid file is,
and the grid as run written into the results folder, so a rerun of it trains the same runs.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO

from sweep import cli, vocab
from sweep.config import ConfigError, load_grid
from sweep.config.plan import plan
from sweep.vocab import RunStatus

ARTICLE = REPO / "experiments" / "article.yaml"


@pytest.mark.unit
def test_a_section_key_is_set_for_every_point_and_seeds_are_replaced() -> None:
    grid = load_grid(ARTICLE, ["train.epochs=1", "seeds=[0]"])
    runs = plan(grid)
    assert [r.point.train.batch_size for r in runs] == [8, 64] and {r.point.train.epochs for r in runs} == {1}
    assert grid.seeds == (0,)
    one = load_grid(ARTICLE, ["train.batch_size=16"])  # an axis overridden: one point
    assert [r.point.train.batch_size for r in plan(one)] == [16] * len(one.seeds)
    axis = load_grid(ARTICLE, ["grid.train.lr=[0.001, 0.01]", "seeds=[0]"])
    assert sorted((r.point.train.batch_size, r.point.train.lr) for r in plan(axis)) == [
        (8, 0.001),
        (8, 0.01),
        (64, 0.001),
        (64, 0.01),
    ]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("train.epoch=1", "article.yaml: override train.epoch: unknown key; did you mean 'epochs'?"),
        ("epochs", "article.yaml: override 'epochs': give KEY=VALUE, e.g. train.epochs=1 or seeds=[0,1]"),
        ("train.epochs=-1", "article.yaml: base.train.epochs: must be a positive integer, got -1"),
        ("train.epochs=[", "article.yaml: override train.epochs: line 1, column 2: YAML syntax error"),
        ("seeds=[]", "article.yaml: seeds: must be a non-empty list of integers >= 0"),
        ("a.b.c.d=1", "article.yaml: override a.b.c.d: set a key as section.key"),
        (
            "train.batch_size=[8,16]",
            "article.yaml: override train.batch_size: sets one value for every point, and [8, 16] is a list; "
            "did you mean the grid axis grid.train.batch_size=[8,16]?",
        ),
    ],
)
def test_a_bad_override_is_one_line_naming_it(override: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_grid(ARTICLE, [override])
    assert str(err.value).startswith(says) and "\n" not in str(err.value), err.value


@pytest.mark.unit
def test_the_grid_as_run_is_written_and_a_rerun_of_it_plans_the_same_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["run", str(ARTICLE), "train.epochs=1", "seeds=[0]", "--results", "R", "--no-train"]
    assert cli.main(args) == 0
    assert "the grid as run: R/grid.yaml" in capsys.readouterr().out
    written = (tmp_path / "R" / "grid.yaml").read_text()
    assert written.startswith("# article.yaml as run, with train.epochs=1 seeds=[0]\n")
    again = plan(load_grid(tmp_path / "R" / "grid.yaml"))
    assert [r.run_id for r in again] == [r.run_id for r in plan(load_grid(ARTICLE, ["train.epochs=1", "seeds=[0]"]))]
    assert cli.main(["run", str(ARTICLE), "train.epoch=1", "--results", "S", "--no-train"]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "S").exists()


@pytest.mark.unit
def test_overrides_may_come_anywhere_on_the_line_and_a_stray_word_gets_the_commands_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As users type: flags first, overrides after them, or both mixed; in the order typed."""
    monkeypatch.chdir(tmp_path)
    args = ["run", str(ARTICLE), "train.epochs=2", "--results", "R", "seeds=[0]", "--no-train", "train.epochs=1"]
    assert cli.main(args) == 0
    assert "with train.epochs=2 seeds=[0] train.epochs=1; the grid as run: R/grid.yaml" in capsys.readouterr().out
    assert [r.run_id for r in plan(load_grid(tmp_path / "R" / "grid.yaml"))] == [
        r.run_id for r in plan(load_grid(ARTICLE, ["train.epochs=1", "seeds=[0]"]))
    ]
    with pytest.raises(SystemExit) as stopped:
        cli.main(["run", str(ARTICLE), "--results", "S", "--bogus", "seeds=[0]"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.startswith("usage: sweep run ") and not (tmp_path / "S").exists()
    assert err.splitlines()[-1] == "sweep run: error: unrecognized arguments: --bogus seeds=[0]"


@pytest.mark.integration
def test_run_with_overrides_trains_their_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's laptop-sized first look at its own grid: article.yaml at 1 epoch, 1 seed, 10 images a class."""
    monkeypatch.chdir(tmp_path)
    # 8 classes of 10 images: 64 training images, so batch 64 fits
    overrides = ["train.epochs=1", "seeds=[0]", "data.samples_per_class=10", "data.classes=8"]
    assert cli.main(["run", str(ARTICLE), *overrides, "--results", "R", "--in-process"]) == 0
    runs = pd.read_csv(tmp_path / "R" / vocab.RUNS_CSV)
    assert len(runs) == 2 and (runs[vocab.STATUS] == RunStatus.DONE).all() and (runs["epochs_done"] == 1).all()
    assert "data.samples_per_class=10" in (tmp_path / "R" / "grid.yaml").read_text().splitlines()[0]
