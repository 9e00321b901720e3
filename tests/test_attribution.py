"""Attribution arms on the committed controls results: each arm is named by what it changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep import analysis as an
from sweep.claims import attribution

pytestmark = pytest.mark.unit

CONTROLS = Path(__file__).resolve().parent.parent / "results" / "controls"


def test_an_arm_is_named_by_its_controls_not_by_settings_every_arm_shares() -> None:
    """Every controls run records every 60 steps (train.eval_every_steps): that names no arm, while
    train.steps belongs to the equal-steps arm's train.budget.
    """
    epochs = an.load([CONTROLS]).epochs
    assert (epochs["train.eval_every_steps"] == 60).all()
    found = attribution.attribution(epochs)
    assert found is not None
    labels = [a.label for a in found.arms]
    assert len(labels) == 8 and not [label for label in labels if "eval_every_steps" in label]
    assert "(c) equal optimizer steps: train.budget=steps, train.steps=1440" in labels
    assert "(b) BatchNorm momentum: model.bn_momentum=0.9" in labels
