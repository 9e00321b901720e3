"""The grid file: YAML in, frozen typed configs out.

YAML is parsed once, here, at the edge. Every error is a `ConfigError` whose
message names the file, the key path and what would be valid, e.g.
``grid.yaml: grid.train.batch_size[1]: must be a positive integer, got -4``.
Each field carries its own check and a one-line doc in its metadata; the
README's grid-file reference lists the same keys.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml


class ConfigError(Exception):
    """Bad grid file. The message is one line, ready for stderr."""


class UnknownSettings(ValueError):
    """A stored run uses settings this version does not know (queued by a newer version)."""


Check = Callable[[Any], Any]


# --- value checks: return the (normalised) value or raise ValueError("must ..., got ...")


def _got(value: Any) -> str:
    return f"got {value!r}" if not isinstance(value, str) else f"got '{value}'"


def positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"must be a positive integer, {_got(value)}")
    return value


def non_negative_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"must be an integer >= 0, {_got(value)}")
    return value


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, {_got(value)}")
    return value


def number_in(low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> Check:
    """A float in [low, high], with either end optionally open."""
    left, right = ("(" if low_open else "["), (")" if high_open else "]")
    interval = f"{left}{low:g}, {high:g}{right}"

    def check(value: Any) -> float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and math.isfinite(value)
        ok = ok and (value > low if low_open else value >= low)
        ok = ok and (value < high if high_open else value <= high)
        if not ok:
            raise ValueError(f"must be a number in {interval}, {_got(value)}")
        return float(value)

    return check


def one_of(*choices: str) -> Check:
    def check(value: Any) -> str:
        if value not in choices:
            hint = _did_you_mean(str(value), choices)
            raise ValueError(f"must be one of {' | '.join(choices)}, {_got(value)}{hint}")
        return value

    return check


def optional_path(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(f"must be a file or folder path or null, {_got(value)}")
    return value


def optional_positive_int(value: Any) -> int | None:
    return None if value is None else positive_int(value)


def _did_you_mean(word: str, options: Any) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _unknown(word: str, valid: Any) -> str:
    hint = _did_you_mean(word, valid)
    return f"unknown key{hint}{' ' if hint else '; '}valid keys: {', '.join(valid)}"


def _spec(default: Any, check: Check, doc: str) -> Any:
    return field(default=default, metadata={"check": check, "doc": doc})


# --- the sections of one grid point

DATASETS = ("glyphs120", "digits", "folder", "npz")
MISMATCHES = ("none", "scale", "standardize", "invert")
OPTIMIZERS = ("adam", "sgd", "momentum")
LR_SCALINGS = ("none", "linear", "sqrt")
BUDGETS = ("epochs", "steps")


@dataclass(frozen=True)
class DataConfig:
    dataset: str = _spec("glyphs120", one_of(*DATASETS), "which dataset to train on")
    path: str | None = _spec(None, optional_path, "folder or .npz file, for dataset folder | npz")
    classes: int | None = _spec(None, optional_positive_int, "use only the first N classes; null = all")
    samples_per_class: int = _spec(100, positive_int, "images per class before the train/val split (a cap for folder/npz/digits)")
    image_size: int = _spec(32, positive_int, "images are square, image_size x image_size, one channel")
    val_fraction: float = _spec(0.2, number_in(0, 1, low_open=True, high_open=True), "share of each class held out for validation")
    shuffle: bool = _spec(True, boolean, "false: the training set is fed in class order, every epoch")
    imbalance: float = _spec(0.0, number_in(0, 1, high_open=True), "share of the training set in class 0; 0 = balanced; validation stays balanced")
    preprocess_mismatch: str = _spec("none", one_of(*MISMATCHES), "how validation is preprocessed differently from training")
    seed: int = _spec(0, non_negative_int, "seed of the data itself (rendering, split); the same for every point so validation is shared")


@dataclass(frozen=True)
class ModelConfig:
    width: float = _spec(1.0, number_in(0, 16, low_open=True), "channel multiplier; 1.0 = about 70k parameters at 120 classes")
    batchnorm: bool = _spec(True, boolean, "BatchNormalization after each convolution")
    bn_momentum: float = _spec(0.99, number_in(0, 1, high_open=True), "BatchNormalization moving-statistics momentum")
    ghost_batch_size: int | None = _spec(None, optional_positive_int, "BatchNorm statistics over sub-batches of this many images in training (ghost batch norm); null = the whole per-replica batch")


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = _spec(10, positive_int, "passes over the training set")
    batch_size: int = _spec(32, positive_int, "global batch, split evenly across gpus")
    optimizer: str = _spec("adam", one_of(*OPTIMIZERS), "adam | sgd | momentum (SGD with momentum 0.9)")
    lr: float = _spec(0.001, number_in(0, math.inf, low_open=True, high_open=True), "learning rate")
    gpus: int = _spec(1, positive_int, "data-parallel replicas (MirroredStrategy); virtual CPU devices where GPUs are missing")
    # Controls (docs/design.md, "Controls"); added after the first release, so in plan.OMIT_WHEN_DEFAULT.
    lr_scaling: str = _spec("none", one_of(*LR_SCALINGS), "none | linear | sqrt: lr x (batch_size / reference_batch_size), or its square root")
    reference_batch_size: int | None = _spec(None, optional_positive_int, "the batch size at which lr applies unscaled; required when lr_scaling is not none")
    warmup_epochs: float = _spec(0.0, number_in(0, math.inf, high_open=True), "linear learning-rate warm-up from ~0 over this many epochs, per step; 0 = none")
    budget: str = _spec("epochs", one_of(*BUDGETS), "epochs: train.epochs passes; steps: stop after exactly train.steps optimizer steps (train.epochs unused)")
    steps: int | None = _spec(None, optional_positive_int, "optimizer steps for budget: steps; the same for every batch size")
    eval_every_steps: int | None = _spec(None, optional_positive_int, "also write a record every N optimizer steps (epoch is then fractional); null = once per epoch")


SECTIONS: dict[str, type] = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig}


@dataclass(frozen=True)
class PointConfig:
    """Everything that defines one training run except the seed."""

    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    train: TrainConfig = TrainConfig()

    def with_value(self, dotted: str, value: Any) -> PointConfig:
        section, key = dotted.split(".")
        return dataclasses.replace(self, **{section: dataclasses.replace(getattr(self, section), **{key: value})})

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(raw: dict[str, dict[str, Any]]) -> PointConfig:
        """Settings as stored; missing keys take their defaults (runs stored by an older harness)."""
        for name, cls in SECTIONS.items():
            unknown = set(raw.get(name, {})) - {f.name for f in dataclasses.fields(cls)}
            if unknown:
                keys = ", ".join(sorted(f"{name}.{k}" for k in unknown))
                raise UnknownSettings(f"settings unknown to this version of batchsweep: {keys} "
                                 f"(the run was queued by a newer version; upgrade this machine)")
        return PointConfig(**{name: cls(**raw.get(name, {})) for name, cls in SECTIONS.items()})


Setting = tuple[str, Any]  # (dotted key, value)


@dataclass(frozen=True)
class GridFile:
    """A parsed grid file: the base point, the axes to vary, the variants, and the seeds."""

    name: str
    seeds: tuple[int, ...]
    base: PointConfig
    grid: tuple[tuple[str, tuple[Any, ...]], ...]  # (dotted key, values) in file order
    variants: tuple[tuple[Setting, ...], ...]  # override sets; () is the base itself
    source: str  # the file it came from, for messages

    def points(self) -> list[tuple[PointConfig, tuple[Setting, ...]]]:
        """Every grid combination times every variant: (point, the settings that vary)."""
        import itertools

        keys = [key for key, _ in self.grid]
        result = []
        for combo in itertools.product(*(values for _, values in self.grid)):
            for variant in self.variants or ((),):
                settings = tuple(zip(keys, combo)) + variant
                point = self.base
                for key, value in settings:
                    point = point.with_value(key, value)
                result.append((point, settings))
        return result


TOP_LEVEL_KEYS = ("name", "seeds", "base", "grid", "variants")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def field_docs() -> dict[str, str]:
    """Dotted key -> one-line doc, for the README and --help."""
    return {
        f"{section}.{f.name}": f.metadata["doc"]
        for section, cls in SECTIONS.items()
        for f in dataclasses.fields(cls)
    }


def load_grid(path: str | Path) -> GridFile:
    """Read and validate a grid file; raise ConfigError with a one-line message."""
    path = Path(path)
    label = path.name
    raw = _read_yaml(path)
    try:
        grid_file = _parse(raw, label, path.parent)
    except _KeyError as err:
        raise ConfigError(f"{label}: {err.where}: {err.what}") from None
    return grid_file


class _KeyError(Exception):
    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")
        self.where, self.what = where, what


def _read_yaml(path: Path) -> Any:
    if not path.is_file():
        hint = " (it is a folder)" if path.is_dir() else ""
        raise ConfigError(f"{path}: no such grid file{hint}")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{path.name}: {where}YAML syntax error: {problem}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path.name}: not a UTF-8 text file") from None


def _parse(raw: Any, label: str, folder: Path) -> GridFile:
    if not isinstance(raw, dict):
        raise _KeyError("(top level)", f"must be a mapping with keys {', '.join(TOP_LEVEL_KEYS)}, got {type(raw).__name__}")
    _reject_unknown(raw, TOP_LEVEL_KEYS, "")
    name = _parse_name(raw.get("name", Path(label).stem))
    seeds = _parse_seeds(raw.get("seeds", [0]))
    base = _parse_base(raw.get("base") or {}, folder)
    grid = _parse_grid(raw.get("grid") or {}, folder)
    variants = _parse_variants(raw.get("variants"), {key for key, _ in grid}, folder)
    grid_file = GridFile(name=name, seeds=seeds, base=base, grid=grid, variants=variants, source=label)
    _check_points(grid_file)
    return grid_file


def _reject_unknown(mapping: dict, valid: Any, prefix: str) -> None:
    for key in mapping:
        if key not in valid:
            where = f"{prefix}{key}"
            raise _KeyError(where, _unknown(str(key), valid))


def _parse_name(value: Any) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise _KeyError("name", f"must be letters, digits, '_', '.' or '-' (it names the results folder), {_got(value)}")
    return value


def _parse_seeds(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise _KeyError("seeds", f"must be a non-empty list of integers >= 0, {_got(value)}")
    seeds = tuple(_checked(f"seeds[{i}]", non_negative_int, v) for i, v in enumerate(value))
    if len(set(seeds)) != len(seeds):
        raise _KeyError("seeds", f"must not repeat a seed, got {list(seeds)}")
    return seeds


def _checked(where: str, check: Check, value: Any) -> Any:
    try:
        return check(value)
    except ValueError as err:
        raise _KeyError(where, str(err)) from None


def _field_check(section: str, key: str, where: str) -> Check:
    cls = SECTIONS[section]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if key not in fields:
        raise _KeyError(where, _unknown(key, fields))
    return fields[key].metadata["check"]


def _parse_base(raw: Any, folder: Path) -> PointConfig:
    if not isinstance(raw, dict):
        raise _KeyError("base", f"must be a mapping with sections {', '.join(SECTIONS)}, {_got(raw)}")
    _reject_unknown(raw, SECTIONS, "base.")
    point = PointConfig()
    for section, values in raw.items():
        values = values or {}
        if not isinstance(values, dict):
            raise _KeyError(f"base.{section}", f"must be a mapping of keys to values, {_got(values)}")
        for key, value in values.items():
            where = f"base.{section}.{key}"
            value = _checked(where, _field_check(section, str(key), where), value)
            point = point.with_value(f"{section}.{key}", _resolve(section, str(key), value, folder, where))
    return point


def _parse_grid(raw: Any, folder: Path) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not isinstance(raw, dict):
        raise _KeyError("grid", f"must be a mapping of dotted keys (e.g. train.batch_size) to lists, {_got(raw)}")
    axes = []
    for dotted, values in raw.items():
        section, key = _split_dotted(str(dotted), f"grid.{dotted}")
        check = _field_check(section, key, f"grid.{dotted}")
        if not isinstance(values, list) or not values:
            raise _KeyError(f"grid.{dotted}", f"must be a non-empty list of values, {_got(values)}")
        checked = tuple(
            _resolve(section, key, _checked(f"grid.{dotted}[{i}]", check, v), folder, f"grid.{dotted}[{i}]")
            for i, v in enumerate(values)
        )
        if len(set(checked)) != len(checked):
            raise _KeyError(f"grid.{dotted}", f"must not repeat a value, got {list(values)}")
        axes.append((f"{section}.{key}", checked))
    return tuple(axes)


def _split_dotted(dotted: str, where: str) -> tuple[str, str]:
    parts = dotted.split(".")
    if len(parts) != 2 or parts[0] not in SECTIONS:
        valid = ", ".join(f"{s}.<key>" for s in SECTIONS)
        hint = _did_you_mean(parts[0], SECTIONS) if len(parts) == 2 else ""
        raise _KeyError(where, f"keys are dotted paths into base ({valid}){hint}")
    return parts[0], parts[1]


def _resolve(section: str, key: str, value: Any, folder: Path, where: str) -> Any:
    """Make data.path absolute (relative to the grid file) and check it exists."""
    if (section, key) != ("data", "path") or value is None:
        return value
    resolved = (folder / Path(value).expanduser()).resolve()
    if not resolved.exists():
        raise _KeyError(where, f"no such file or folder: {resolved}")
    return str(resolved)


def _parse_variants(raw: Any, grid_keys: set[str], folder: Path) -> tuple[tuple[Setting, ...], ...]:
    """A list of override mappings ({} = the base itself), each crossed with the grid."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise _KeyError("variants", f"must be a non-empty list of mappings of dotted keys to values, {_got(raw)}")
    variants = []
    for i, overrides in enumerate(raw):
        overrides = overrides or {}
        if not isinstance(overrides, dict):
            raise _KeyError(f"variants[{i}]", f"must be a mapping of dotted keys to values ({{}} = the base), {_got(overrides)}")
        settings = []
        for dotted, value in overrides.items():
            where = f"variants[{i}].{dotted}"
            section, key = _split_dotted(str(dotted), where)
            value = _resolve(section, key, _checked(where, _field_check(section, key, where), value), folder, where)
            if f"{section}.{key}" in grid_keys:
                raise _KeyError(where, f"{section}.{key} is also a grid axis; vary a key in grid or in variants, not both")
            settings.append((f"{section}.{key}", value))
        variants.append(tuple(settings))
    if len(set(variants)) != len(variants):
        raise _KeyError("variants", "must not repeat a variant")
    return tuple(variants)


