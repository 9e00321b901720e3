"""benchmarks/costs/eval_roof.py: the arithmetic of one evaluation, counted from the model's layers, and the
table row it appends. Numbers, never timings.
"""

from __future__ import annotations

import pytest

from benchmarks.costs import eval_roof


@pytest.mark.integration
def test_flops_count_every_convolution_and_the_dense_layer_of_the_built_in_model() -> None:
    from sweep.config.keys import ModelConfig
    from sweep.train.model import build_model

    model = build_model(ModelConfig(), 32, 120)  # article.yaml's model: 32x32 grey images, 120 classes
    convolutions = [  # (output side, input channels, output channels), 3x3 kernels, each pooled by 2 after
        (32, 1, 16),
        (16, 16, 32),
        (8, 32, 48),
        (4, 48, 96),
    ]
    by_hand = sum(2 * side * side * 9 * cin * cout for side, cin, cout in convolutions) + 2 * 96 * 120
    assert eval_roof.flops(model) == by_hand == 5_773_824


@pytest.mark.unit
def test_the_row_gives_rates_and_shares_from_the_seconds() -> None:
    found = {
        "gflop": 13.9,
        "evaluate": 0.2,
        "matrix_gflops": 170.0,
        "bare": 0.19,
        "without_batchnorm": 0.15,
    }
    cells = [cell.strip() for cell in eval_roof.row(found, 1, "abc1234").strip("|").split("|")]
    assert cells[1] == "abc1234" and cells[3:] == ["1", "13.9", "0.200", "70", "170", "0.190", "0.95", "0.150", "25%"]
