"""`sweep study` end to end in this process on the docs' own-model example (experiments/own_model/), cut to
tiny data: the quiet timing, the plan, the searches and tuned runs, the study report and `sweep advise`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from sweep import vocab
from sweep.cli import main

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "experiments" / "own_model" / "my_grid.yaml"

pytestmark = pytest.mark.integration


def test_a_tiny_study_of_the_own_model_example_plans_trains_reports_and_advises(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "study"
    code = main(
        [
            "study",
            str(EXAMPLE),
            "data.samples_per_class=40",
            "train.epochs=4",  # at one epoch a tuned run sat at chance on some machines: nothing to advise
            "search.widen=0",
            "--batch-sizes",
            "8,32",
            "--seeds",
            "2",
            "--trials",
            "2",
            "--repeats",
            "1",
            "--records-per-epoch",
            "2",
            "--results",
            str(results),
            "--in-process",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    # the plan, said before training: the ladder, the run count (3 x (2 untuned + 2 trials + 2 tuned + 2 runner-up))
    assert "my_model_study: batch sizes 8, 16, 32;" in out and "24 runs (6 of them search trials); roughly" in out
    timing = pd.read_csv(results / vocab.TIMING_CSV)
    assert sorted(timing["train.batch_size"]) == [8, 16, 32]
    grid = yaml.safe_load((results / "grid.yaml").read_text())  # the study as a grid file, to run elsewhere
    every = int(timing.loc[timing["train.batch_size"] == 8, "steps_per_epoch"].iloc[0])
    assert grid["base"]["train"]["eval_every_steps"] == -(-every // 2) and grid["search"]["seed"] == 100
    runs = pd.read_csv(results / vocab.RUNS_CSV)
    # the example stops on raw val_loss; every run of the study stops on val_loss_recal instead, and says so
    recal = '{"metric": "val_loss_recal", "min_delta": 0.0, "patience": 2}'
    assert set(runs["train.early_stopping"]) == {recal} and "moved from val_loss" in out
    tuned = runs[runs[vocab.ROLE] == vocab.TUNED]
    assert sorted(tuned["train.batch_size"]) == [8, 8, 16, 16, 32, 32] and set(tuned[vocab.SEED]) == {0, 1}
    second = runs[runs[vocab.ROLE] == vocab.RUNNER_UP]  # each search's runner-up lr at the same seeds
    assert sorted(second["train.batch_size"]) == [8, 8, 16, 16, 32, 32]
    assert not set(second["train.lr"]) & set(tuned["train.lr"])
    search = runs[runs[vocab.ROLE] == vocab.SEARCH]  # on held-out data
    assert set(search["data.seed"]) == {100} and set(tuned["data.seed"]) == {0}
    study_md = (results / "study.md").read_text()
    assert "## Recommendation" in study_md and "## Warnings" in study_md and "Train with batch" in study_md
    assert (
        "stopping when val_loss_recal had not improved" in study_md and "Tuned runs stopped early: batch 8 " in study_md
    )
    assert (results / "study.html").is_file()
    table = pd.read_csv(results / "tables" / "study.csv")  # numbers, an estimate in four columns
    assert (
        list(table["batch_size"]) == [8, 16, 32]
        and table["val_acc_recal_n"].le(2).all()
        and table["tuned_runs"].eq(2).all()
    )
    assert pd.api.types.is_float_dtype(table["val_acc_recal_estimate"]) and table["stopped_early"].eq(0).all()
    assert main(["advise", str(results)]) == 0
    advice = capsys.readouterr().out.splitlines()
    assert len(advice) <= 6 and all(len(line) < 100 for line in advice), advice
    assert advice[0].startswith("Train with batch") and advice[1].startswith("Rule: ")
    assert "The decision rule: the largest batch" in study_md
    assert advice[0].split(" (")[0] in study_md  # the same batch size and lr on the first screen


def test_a_model_without_batchnorm_is_recalibrated_as_itself() -> None:
    """The study records val_acc_recal for every model; an MLP has no BatchNorm statistics to recompute, so its
    recalibrated numbers are its own (the study of experiments/study/mlp.yaml failed every run before).
    """
    from sweep.config import load_grid
    from sweep.config.plan import plan
    from sweep.train.trainer import Trainer

    grid = load_grid(REPO / "experiments" / "study" / "mlp.yaml", ["train.recalibrate_bn=true", "train.epochs=1"])
    (record,) = list(Trainer.alone(plan(grid)[0]).epochs())
    assert record.val_acc_recal == record.val_acc and record.train_eval_loss_recal == record.train_eval_loss
