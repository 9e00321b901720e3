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
import reprlib
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


# Values are shown shortened: a hostile file can hold a huge or self-similar structure
# (YAML aliases: a "billion laughs") whose full repr would never finish.
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 3, 60, 60, 40


def _got(value: Any) -> str:
    if isinstance(value, str) and value.isprintable() and len(value) <= 60:
        return f"got '{value}'"
    return f"got {_SHORT.repr(value)}"  # newlines and control characters escaped: one line


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
        # math.isfinite(10**400) raises OverflowError; Python compares such an int with a float exactly
        ok = ok and (abs(value) < 1e308 if isinstance(value, int) else math.isfinite(value))
        ok = ok and (value > low if low_open else value >= low)
        ok = ok and (value < high if high_open else value <= high)
        if not ok:
            raise ValueError(f"must be a number in {interval}, {_got(value)}")
        return float(value)

    return check


def one_of(*choices: str) -> Check:
    def check(value: Any) -> str:
        if value not in choices:
            hint = _did_you_mean(value, choices) if isinstance(value, str) else ""  # str() of a huge list would not end
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
    noise_scale: bool = _spec(False, boolean, "also estimate the gradient noise scale B_simple at every record (McCandlish et al. 2018); training is unchanged")


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
    search: SearchConfig | None = None  # tune train.lr per grid point (Shallue et al. 2019)

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


SEARCH_METRICS = {"val_acc": "maximize", "val_loss": "minimize"}  # at the last epoch


@dataclass(frozen=True)
class SearchConfig:
    """The `search:` block: a learning-rate search for every grid point, then its best lr over the seeds.

    Every combination of the grid (and variants) gets its own Optuna study of
    `trials` runs at seed `seed`, each with a learning rate drawn from
    [lr_low, lr_high]; the best one is re-run at every seed of the grid file.
    """

    lr_low: float
    lr_high: float
    lr_log: bool = True
    trials: int = 8
    metric: str = "val_acc"
    seed: int = 0
    prune: bool = True


SEARCH_KEYS = ("lr", "trials", "metric", "seed", "prune")
SEARCH_DOCS = {
    "search.lr": "{low, high, log}: the range learning rates are drawn from (log: true, the default, = log-uniform)",
    "search.trials": "learning rates tried per grid point (default 8; the first half at random, then TPE)",
    "search.metric": "val_acc (maximised, the default) | val_loss (minimised), at the last epoch",
    "search.seed": "the seed the trials run at (default 0; pick one outside seeds: so the re-runs are fresh)",
    "search.prune": "stop a trial below the median of earlier trials from epoch 2 (default true)",
}
SEARCH_LR_KEYS = ("low", "high", "log")
TOP_LEVEL_KEYS = ("name", "seeds", "base", "grid", "variants", "search")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
MAX_NAME = 100  # a folder name and an Optuna study name; file systems stop at 255 bytes
MAX_RUNS = 100_000  # more runs than any sweep here needs; a bigger grid is a typo, not a plan
MAX_NESTING = 100  # levels of [ and { in a grid file


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
        where, what = _one_line(where, 200), _one_line(what, 1000)  # keys and values come from the file
        super().__init__(f"{where}: {what}")
        self.where, self.what = where, what


