"""--keep-models: each done run's final model reloads with keras.saving.load_model and gives the run's
final val_acc on its validation split; without it, a finished run leaves no checkpoint behind.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import sweep_here, write_grid

from sweep import vocab
from sweep.config.plan import plan
from sweep.run import resume
from sweep.train import checkpoint
from sweep.train.compiled import EVAL_BATCH
from sweep.train.data import load_split

pytestmark = pytest.mark.integration

GRID = """\
    name: keep
    seeds: [0]
    base:
      data: {dataset: glyphs120, classes: 4, samples_per_class: 10, image_size: 12}
      train: {epochs: 2, batch_size: 8}
    grid:
      model.ghost_batch_size: [null, 4]
"""


def test_kept_models_reload_and_reproduce_final_val_acc(tmp_path: Path) -> None:
    import keras

    from sweep.config import load_grid
    from sweep.train.model import ghost_batch_norm_class

    grid = write_grid(tmp_path, GRID)
    results = tmp_path / "results" / "keep"
    outcome, _ = sweep_here(grid, keep_models=True)
    assert outcome.exit_code == 0
    runs = pd.read_csv(outcome.runs_csv).set_index(vocab.RUN_ID)
    for spec in plan(load_grid(grid)):
        path = results / resume.MODELS_DIR / f"{spec.run_id}.keras"
        ghost = spec.point.model.ghost_batch_size is not None
        # The built-in model loads as it is; ghost batch norm is a class of this package, named to Keras.
        custom = {"GhostBatchNormalization": ghost_batch_norm_class()} if ghost else None
        model = keras.saving.load_model(path, custom_objects=custom)
        split = load_split(spec.point.data)
        got = model.evaluate(split.x_val, split.y_val, batch_size=EVAL_BATCH, verbose=0, return_dict=True)
        assert float(got["accuracy"]) == runs.loc[spec.run_id, "final_val_acc"]
        assert float(checkpoint.load_model(path).evaluate(split.x_val, split.y_val, verbose=0)[1]) == float(
            got["accuracy"]
        )
        assert (results / resume.CHECKPOINTS_DIR / f"{spec.run_id}.npz").exists()  # kept with the flag


def test_without_the_flag_finished_runs_leave_no_checkpoint(tmp_path: Path) -> None:
    outcome, _ = sweep_here(write_grid(tmp_path, GRID))
    assert outcome.exit_code == 0
    results = tmp_path / "results" / "keep"
    assert list((results / resume.CHECKPOINTS_DIR).iterdir()) == []
    assert not (results / resume.MODELS_DIR).exists()


WARMUP_GRID = """\
    name: warm
    seeds: [0]
    base:
      data: {dataset: glyphs120, classes: 4, samples_per_class: 10, image_size: 12}
      train: {epochs: 2, batch_size: 8, warmup_epochs: 1}
"""


def test_a_kept_model_with_warm_up_reloads_compiled_and_reproduces_its_final_validation_numbers(tmp_path: Path) -> None:
    """The warm-up schedule is a registered class (`batchsweep>Warmup`): the model loads with its
    compiled optimizer, as a user loads it (README, "Preemption-safe runs"), not only with compile=False.
    """
    import keras

    import sweep.train.warmup  # what a user imports before loading: it registers the schedule's class
    from sweep.config import load_grid

    grid = write_grid(tmp_path, WARMUP_GRID)
    outcome, _ = sweep_here(grid, keep_models=True)
    assert outcome.exit_code == 0
    runs = pd.read_csv(outcome.runs_csv).set_index(vocab.RUN_ID)
    (spec,) = plan(load_grid(grid))
    path = tmp_path / "results" / "warm" / resume.MODELS_DIR / f"{spec.run_id}.keras"
    model = keras.saving.load_model(path)  # compile on, the default
    schedule = model.optimizer.get_config()["learning_rate"]  # as Keras serializes it
    split = load_split(spec.point.data)
    steps = math.ceil(len(split.y_train) / spec.point.train.batch_size)  # warmup_epochs: 1
    assert schedule["registered_name"] == "batchsweep>Warmup"
    assert schedule["config"] == {"lr": spec.point.train.lr, "warmup_steps": steps}
    assert keras.saving.get_registered_object("batchsweep>Warmup") is sweep.train.warmup.Warmup
    # The optimizer comes back where training left it: 2 epochs of steps, past the warm-up, so at the full lr.
    assert int(model.optimizer.iterations) == 2 * steps
    assert float(model.optimizer.learning_rate) == float(np.float32(spec.point.train.lr))
    got = model.evaluate(split.x_val, split.y_val, batch_size=EVAL_BATCH, verbose=0, return_dict=True)
    assert float(got["accuracy"]) == runs.loc[spec.run_id, "final_val_acc"]
    assert float(got["loss"]) == runs.loc[spec.run_id, "final_val_loss"]
