"""A grid file parsed: `load_grid` reads it (its YAML by sweep/config/gridyaml.py, the command line's overrides
applied first), checks every key, value and point, and gives a `GridFile`: the base point, the axes, the
variants, the seeds and the search block. Every error is a `ConfigError` of one line naming the file and the
key path.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.config.declared import conditional, declarations
from sweep.config.gridyaml import YamlError, read_yaml
from sweep.config.keys import SECTIONS, PointConfig
from sweep.config.overrides import apply as apply_overrides
from sweep.config.problems import KeyProblem, checked, reject_unknown, unknown
from sweep.config.rules import inert, is_set, point_problem, unused, without_inert
from sweep.config.search_settings import SearchConfig, check_metric, lr_problem, parse_search
from sweep.config.validators import Validator, did_you_mean, got, non_negative_int


class ConfigError(Exception):
    """Bad grid file. The message is one line, ready for stderr."""


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

    def combinations(self) -> list[tuple[PointConfig, tuple[Setting, ...]]]:
        """Every grid combination times every variant, as written: (point, the settings that vary)."""
        keys = [key for key, _ in self.grid]
        result = []
        for combo in itertools.product(*(values for _, values in self.grid)):
            for variant in self.variants or ((),):
                settings = tuple(zip(keys, combo, strict=True)) + variant
                point = self.base
                for key, value in settings:
                    point = point.with_value(key, value)
                result.append((point, settings))
        return result

    def points(self) -> list[tuple[PointConfig, tuple[Setting, ...]]]:
        """The points to run: each combination without the keys it does not use, once.

        A key a point does not use (train.steps under budget: epochs) is set to its
        default there and left out of its varying settings, so the point's run ids are
        the ids it would have without the key; combinations that then coincide run once.
        """
        unique: dict[tuple[PointConfig, tuple[Setting, ...]], None] = {}
        for point, settings in self.combinations():
            idle = unused(point)
            unique[(without_inert(point), tuple(s for s in settings if s[0] not in idle))] = None
        return list(unique)


TOP_LEVEL_KEYS = ("name", "seeds", "base", "grid", "variants", "search")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
MAX_NAME = 100  # a folder name and an Optuna study name; file systems stop at 255 bytes
MAX_RUNS = 100_000  # more runs than any sweep here needs; a bigger grid is a typo, not a plan


def load_grid(path: str | Path, overrides: Sequence[str] = ()) -> GridFile:
    """Read and validate a grid file, with `key=value` overrides from the command line applied first
    (sweep/config/overrides.py); raise ConfigError with a one-line message.
    """
    path = Path(path)
    label = path.name
    try:
        raw = read_yaml(path)
    except YamlError as err:
        raise ConfigError(str(err)) from None
    try:
        grid_file = _parse(apply_overrides(raw, overrides), label, path.parent)
    except KeyProblem as err:
        raise ConfigError(f"{label}: {err.where}: {err.what}") from None
    return grid_file


def _parse(raw: Any, label: str, folder: Path) -> GridFile:
    if not isinstance(raw, dict):
        raise KeyProblem(
            "(top level)", f"must be a mapping with keys {', '.join(TOP_LEVEL_KEYS)}, got {type(raw).__name__}"
        )
    reject_unknown(raw, TOP_LEVEL_KEYS, "")
    name = _parse_name(raw.get("name", Path(label).stem))
    seeds = _parse_seeds(raw.get("seeds", [0]))
    base = _parse_base(raw.get("base") or {}, folder)
    grid = _parse_grid(raw.get("grid") or {}, folder)
    variants = _parse_variants(raw.get("variants"), {key for key, _ in grid}, folder)
    search = parse_search(raw["search"]) if "search" in raw else None
    grid_file = GridFile(name=name, seeds=seeds, base=base, grid=grid, variants=variants, source=label, search=search)
    _check_points(grid_file)
    return grid_file


def _parse_name(value: Any) -> str:
    # fullmatch, not match: NAME_PATTERN's $ also matches before a final newline ("x\n").
    # The first character cannot be '.', so '.', '..' and '../x' never name a folder outside results/.
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise KeyProblem(
            "name", f"must be letters, digits, '_', '.' or '-' (it names the results folder), {got(value)}"
        )
    if len(value) > MAX_NAME:
        raise KeyProblem("name", f"must be at most {MAX_NAME} characters (it names the results folder), {got(value)}")
    return value


def _parse_seeds(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise KeyProblem("seeds", f"must be a non-empty list of integers >= 0, {got(value)}")
    seeds = tuple(checked(f"seeds[{i}]", non_negative_int, v) for i, v in enumerate(value))
    if len(set(seeds)) != len(seeds):
        raise KeyProblem("seeds", f"must not repeat a seed, got {list(seeds)}")
    return seeds


def _field_check(section: str, key: str, where: str) -> Validator:
    names = [dotted.split(".")[1] for dotted in declarations() if dotted.startswith(f"{section}.")]
    if key not in names:
        raise KeyProblem(where, unknown(key, names))
    return declarations()[f"{section}.{key}"].check


def _parse_base(raw: Any, folder: Path) -> PointConfig:
    if not isinstance(raw, dict):
        raise KeyProblem("base", f"must be a mapping with sections {', '.join(SECTIONS)}, {got(raw)}")
    reject_unknown(raw, SECTIONS, "base.")
    point = PointConfig()
    for section, values in raw.items():
        values = values or {}
        if not isinstance(values, dict):
            raise KeyProblem(f"base.{section}", f"must be a mapping of keys to values, {got(values)}")
        for key, value in values.items():
            where = f"base.{section}.{key}"
            value = checked(where, _field_check(section, str(key), where), value)
            point = point.with_value(f"{section}.{key}", _resolve(section, str(key), value, folder, where))
    return point


def _parse_grid(raw: Any, folder: Path) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not isinstance(raw, dict):
        raise KeyProblem("grid", f"must be a mapping of dotted keys (e.g. train.batch_size) to lists, {got(raw)}")
    axes = []
    for dotted, values in raw.items():
        section, key = _split_dotted(str(dotted), f"grid.{dotted}")
        check = _field_check(section, key, f"grid.{dotted}")
        if not isinstance(values, list) or not values:
            raise KeyProblem(f"grid.{dotted}", f"must be a non-empty list of values, {got(values)}")
        axis = tuple(
            _resolve(section, key, checked(f"grid.{dotted}[{i}]", check, v), folder, f"grid.{dotted}[{i}]")
            for i, v in enumerate(values)
        )
        if len(set(axis)) != len(axis):
            raise KeyProblem(f"grid.{dotted}", f"must not repeat a value, got {list(values)}")
        axes.append((f"{section}.{key}", axis))
    return tuple(axes)


def _split_dotted(dotted: str, where: str) -> tuple[str, str]:
    parts = dotted.split(".")
    if len(parts) != 2 or parts[0] not in SECTIONS:
        valid = ", ".join(f"{s}.<key>" for s in SECTIONS)
        hint = did_you_mean(parts[0], SECTIONS) if len(parts) == 2 else ""
        raise KeyProblem(where, f"keys are dotted paths into base ({valid}){hint}")
    return parts[0], parts[1]


REFERENCES = {("model", "builder"), ("data", "loader")}  # user code: "module:name" or "file.py:name"


def _resolve(section: str, key: str, value: Any, folder: Path, where: str) -> Any:
    """Make data.path and user-code file paths absolute (relative to the grid file) and check they exist."""
    if (section, key) == ("train", "callbacks"):
        return tuple(_resolve_reference(v, folder, f"{where}[{i}]") for i, v in enumerate(value))
    if (section, key) in REFERENCES and value is not None:
        return _resolve_reference(value, folder, where)
    if (section, key) != ("data", "path") or value is None:
        return value
    return _existing(value, folder, where)


def _resolve_reference(value: str, folder: Path, where: str) -> str:
    """ "file.py:name" with the file made absolute; "package.module:name" as written (found on sys.path)."""
    module, _, name = value.rpartition(":")
    if not module.endswith(".py"):
        return value
    return f"{_existing(module, folder, where)}:{name}"


def _existing(value: str, folder: Path, where: str) -> str:
    try:
        resolved = (folder / Path(value).expanduser()).resolve()
        found = resolved.exists()
    except (OSError, RuntimeError, ValueError) as err:  # ~nosuchuser, a NUL byte, a name too long, a symlink loop
        reason = err.strerror if isinstance(err, OSError) and err.strerror else err  # not the whole long path again
        raise KeyProblem(where, f"not a usable path, {got(value)} ({type(err).__name__}: {reason})") from None
    if not found:
        raise KeyProblem(where, f"no such file or folder: {resolved}")
    return str(resolved)


def _parse_variants(raw: Any, grid_keys: set[str], folder: Path) -> tuple[tuple[Setting, ...], ...]:
    """A list of override mappings ({} = the base itself), each crossed with the grid."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise KeyProblem("variants", f"must be a non-empty list of mappings of dotted keys to values, {got(raw)}")
    variants = []
    for i, overrides in enumerate(raw):
        overrides = overrides or {}
        if not isinstance(overrides, dict):
            raise KeyProblem(
                f"variants[{i}]", f"must be a mapping of dotted keys to values ({{}} = the base), {got(overrides)}"
            )
        settings = []
        for dotted, value in overrides.items():
            where = f"variants[{i}].{dotted}"
            section, key = _split_dotted(str(dotted), where)
            value = _resolve(section, key, checked(where, _field_check(section, key, where), value), folder, where)
            if f"{section}.{key}" in grid_keys:
                raise KeyProblem(
                    where, f"{section}.{key} is also a grid axis; vary a key in grid or in variants, not both"
                )
            settings.append((f"{section}.{key}", value))
        variants.append(tuple(settings))
    if len(set(variants)) != len(variants):
        raise KeyProblem("variants", "must not repeat a variant")
    return tuple(variants)