_LINE_BREAKS = str.maketrans({c: repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"})


def _one_line(text: str, limit: int) -> str:
    """`text` with every character str.splitlines() breaks at escaped, cut to `limit`: stderr gets one line."""
    text = text.translate(_LINE_BREAKS)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _SafeLoader(yaml.SafeLoader):
    """yaml.SafeLoader (no Python tags, nothing executed) that also reads 1e-4 as a number.

    PyYAML follows YAML 1.1, where an exponent needs a dot (1.0e-4) and 1e-4 is a
    string; YAML 1.2 and every other tool read it as the float users mean.
    It also refuses a repeated key, which plain YAML resolves silently to the last one.
    """

    def compose_mapping_node(self, anchor: Any) -> yaml.MappingNode:
        # Checked on the raw node, before merge keys (<<) are expanded: overriding a merged key is fine.
        node = super().compose_mapping_node(anchor)
        seen = set()
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                if (key.tag, key.value) in seen:
                    raise yaml.composer.ComposerError(
                        None, None, f"duplicate key '{key.value}' (YAML would keep only the last one)", key.start_mark)
                seen.add((key.tag, key.value))
        return node


_SafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _read_yaml(path: Path) -> Any:
    if not path.is_file():
        hint = " (it is a folder)" if path.is_dir() else ""
        raise ConfigError(f"{path}: no such grid file{hint}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path.name}: not a UTF-8 text file (invalid byte at offset {err.start})") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the grid file: {err.strerror or err}") from None
    # PyYAML's scanner is quadratic in the depth of [ and { (5000 levels: seconds; 100k: hours) and its
    # parser recursive, so deep nesting is refused before parsing; a real grid file nests 3 or 4 levels.
    depth = 0
    for bracket in re.finditer(r"[\[\]{}]", text):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > MAX_NESTING:
            line = text.count("\n", 0, bracket.start()) + 1
            raise ConfigError(f"{path.name}: line {line}: YAML error: nested too deeply (more than {MAX_NESTING} levels of [ or {{)")
    try:
        return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 - a SafeLoader: no Python tags, nothing executed
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(err, "problem", None) or (str(err).splitlines() or [type(err).__name__])[0]
        kind = "YAML error" if isinstance(err, (yaml.constructor.ConstructorError, yaml.composer.ComposerError)) else "YAML syntax error"
        raise ConfigError(_one_line(f"{path.name}: {where}{kind}: {problem}", 1000)) from None
    except RecursionError:  # PyYAML parses nesting recursively: [[[[... a thousand levels deep
        raise ConfigError(f"{path.name}: YAML error: nested too deeply") from None
    except MemoryError:
        raise
    except Exception as err:  # noqa: BLE001 - PyYAML's constructors raise plain errors on some scalars: !!int '', 2001-13-45, a 5000-digit int
        detail = (str(err).splitlines() or [""])[0]
        raise ConfigError(_one_line(f"{path.name}: YAML error: a value cannot be read ({type(err).__name__}: {detail})", 1000)) from None


def _parse(raw: Any, label: str, folder: Path) -> GridFile:
    if not isinstance(raw, dict):
        raise _KeyError("(top level)", f"must be a mapping with keys {', '.join(TOP_LEVEL_KEYS)}, got {type(raw).__name__}")
    _reject_unknown(raw, TOP_LEVEL_KEYS, "")
    name = _parse_name(raw.get("name", Path(label).stem))
    seeds = _parse_seeds(raw.get("seeds", [0]))
    base = _parse_base(raw.get("base") or {}, folder)
    grid = _parse_grid(raw.get("grid") or {}, folder)
    variants = _parse_variants(raw.get("variants"), {key for key, _ in grid}, folder)
    search = _parse_search(raw["search"]) if "search" in raw else None
    grid_file = GridFile(name=name, seeds=seeds, base=base, grid=grid, variants=variants, source=label, search=search)
    _check_points(grid_file)
    return grid_file


def _reject_unknown(mapping: dict, valid: Any, prefix: str) -> None:
    for key in mapping:
        if key not in valid:
            where = f"{prefix}{key}"
            raise _KeyError(where, _unknown(str(key), valid))


def _parse_name(value: Any) -> str:
    # fullmatch, not match: NAME_PATTERN's $ also matches before a final newline ("x\n").
    # The first character cannot be '.', so '.', '..' and '../x' never name a folder outside results/.
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise _KeyError("name", f"must be letters, digits, '_', '.' or '-' (it names the results folder), {_got(value)}")
    if len(value) > MAX_NAME:
        raise _KeyError("name", f"must be at most {MAX_NAME} characters (it names the results folder), {_got(value)}")
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
    try:
        resolved = (folder / Path(value).expanduser()).resolve()
        found = resolved.exists()
    except (OSError, RuntimeError, ValueError) as err:  # ~nosuchuser, a NUL byte, a name too long, a symlink loop
        reason = err.strerror if isinstance(err, OSError) and err.strerror else err  # not the whole long path again
        raise _KeyError(where, f"not a usable path, {_got(value)} ({type(err).__name__}: {reason})") from None
    if not found:
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


def _parse_search(raw: Any) -> SearchConfig:
    example = "e.g. {lr: {low: 1e-4, high: 1e-1}, trials: 8}"
    if not isinstance(raw, dict) or "lr" not in raw:
        raise _KeyError("search", f"must be a mapping with at least lr: {{low, high}}, {example}; {_got(raw)}")
    _reject_unknown(raw, SEARCH_KEYS, "search.")
    lr = raw["lr"]
    if not isinstance(lr, dict) or not {"low", "high"} <= set(lr):
        raise _KeyError("search.lr", f"must be a mapping with low and high (and optionally log), {_got(lr)}")
    _reject_unknown(lr, SEARCH_LR_KEYS, "search.lr.")
    positive = number_in(0, math.inf, low_open=True, high_open=True)
    low, high = _checked("search.lr.low", positive, lr["low"]), _checked("search.lr.high", positive, lr["high"])
    if low >= high:
        raise _KeyError("search.lr", f"low must be less than high, got low={low:g}, high={high:g}")
    return SearchConfig(
        lr_low=low, lr_high=high, lr_log=_checked("search.lr.log", boolean, lr.get("log", True)),
        trials=_checked("search.trials", positive_int, raw.get("trials", 8)),
        metric=_checked("search.metric", one_of(*SEARCH_METRICS), raw.get("metric", "val_acc")),
        seed=_checked("search.seed", non_negative_int, raw.get("seed", 0)),
        prune=_checked("search.prune", boolean, raw.get("prune", True)),
    )


def _check_points(grid_file: GridFile) -> None:
    """Checks that involve several keys, on every point the grid and variants make."""
    # Count before building: a few long axes multiply into more points than memory holds.
    points = math.prod(len(values) for _, values in grid_file.grid) * max(1, len(grid_file.variants))
    per_point = len(grid_file.seeds) * (2 if grid_file.search else 1) + (grid_file.search.trials if grid_file.search else 0)
    if points * per_point > MAX_RUNS:
        searched = f" + {grid_file.search.trials} search trials and {len(grid_file.seeds)} tuned runs" if grid_file.search else ""
        raise _KeyError("grid", f"makes {points * per_point} runs ({points} points x {len(grid_file.seeds)} seeds{searched}); "
                                f"at most {MAX_RUNS}: split it into several grid files")
    searched = grid_file.search is not None
    for point, settings in grid_file.points():
        problem = point_problem(point) or (_search_problem(point, settings) if searched else None)
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


def _search_problem(point: PointConfig, settings: tuple[Setting, ...]) -> str | None:
    """With search:, the learning rate is the search's: it cannot also be varied or scaled."""
    if any(key == "train.lr" for key, _ in settings):
        return "train.lr is tuned by search.lr; remove it from grid and variants (base.train.lr stays the untuned reference)"
    if point.train.lr_scaling != "none":
        return "train.lr_scaling must be none with search: the search picks the learning rate of every batch size itself"
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
    if train.noise_scale and train.gpus > 1:
        return "train.noise_scale is measured on one device; use train.gpus: 1 for the runs that measure it"
    if model.ghost_batch_size is not None and not model.batchnorm:
        return "model.ghost_batch_size needs model.batchnorm: true; remove it"
    return None
