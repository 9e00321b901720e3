"""The grid keys: one declaration per key, and the typed settings they make.

Every field of `DataConfig`, `ModelConfig` and `TrainConfig` is declared once,
with `key(...)`: its type (the annotation), default, check, doc line, slug (its
short name in run ids), the key version it appeared in, where it is used
(`Only`), what its value reaches, what of a training step's cost it sets, and
what the analysis needs to know of it. Everything else derives from these
declarations: the grid file's checks, `--help`, docs/grid.md's key list
(`readme_keys`), run-id slugs and the keys left out of ids at their default
(`plan`), the compiled-graph and pack keys, a timing configuration's keys
(`cost_keys`, read by sweep/config/timing_schema.py), and the analysis tables
(`control_defaults`, `post_defaults`, ...).
docs/design.md, "Adding a grid key", walks through one.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from sweep.config.declare import (  # noqa: F401
    BATCH,
    COMPANION,
    CONTROL,
    DATA,
    FIRST_RELEASE,
    GRAPH,
    INPUT,
    MODEL,
    NO_POST,
    PACK,
    RUN,
    UPDATE,
    Key,
    Only,
    key,
    yaml_text,
)
from sweep.config.stopping import rule_check
from sweep.config.validators import (
    boolean,
    int_at_least,
    non_negative_int,
    number_in,
    one_of,
    one_of_ints,
    optional_path,
    optional_positive_int,
    optional_reference,
    options_mapping,
    positive_int,
    references,
)

GLYPHS120, DIGITS, FOLDER, NPZ, LOADER = "glyphs120", "digits", "folder", "npz", "loader"
DATASETS = (GLYPHS120, DIGITS, FOLDER, NPZ, LOADER)
FILE_DATASETS = (FOLDER, NPZ)  # read from data.path
USER_DATASETS = (FOLDER, NPZ, LOADER)  # the user's images: grey or colour (data.channels)
USER_CODE = 6  # the key version of model.builder, data.loader and their companions
MISMATCHES = ("none", "scale", "standardize", "invert")
IMBALANCE_KEEPS = ("total", "minority")
OPTIMIZERS = ("adam", "sgd", "momentum")
LR_SCALINGS = ("none", "linear", "sqrt")
BUDGETS = ("epochs", "steps")

# sweep/train/model.py: four blocks, each ending in a 2x2 max-pooling that halves the map (rounding up).
# The fourth block needs a map of at least 2x2, so the image needs more than 2**3 pixels a side;
# at 8 or less some blocks run on a single pixel (at 2, three of the four).
POOLING_STAGES = 4
MIN_IMAGE_SIZE = 2 ** (POOLING_STAGES - 1) + 1
image_size_check = int_at_least(MIN_IMAGE_SIZE, f"each of the model's {POOLING_STAGES} poolings needs 2x2 pixels")


@dataclass(frozen=True)
class DataConfig:
    dataset: str = key(
        GLYPHS120,
        one_of(*DATASETS),
        f"{' | '.join(DATASETS)}: which dataset to train on",
        slug="ds",
        reach=PACK,
        cost=INPUT,
    )
    path: str | None = key(
        None,
        optional_path,
        "folder or .npz file for dataset folder | npz; relative to the grid file",
        slug="path",
        only=Only("data.dataset", FILE_DATASETS, required=True),
        reach=PACK,
    )
    loader: str | None = key(
        None,
        optional_reference,
        'for dataset loader: "module:function" or "file.py:function" (relative to the grid file) returning '
        "(x, y) arrays with the npz contract (docs/inputs.md)",
        slug="ld",
        since=USER_CODE,
        only=Only("data.dataset", (LOADER,), required=True),
        reach=PACK,
    )
    channels: int = key(
        1,
        one_of_ints(1, 3),
        "1 = grey (colour images converted) | 3 = colour kept, for dataset folder | npz | loader",
        slug="ch",
        since=USER_CODE,
        only=Only("data.dataset", USER_DATASETS),
        reach=GRAPH,
    )
    classes: int | None = key(
        None, optional_positive_int, "use only the first N classes; null = all", slug="cls", reach=PACK, cost=INPUT
    )
    samples_per_class: int = key(
        100,
        positive_int,
        "images per class before the split (a cap for digits, folder, npz, loader)",
        slug="spc",
        toggle=5,
        reach=PACK,
    )
    image_size: int = key(
        32,
        image_size_check,
        f"square; at least {MIN_IMAGE_SIZE}, so each of the model's {POOLING_STAGES} poolings has 2x2 pixels to pool",
        slug="img",
        reach=GRAPH,
        cost=INPUT,
    )
    val_fraction: float = key(
        0.2,
        number_in(0, 1, low_open=True, high_open=True),
        "share of each class held out for validation",
        slug="vf",
        reach=PACK,
    )
    shuffle: bool = key(
        True,
        boolean,
        'false: the training set in class order, the same every epoch (the post\'s "not shuffled")',
        slug="shuf",
        toggle=1,
        post=True,
        reach=DATA,
    )
    imbalance: float = key(
        0.0,
        number_in(0, 1, high_open=True),
        "share of the training set in class 0 (0.95 = the post's 95% apples); 0 = balanced; validation stays balanced",
        slug="imb",
        toggle=2,
        post=0.0,
        reach=PACK,
    )
    imbalance_keeps: str = key(
        "total",
        one_of(*IMBALANCE_KEEPS),
        "what data.imbalance keeps fixed: total = the training-set size (the other classes shrink); "
        "minority = every other class keeps its images and class 0 grows (the set grows)",
        slug="imbk",
        since=5,
        post="total",
        reach=PACK,
    )
    preprocess_mismatch: str = key(
        "none",
        one_of(*MISMATCHES),
        f"{' | '.join(MISMATCHES)}: how validation is preprocessed differently from training",
        slug="pm",
        toggle=3,
        post="none",
        reach=DATA,
    )
    seed: int = key(
        0,
        non_negative_int,
        "seed of the data itself (rendering, split); the same for every point, so validation is the same everywhere",
        slug="dseed",
        reach=DATA,
    )


@dataclass(frozen=True)
class ModelConfig:
    builder: str | None = key(
        None,
        optional_reference,
        'your own model: "module:function" or "file.py:function" (relative to the grid file), called as '
        "function(input_shape, num_classes, **model.options), returning an uncompiled keras.Model; "
        "null = the built-in CNN",
        slug="mb",
        since=USER_CODE,
        reach=GRAPH,
        cost=MODEL,
    )
    options: str | None = key(
        None,
        options_mapping,
        "keyword arguments for model.builder: a mapping of plain values (part of the run id)",
        slug="mo",
        since=USER_CODE,
        reach=GRAPH,
        cost=MODEL,
    )
    width: float = key(
        1.0,
        number_in(0, 16, low_open=True),
        "channel multiplier; 1.0 = about 72k trainable parameters at 120 classes",
        slug="w",
        toggle=4,
        post=1.0,
        reach=GRAPH,
        cost=MODEL,
    )
    batchnorm: bool = key(
        True,
        boolean,
        "BatchNormalization after each convolution",
        slug="bn",
        role=CONTROL,
        reach=GRAPH,
        cost=MODEL,
    )
    bn_momentum: float = key(
        0.99,
        number_in(0, 1, high_open=True),
        "BatchNormalization moving-statistics momentum",
        slug="bnm",
        only=Only("model.batchnorm", (True,)),
        role=CONTROL,
        reach=GRAPH,
        cost=MODEL,
    )
    ghost_batch_size: int | None = key(
        None,
        optional_positive_int,
        "BatchNorm statistics over sub-batches of this "
        "many images in training (ghost batch norm); null = the whole per-replica batch",
        slug="gbn",
        since=2,
        only=Only("model.batchnorm", (True,)),
        role=CONTROL,
        reach=GRAPH,
        cost=MODEL,
    )


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = key(10, positive_int, "passes over the training set", slug="ep", reach=PACK)
    batch_size: int = key(32, positive_int, "global batch, split evenly across gpus", slug="bs", reach=PACK, cost=BATCH)
    optimizer: str = key(
        "adam",
        one_of(*OPTIMIZERS),
        "adam | sgd | momentum (SGD with momentum 0.9)",
        slug="opt",
        reach=GRAPH,
        cost=UPDATE,
    )
    lr: float = key(0.001, number_in(0, math.inf, low_open=True, high_open=True), "learning rate", slug="lr", reach=RUN)
    gpus: int = key(
        1,
        positive_int,
        "data-parallel replicas (MirroredStrategy; DataParallel on JAX); logical CPU devices where GPUs are missing",
        slug="g",
        post=1,
        reach=PACK,
        cost=BATCH,
    )
    lr_scaling: str = key(
        "none",
        one_of(*LR_SCALINGS),
        "none | linear | sqrt: lr x (batch_size / reference_batch_size), or its square root",
        slug="lrs",
        since=2,
        role=CONTROL,
        reach=RUN,
    )
    reference_batch_size: int | None = key(
        None,
        optional_positive_int,
        "the batch size at which lr applies unscaled; required when lr_scaling is not none",
        slug="refbs",
        since=2,
        only=Only("train.lr_scaling", ("linear", "sqrt"), required=True),
        role=COMPANION,
        reach=RUN,
    )
    warmup_epochs: float = key(
        0.0,
        number_in(0, math.inf, high_open=True),
        "linear learning-rate warm-up from ~0 over this many epochs, per step; 0 = none",
        slug="wu",
        since=2,
        role=CONTROL,
        reach=PACK,
    )
    budget: str = key(
        "epochs",
        one_of(*BUDGETS),
        "epochs: train.epochs passes | steps: stop after exactly train.steps optimizer steps (train.epochs unused)",
        slug="bud",
        since=2,
        role=CONTROL,
        reach=PACK,
    )
    steps: int | None = key(
        None,
        optional_positive_int,
        "optimizer steps for budget: steps; the same for every batch size",
        slug="st",
        since=2,
        only=Only("train.budget", ("steps",), required=True),
        role=COMPANION,
        reach=PACK,
    )
    eval_every_steps: int | None = key(
        None,
        optional_positive_int,
        "also write a record every N optimizer steps (epoch is then fractional); null = once per epoch",
        slug="evs",
        since=2,
        role=COMPANION,
        reach=PACK,
    )
    early_stopping: str | None = key(
        None,
        rule_check,
        "{metric, patience, min_delta}: stop when metric (default val_acc) has not improved by more than "
        "min_delta (0) for patience (2) epochs; runs.csv's stopped_early names the epoch; null = never",
        slug="es",
        since=USER_CODE,
        reach=RUN,
    )
    callbacks: tuple[str, ...] = key(
        (),
        references,
        'Keras callbacks: a list of "module:factory" (or "file.py:factory"), each called with no arguments '
        "for a fresh callback per run; part of the run id",
        slug="cb",
        since=USER_CODE,
        reach=PACK,
    )
    noise_scale: bool = key(
        False,
        boolean,
        "also estimate the gradient noise scale B_simple at every record "
        "(McCandlish et al. 2018); training is unchanged",
        slug="gns",
        since=3,
        reach=PACK,
    )
    recalibrate_bn: bool = key(
        False,
        boolean,
        "also evaluate at every record with BatchNorm statistics recomputed on a fixed "
        "training subset (the *_recal columns); training is unchanged",
        slug="rbn",
        since=4,
        reach=PACK,
    )


SECTIONS: dict[str, type] = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig}


class UnknownSettings(ValueError):
    """A stored run uses settings this version does not know (queued by a newer version)."""


@dataclass(frozen=True)
class PointConfig:
    """Everything that defines one training run except the seed."""

    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    train: TrainConfig = TrainConfig()

    def value(self, dotted: str) -> Any:
        section, name = dotted.split(".")
        return getattr(getattr(self, section), name)

    def with_value(self, dotted: str, value: Any) -> PointConfig:
        section, name = dotted.split(".")
        return dataclasses.replace(self, **{section: dataclasses.replace(getattr(self, section), **{name: value})})

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(raw: dict[str, dict[str, Any]]) -> PointConfig:
        """Settings as stored; missing keys take their defaults (runs stored by an older harness)."""
        for name, cls in SECTIONS.items():
            unknown = set(raw.get(name, {})) - {f.name for f in dataclasses.fields(cls)}
            if unknown:
                names = ", ".join(sorted(f"{name}.{k}" for k in unknown))
                raise UnknownSettings(
                    f"settings unknown to this version of batchsweep: {names} "
                    f"(the run was queued by a newer version; upgrade this machine)"
                )
        return PointConfig(**{name: cls(**_tuples(raw.get(name, {}))) for name, cls in SECTIONS.items()})


def _tuples(values: dict[str, Any]) -> dict[str, Any]:
    """JSON gives lists back where the settings hold tuples (train.callbacks): hashable again."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
