"""The classifier: 72,072 trainable parameters at 120 classes, counted by hand; width scales it."""

from __future__ import annotations

import pytest

from sweep.config import ModelConfig
from sweep.train.model import build_model, channels, trainable_parameters

pytestmark = pytest.mark.integration


def expected_parameters(width: float, classes: int, batchnorm: bool = True) -> int:
    """By hand: 3x3 convolutions (a bias only without BatchNorm), BatchNorm's gamma and beta, the dense layer."""
    total, inputs = 0, 1
    for filters in channels(width):
        total += 9 * inputs * filters + (2 * filters if batchnorm else filters)
        inputs = filters
    return total + inputs * classes + classes


def test_default_model_has_72k_parameters_at_120_classes() -> None:
    count = trainable_parameters(build_model(ModelConfig(), image_size=32, num_classes=120))
    assert count == expected_parameters(1.0, 120) == 72_072  # the README's "72k"


def test_parameter_count_does_not_depend_on_image_size() -> None:
    sizes = {trainable_parameters(build_model(ModelConfig(), s, 120)) for s in (16, 32, 48)}
    assert len(sizes) == 1


@pytest.mark.parametrize("width, count", [(0.5, 21_120), (2.0, 263_832)])
def test_width_scales_the_parameter_count(width: float, count: int) -> None:
    model = build_model(ModelConfig(width=width), 32, 120)
    assert trainable_parameters(model) == expected_parameters(width, 120) == count


def test_without_batchnorm_the_convolutions_have_biases() -> None:
    count = trainable_parameters(build_model(ModelConfig(batchnorm=False), 32, 120))
    assert count == expected_parameters(1.0, 120, batchnorm=False) == 71_880


def test_batchnorm_switch_and_momentum() -> None:
    with_bn = build_model(ModelConfig(bn_momentum=0.9), 32, 10)
    without = build_model(ModelConfig(batchnorm=False), 32, 10)
    momenta = [layer.momentum for layer in with_bn.layers if layer.__class__.__name__ == "BatchNormalization"]
    assert momenta == [0.9] * 4
    assert not [layer for layer in without.layers if layer.__class__.__name__ == "BatchNormalization"]
