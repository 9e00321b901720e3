"""A grid as it was run, written back as a grid file: its name, seeds, base (every key away from its
default), axes, variants and search, paths made absolute. `sweep run GRID key=value ...` writes it into
the results folder as grid.yaml, so a rerun (`sweep run <results>/grid.yaml`) trains the same runs.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from sweep.base import atomic
from sweep.config import GridFile
from sweep.config.declared import declarations

RESOLVED_GRID = "grid.yaml"


def to_yaml(grid: GridFile, overrides: tuple[str, ...] = ()) -> str:
    """The grid as a grid file; a comment says where it came from and with which overrides."""
    base: dict[str, dict[str, Any]] = {}
    for name, declared in declarations().items():
        value = grid.base.value(name)
        if value != declared.default:
            section, key = name.split(".")
            base.setdefault(section, {})[key] = _plain(value)
    document: dict[str, Any] = {"name": grid.name, "seeds": list(grid.seeds), "base": base}
    if grid.grid:
        document["grid"] = {key: [_plain(v) for v in values] for key, values in grid.grid}
    if grid.variants:
        document["variants"] = [{key: _plain(v) for key, v in variant} for variant in grid.variants]
    if grid.search:
        search = asdict(grid.search)
        lr = {"low": search.pop("lr_low"), "high": search.pop("lr_high"), "log": search.pop("lr_log")}
        document["search"] = {"lr": lr, **search}
    header = f"# {grid.source} as run" + (f", with {' '.join(overrides)}" if overrides else "") + "\n"
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=None)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def write(folder: Path, grid: GridFile, overrides: tuple[str, ...]) -> Path:
    """<folder>/grid.yaml, the grid as run (written whole, replacing an earlier one)."""
    path = folder / RESOLVED_GRID
    atomic.write_text(path, to_yaml(grid, overrides))
    return path
