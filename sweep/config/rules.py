"""Rules across keys: which keys a point uses, and what is wrong with a combination of valid values.

A key declared with `Only` (sweep/config/keys.py) is inert where its condition does not
hold: `train.steps` under `train.budget: epochs`. In a grid it may be set for the
points that use it; the others get it at its default (`without_inert`), so their
run ids are the ids they would have without it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sweep.config import stopping
from sweep.config.declared import conditional, default
from sweep.config.keys import DIGITS, FOLDER, NPZ, Key, PointConfig, yaml_text
from sweep.vocab import RECAL


def is_set(point: PointConfig, k: Key) -> bool:
    return point.value(k.name) != k.default


def inert(point: PointConfig) -> list[Key]:
    """The keys set at `point` that it does not use."""
    return [k for k in conditional() if is_set(point, k) and k.only and point.value(k.only.on) not in k.only.values]


def unused(point: PointConfig) -> set[str]:
    """The names of the keys `point` does not use, set or not (bn_momentum without BatchNorm)."""
    return {k.name for k in conditional() if k.only and point.value(k.only.on) not in k.only.values}


def without_inert(point: PointConfig) -> PointConfig:
    """`point` with the keys it does not use at their defaults."""
    for k in inert(point):
        point = point.with_value(k.name, k.default)
    return point


def point_problem(point: PointConfig) -> str | None:
    """What is wrong with a combination of otherwise valid values, or None."""
    for check in (_batch_problem, _declared_problem, _control_problem, _file_problem, _user_code_problem):
        problem = check(point)
        if problem:
            return problem
    return None


def _batch_problem(point: PointConfig) -> str | None:
    train = point.train
    if train.batch_size % train.gpus:
        return (
            f"train.batch_size={train.batch_size} is not divisible by train.gpus={train.gpus}; "
            f"the global batch is split evenly across replicas"
        )
    return None


def _declared_problem(point: PointConfig) -> str | None:
    """A key its declaration requires here and that is not set, or one set where it is not used."""
    for k in conditional():
        if k.only and k.only.required and point.value(k.only.on) in k.only.values and not is_set(point, k):
            return f"{k.name} is required for {k.only.on}={yaml_text(point.value(k.only.on))}"
    unused = inert(point)
    if unused:
        return f"{unused[0].name} is only used with {unused[0].where_used()}; remove it"
    return None


def _file_problem(point: PointConfig) -> str | None:
    data = point.data
    if data.dataset == NPZ and data.path and not data.path.endswith(".npz"):
        return f"data.path must be a .npz file for dataset npz, got {data.path}"
    if data.dataset == FOLDER and data.path and not Path(data.path).is_dir():
        return f"data.path must be a folder (one sub-folder per class) for dataset folder, got {data.path}"
    if data.dataset == DIGITS and importlib.util.find_spec("sklearn") is None:
        return "data.dataset: digits is scikit-learn's digits; install it with pip install 'batchsweep[digits]'"
    return None


def _control_problem(point: PointConfig) -> str | None:
    """Cross-key checks of the control axes (learning-rate warm-up, ghost batches, noise scale)."""
    train, model = point.train, point.model
    if train.budget == "epochs" and train.warmup_epochs >= train.epochs:
        return f"train.warmup_epochs={train.warmup_epochs:g} must be less than train.epochs={train.epochs}"
    per_replica = train.batch_size // train.gpus
    if model.ghost_batch_size is not None and per_replica % model.ghost_batch_size:
        return (
            f"model.ghost_batch_size={model.ghost_batch_size} must divide the per-replica batch "
            f"{per_replica} (train.batch_size / train.gpus), or be null"
        )
    if train.noise_scale and train.gpus > 1:
        return "train.noise_scale is measured on one device; use train.gpus: 1 for the runs that measure it"
    return None


BUILT_IN_MODEL = ("model.width", "model.batchnorm", "model.bn_momentum")  # the CNN's own settings


def _user_code_problem(point: PointConfig) -> str | None:
    """Settings of the built-in model under model.builder, options without a builder, a stopping metric
    that is not recorded.
    """
    model = point.model
    if model.builder:
        for name in BUILT_IN_MODEL:
            if point.value(name) != default(name):
                return f"{name} is a setting of the built-in model; pass your model's settings in model.options"
    elif model.options is not None:
        return "model.options are the keyword arguments of model.builder; set model.builder too, or remove them"
    rule = stopping.parse(point.train.early_stopping)
    if rule and rule.metric.endswith(RECAL) and not point.train.recalibrate_bn:
        return f"train.early_stopping metric {rule.metric} is recorded only with train.recalibrate_bn: true"
    return None