def _check_points(grid_file: GridFile) -> None:
    """Checks that involve several keys, on every point the grid and variants make."""
    for point, settings in grid_file.points():
        problem = point_problem(point)
        if problem:
            where = "base" if not settings else "grid point " + ", ".join(f"{k}={v}" for k, v in settings)
            raise _KeyError(where, problem)


def point_problem(point: PointConfig) -> str | None:
    """What is wrong with a combination of otherwise valid values, or None."""
    train, data = point.train, point.data
    if train.batch_size % train.gpus:
        return (f"train.batch_size={train.batch_size} is not divisible by train.gpus={train.gpus}; "
                f"the global batch is split evenly across replicas")
    control = _control_problem(point)
    if control:
        return control
    if data.dataset in ("folder", "npz") and data.path is None:
        return f"data.path is required for data.dataset={data.dataset}"
    if data.dataset in ("glyphs120", "digits") and data.path is not None:
        return f"data.path is only used by dataset folder | npz, not {data.dataset}; remove it"
    if data.dataset == "npz" and data.path and not data.path.endswith(".npz"):
        return f"data.path must be a .npz file for dataset npz, got {data.path}"
    if data.dataset == "folder" and data.path and not Path(data.path).is_dir():
        return f"data.path must be a folder (one sub-folder per class) for dataset folder, got {data.path}"
    return None