def _check_points(grid_file: GridFile) -> None:
    """Checks that involve several keys, on every point the grid and variants make."""
    _check_size(grid_file)
    set_and_used, set_but_idle = set(), set()
    for point, settings in grid_file.combinations():
        idle = {k.name for k in inert(point)}
        set_but_idle |= idle
        set_and_used |= {k.name for k in conditional() if is_set(point, k)} - idle
        problem = point_problem(without_inert(point))
        varied = [key for key, _ in settings]
        problem = problem or (lr_problem(point, varied) if grid_file.search else None)
        if problem:
            raise KeyProblem(_point_name(settings), problem)
        if grid_file.search:
            check_metric(grid_file.search, point, _point_name(settings))
    for k in conditional():  # a key set only where it is inert: no point uses it
        if k.name in set_but_idle - set_and_used:
            raise KeyProblem(
                _where_set(grid_file, k.name),
                f"only used with {k.where_used()}, which no point of the grid has; remove it",
            )


def _check_size(grid_file: GridFile) -> None:
    """Count before building: a few long axes multiply into more points than memory holds."""
    points = math.prod(len(values) for _, values in grid_file.grid) * max(1, len(grid_file.variants))
    seeds, search = len(grid_file.seeds), grid_file.search
    per_point = seeds * (2 if search else 1) + (search.trials if search else 0)
    if points * per_point > MAX_RUNS:
        searched = f" + {search.trials} search trials and {seeds} tuned runs" if search else ""
        raise KeyProblem(
            "grid",
            f"makes {points * per_point} runs ({points} points x {seeds} seeds{searched}); "
            f"at most {MAX_RUNS}: split it into several grid files",
        )


def _where_set(grid_file: GridFile, dotted: str) -> str:
    """Where the grid file sets `dotted` (for messages): base.<key>, grid.<key> or variants[i].<key>."""
    if is_set(grid_file.base, declarations()[dotted]):
        return f"base.{dotted}"
    if any(key == dotted for key, _ in grid_file.grid):
        return f"grid.{dotted}"
    return next(
        f"variants[{i}].{dotted}"
        for i, variant in enumerate(grid_file.variants)
        if any(key == dotted for key, _ in variant)
    )


def _point_name(settings: tuple[Setting, ...]) -> str:
    return "base" if not settings else "grid point " + ", ".join(f"{k}={v}" for k, v in settings)
