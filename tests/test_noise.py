"""The gradient noise scale: the estimator on problems whose noise is known, and in a real run."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sweep import vocab
from sweep.config import DataConfig, PointConfig, TrainConfig
from sweep.config.plan import RunSpec
from sweep.train import noise
from sweep.train.trainer import Trainer

DIM, MEAN, SIGMA = 50, 0.2, 1.0  # per-example gradients ~ N(mu, sigma^2 I) with |mu|^2 = 50 x 0.04 = 2
TRUE_B_SIMPLE = DIM * SIGMA**2 / (DIM * MEAN**2)  # tr(Sigma) / |G|^2 = 50 / 2 = 25


@pytest.mark.unit
def test_the_estimator_inverts_the_expected_norms_exactly() -> None:
    g2, trace = 2.0, 50.0

    def expected_sq(b: int) -> float:  # E|G_B|^2 = |G|^2 + tr(Sigma) / B
        return g2 + trace / b

    found = noise.estimate(expected_sq(8), expected_sq(32), 8, 32)
    assert (found.grad_norm_sq, found.grad_noise_trace, found.b_simple) == pytest.approx((2.0, 50.0, 25.0))


@pytest.mark.unit
def test_measure_recovers_a_known_noise_scale_from_sampled_gradients() -> None:
    rng = np.random.default_rng(0)
    examples = rng.normal(MEAN, SIGMA, size=(20_000, DIM))  # each row: one example's gradient

    def gradient(xb: np.ndarray, yb: np.ndarray) -> np.ndarray:  # a batch's gradient: the mean of its examples'
        return xb.mean(axis=0)

    found = noise.measure(gradient, examples, np.zeros(len(examples)), batch=8, rng=rng, images=20_000)
    assert found.b_simple == pytest.approx(TRUE_B_SIMPLE, rel=0.1)
    assert found.grad_norm_sq == pytest.approx(DIM * MEAN**2, rel=0.1)


@pytest.mark.integration
def test_keras_gradients_of_a_linear_model_recover_the_known_noise_scale() -> None:
    """loss = mean(w . x): the gradient of one example is x itself, whatever w."""
    import keras

    model = keras.Sequential([keras.Input((DIM,)), keras.layers.Dense(1, use_bias=False)])
    gradient = noise.keras_gradient(model, lambda y, pred: keras.ops.mean(pred))
    rng = np.random.default_rng(1)
    x = rng.normal(MEAN, SIGMA, size=(8_000, DIM)).astype("float32")
    found = noise.measure(gradient, x, np.zeros(len(x), "float32"), batch=16, rng=rng, images=8_000)
    assert found.b_simple == pytest.approx(TRUE_B_SIMPLE, rel=0.15)


@pytest.mark.integration
def test_measuring_records_the_noise_scale_and_changes_nothing_else() -> None:
    point = PointConfig(
        data=DataConfig(dataset="glyphs120", classes=4, samples_per_class=10, image_size=12),
        train=TrainConfig(epochs=2, batch_size=8),
    )
    spec = RunSpec(sweep="t", seed=0, point=point, varying=(("seed", 0),))
    plain = [r.to_dict() for r in Trainer.alone(spec).epochs()]
    measured_spec = dataclasses.replace(spec, point=point.with_value("train.noise_scale", True))
    measured = [r.to_dict() for r in Trainer.alone(measured_spec).epochs()]
    assert all(k not in plain[0] for k in vocab.NOISE_METRICS)  # off: records exactly as before
    timing = ("epoch_seconds", "samples_per_second", *vocab.NOISE_METRICS)
    assert [{k: v for k, v in r.items() if k not in timing} for r in measured] == [
        {k: v for k, v in r.items() if k not in timing} for r in plain
    ]
    for record in measured:
        assert record[vocab.NOISE_SCALE] == pytest.approx(record[vocab.GRAD_NOISE_TRACE] / record[vocab.GRAD_NORM_SQ])
        assert record[vocab.GRAD_NOISE_TRACE] > 0