def _control_problem(point: PointConfig) -> str | None:
    """Cross-key checks of the control axes (learning-rate scaling, budget, ghost batches)."""
    train, model = point.train, point.model
    if train.lr_scaling != "none" and train.reference_batch_size is None:
        return f"train.reference_batch_size is required for train.lr_scaling={train.lr_scaling}"
    if train.lr_scaling == "none" and train.reference_batch_size is not None:
        return "train.reference_batch_size is only used with train.lr_scaling linear | sqrt; remove it"
    if train.budget == "steps" and train.steps is None:
        return "train.steps is required for train.budget=steps"
    if train.budget == "epochs" and train.steps is not None:
        return "train.steps is only used with train.budget=steps; remove it"
    if train.budget == "epochs" and train.warmup_epochs >= train.epochs:
        return f"train.warmup_epochs={train.warmup_epochs:g} must be less than train.epochs={train.epochs}"
    per_replica = train.batch_size // train.gpus
    if model.ghost_batch_size is not None and per_replica % model.ghost_batch_size:
        return (f"model.ghost_batch_size={model.ghost_batch_size} must divide the per-replica batch "
                f"{per_replica} (train.batch_size / train.gpus), or be null")
    if model.ghost_batch_size is not None and not model.batchnorm:
        return "model.ghost_batch_size needs model.batchnorm: true; remove it"
    return None
