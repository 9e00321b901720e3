"""Recalibrated BatchNorm evaluation (sweep/train/recal.py): training untouched, numbers as Keras's own
BatchNorm gives.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_controls import tiny_spec  # 4 classes x 8 training images at 12 px; train_eval fits one pass

from sweep import vocab
from sweep.config.plan import RunSpec
from sweep.train.session import Session
from sweep.train.trainer import Trainer

TIMINGS = ("epoch_seconds", "samples_per_second")


def records(specs: list[RunSpec]) -> list[dict]:
    """Every record of these runs, trained one after the other in one worker (the second reuses the model)."""
    session = Session()
    return [r.to_dict() for spec in specs for r in Trainer.alone(spec, session).epochs()]


def without(rows: list[dict], names: tuple[str, ...]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in names} for row in rows]


@pytest.mark.integration
@pytest.mark.parametrize("gpus", [1, 2])
def test_recalibration_adds_five_columns_and_changes_no_other_number(gpus: int) -> None:
    plain = records([tiny_spec(seed=0, gpus=gpus), tiny_spec(seed=1, lr=0.01, gpus=gpus)])
    recal = records(
        [tiny_spec(seed=0, gpus=gpus, recalibrate_bn=True), tiny_spec(seed=1, lr=0.01, gpus=gpus, recalibrate_bn=True)]
    )
    assert all(name not in row for row in plain for name in vocab.RECAL_METRICS)
    assert all(set(vocab.RECAL_METRICS) <= set(row) for row in recal)
    assert without(recal, TIMINGS + vocab.RECAL_METRICS) == without(plain, TIMINGS)  # bit for bit
    for row in recal:
        assert row[vocab.EVAL_GAP_RECAL] == row[vocab.TRAIN_EVAL_ACC_RECAL] - row[vocab.VAL_ACC_RECAL]


@pytest.mark.integration
def test_recalibrated_numbers_equal_keras_batchnorm_set_to_the_subsets_statistics() -> None:
    """The oracle: the trained weights in a fresh model whose BatchNorm layers, with momentum 0, take the
    statistics of one training-mode pass over the train_eval subset (8 images, one batch), then evaluate.
    """
    import keras

    from sweep.train import model as model_module

    spec = tiny_spec(recalibrate_bn=True)
    run = Trainer.alone(spec)
    last = [r.to_dict() for r in run.epochs()][-1]
    split = run.runs[0].split
    oracle = model_module.build_model(
        dataclasses.replace(spec.point.model, bn_momentum=0.0), spec.point.data.image_size, split.num_classes
    )
    oracle.set_weights(run.model.get_weights())
    oracle(split.x_train_eval, training=True)  # momentum 0: moving statistics := this batch's statistics
    oracle.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    expect_train = oracle.evaluate(split.x_train_eval, split.y_train_eval, verbose=0, return_dict=True)
    expect_val = oracle.evaluate(split.x_val, split.y_val, verbose=0, return_dict=True)
    assert last[vocab.TRAIN_EVAL_ACC_RECAL] == pytest.approx(expect_train["accuracy"])
    assert last[vocab.VAL_ACC_RECAL] == pytest.approx(expect_val["accuracy"])
    assert last[vocab.TRAIN_EVAL_LOSS_RECAL] == pytest.approx(expect_train["loss"], rel=1e-4)
    assert last[vocab.VAL_LOSS_RECAL] == pytest.approx(expect_val["loss"], rel=1e-4)
    # and not the lagging statistics: the run's own model evaluates differently
    assert last[vocab.VAL_LOSS_RECAL] != pytest.approx(last[vocab.VAL_LOSS], rel=1e-3)
    assert isinstance(oracle.get_layer("bn0"), keras.layers.BatchNormalization)


@pytest.mark.integration
def test_the_recipe_the_study_gives_users_reproduces_the_recalibrated_numbers() -> None:
    """experiments/own_model/recompute_batchnorm.py, plain Keras a user copies, run on the trained model and the
    train_eval images: its val accuracy and loss are the run's val_acc_recal and val_loss_recal, and its momenta
    are put back. In batches of 3 (8 images: 3, 3, 2) the first BatchNorm's mean is the mean over all 8 images,
    each batch weighed by its size (its variance, the mean of the batches' own, is close, not equal: docs/study.md).
    """
    import importlib.util

    import keras
    from conftest import REPO

    path = REPO / "experiments" / "own_model" / "recompute_batchnorm.py"
    found = importlib.util.spec_from_file_location("recipe", path)
    assert found is not None and found.loader is not None
    recipe = importlib.util.module_from_spec(found)
    found.loader.exec_module(recipe)
    spec = tiny_spec(recalibrate_bn=True)
    run = Trainer.alone(spec)
    last = [r.to_dict() for r in run.epochs()][-1]
    split, model = run.runs[0].split, run.model
    momenta = [layer.momentum for layer in recal_norms(model)]
    recipe.recompute_batchnorm(model, split.x_train_eval)
    assert [layer.momentum for layer in recal_norms(model)] == momenta
    got = model.evaluate(split.x_val, split.y_val, verbose=0, return_dict=True)
    assert got["accuracy"] == pytest.approx(last[vocab.VAL_ACC_RECAL])
    assert got["loss"] == pytest.approx(last[vocab.VAL_LOSS_RECAL], rel=1e-3)
    recipe.recompute_batchnorm(model, split.x_train_eval, batch_size=3)
    conv = keras.Model(model.inputs, model.get_layer("conv0").output)
    values = keras.ops.convert_to_numpy(conv(split.x_train_eval)).astype(np.float64)
    assert len(values) == 8
    mean = values.reshape(-1, values.shape[-1]).mean(axis=0)
    assert np.asarray(model.get_layer("bn0").moving_mean) == pytest.approx(mean, rel=1e-4, abs=1e-6)


def recal_norms(model):
    from sweep.train import recal

    return recal.batch_norms(model)


@pytest.mark.integration
@pytest.mark.parametrize("ghost", [None, 2])
def test_statistics_are_pooled_over_passes_and_positions(ghost: int | None) -> None:
    """24 images in passes of 5, 5, 5, 5, 4: the first BatchNorm's statistics are its input's mean and
    (biased) variance over all 24 images and every position, as numpy computes them in one go. Keras's
    BatchNorm is read from its own moments; ghost batch norm, which averages its sub-batches' moments
    (2 images each here), from its inputs.
    """
    import keras

    from sweep.train import model as model_module
    from sweep.train import recal

    spec = tiny_spec(model={"ghost_batch_size": ghost})
    build = lambda: model_module.build_model(spec.point.model, 12, 4)  # noqa: E731
    weights = build().get_weights()
    split = Trainer.alone(spec).runs[0].split
    many = dataclasses.replace(
        split, x_train_eval=np.concatenate([split.x_train_eval] * 3), y_train_eval=np.tile(split.y_train_eval, 3)
    )
    twin = recal.Twin(build, eval_batch=512)
    recal_batch, recal.RECAL_BATCH = recal.RECAL_BATCH, 5
    try:
        twin.evaluate(weights, many, Session().eval_batches)
    finally:
        recal.RECAL_BATCH = recal_batch
    conv = keras.Model(twin.model.inputs, twin.model.get_layer("conv0").output)
    values = keras.ops.convert_to_numpy(conv(many.x_train_eval)).astype(np.float64).reshape(-1, 16)  # 24 x 12 x 12
    bn0 = twin.model.get_layer("bn0")
    assert np.asarray(bn0.moving_mean) == pytest.approx(values.mean(axis=0), rel=1e-4, abs=1e-6)
    assert np.asarray(bn0.moving_variance) == pytest.approx(values.var(axis=0), rel=1e-4, abs=1e-6)


@pytest.mark.integration
def test_without_batchnorm_the_recalibrated_numbers_are_the_raw_ones() -> None:
    rows = records([tiny_spec(model={"batchnorm": False}, recalibrate_bn=True)])
    for row in rows:
        assert row[vocab.VAL_ACC_RECAL] == row[vocab.VAL_ACC]
        assert row[vocab.TRAIN_EVAL_LOSS_RECAL] == row[vocab.TRAIN_EVAL_LOSS]
        assert row[vocab.EVAL_GAP_RECAL] == row[vocab.EVAL_GAP]


@pytest.mark.unit
def test_pooled_chunks_give_the_mean_and_variance_of_all_values_together() -> None:
    """`recal.pool` rebuilds the statistics of the whole set from each chunk's own (a shorter last
    chunk included), as float64 statistics over every value would give them.
    """
    from sweep.train import recal

    rng = np.random.default_rng(0)
    values = np.maximum(rng.standard_normal((1200 * 8 * 8, 16)) * 3.0 + 2.0, 0).astype(np.float32)  # ReLU'd
    per_image = 8 * 8
    chunks = []
    for start in range(0, 1200, 512):  # 512, 512 and 176 images
        part = values[start * per_image : (start + 512) * per_image].astype(np.float64)
        chunks.append((len(part) // per_image, part.mean(axis=0), part.var(axis=0)))
    mean, var = recal.pool(chunks)
    whole = values.astype(np.float64)
    assert mean == pytest.approx(whole.mean(axis=0), rel=1e-12)
    assert var == pytest.approx(whole.var(axis=0), rel=1e-12)


@pytest.mark.integration
def test_kept_evaluation_pipelines_give_what_fresh_ones_give_for_every_set_and_trainer() -> None:
    """A record's evaluations read pipelines its worker session keeps from the run's first record
    (`Session.eval_batches`): train_eval and validation each get their own, every call gives what a fresh
    pipeline gives, and the session's next trainer (another data seed: other arrays) reads its own sets,
    the last trainer's pipelines dropped.
    """
    from sweep.train import data as data_module

    session, last = Session(), None
    for data_seed in (0, 1):
        spec = tiny_spec()
        spec = dataclasses.replace(spec, point=spec.point.with_value("data.seed", data_seed))
        trainer = Trainer.alone(spec, session)
        engine, split = trainer.engine, trainer.runs[0].split
        sets = [(split.x_train_eval, split.y_train_eval), (split.x_val, split.y_val)]
        if last is not None:
            assert session.eval_batches(*last[0], 512) is not last[1]  # the last trainer's: dropped
        assert session.eval_batches(*sets[0], 512) is session.eval_batches(*sets[0], 512)  # kept
        assert session.eval_batches(*sets[0], 512) is not session.eval_batches(*sets[1], 512)
        last = sets[0], session.eval_batches(*sets[0], 512)
        for x, y in sets * 2:
            fresh = engine.model.evaluate(data_module.batches(x, y, 512), verbose=0, return_dict=True)
            kept = engine.evaluate([(x, y)])[0]
            assert kept == {"accuracy": float(fresh["accuracy"]), "loss": float(fresh["loss"])}
