"""The classifier: about 70k trainable parameters at 120 classes, width scales it."""

from __future__ import annotations

import pytest

from sweep.config import ModelConfig
from sweep.model import build_model, trainable_parameters


def test_default_model_has_about_70k_parameters_at_120_classes() -> None:
    count = trainable_parameters(build_model(ModelConfig(), image_size=32, num_classes=120))
    assert 60_000 <= count <= 80_000, count


def test_parameter_count_does_not_depend_on_image_size() -> None:
    sizes = {trainable_parameters(build_model(ModelConfig(), s, 120)) for s in (16, 32, 48)}
    assert len(sizes) == 1


@pytest.mark.parametrize("width, low, high", [(0.5, 15_000, 25_000), (2.0, 230_000, 300_000)])
def test_width_scales_the_parameter_count(width: float, low: int, high: int) -> None:
    assert low <= trainable_parameters(build_model(ModelConfig(width=width), 32, 120)) <= high


def test_batchnorm_switch_and_momentum() -> None:
    with_bn = build_model(ModelConfig(bn_momentum=0.9), 32, 10)
    without = build_model(ModelConfig(batchnorm=False), 32, 10)
    momenta = [layer.momentum for layer in with_bn.layers if layer.__class__.__name__ == "BatchNormalization"]
    assert momenta == [0.9] * 4
    assert not [layer for layer in without.layers if layer.__class__.__name__ == "BatchNormalization"]
