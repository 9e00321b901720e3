"""The grid file: YAML in, a validated `GridFile` out.

The file is read once, at the edge, by `gridfile` (its YAML by `gridyaml`). Every
error is a `ConfigError` whose message names the file, the key path and what
would be valid, e.g.
``grid.yaml: grid.train.batch_size[1]: must be a positive integer, got -4``.

The package, in the order a grid file passes through it:

- `gridyaml`: the file's YAML, read safely, every error on one line;
- `declare`, `keys`, `declared`: how a key is declared (its check, default, docs, what its value reaches:
  the compiled graph, the pack, the data or only the run, and what of a step's cost it sets), every key,
  and the tables derived from them;
- `validators`: the checks of single values that keys use;
- `stopping`: `train.early_stopping`, its rule and its check;
- `rules`: rules across keys (which keys a point uses, combinations that cannot work);
- `problems`: where in the file and what is wrong, raised by every part of the parse;
- `overrides`: `key=value` from the command line, applied to the file's YAML before it is checked;
- `resolved`: a grid as run, written back as a grid file (`<results>/grid.yaml` after overrides);
- `search_settings`: the `search:` block (a learning-rate search per grid point) and its checks;
- `gridfile`: `GridFile` and `load_grid`, the parse and the checks of every point;
- `plan`: grid x seeds -> runs, each a `RunSpec` with a stable id;
- `lr_range`: where a search's best lr sits in its range, and how the range widens;
- `timing_schema`: which settings make a timing configuration, and timing.csv's columns;
- `study_plan`: a batch-size study's grid (`sweep study`): the doubling ladder, the search, the records,
  the overrides over the user's grid file, and the plan's rough duration.

This module only re-exports the grid file's API, the settings types and the search block's names.
"""

from __future__ import annotations

from sweep.config.declared import field_docs
from sweep.config.gridfile import MAX_RUNS, TOP_LEVEL_KEYS, ConfigError, GridFile, Setting, load_grid
from sweep.config.keys import (
    DATASETS,
    SECTIONS,
    DataConfig,
    ModelConfig,
    PointConfig,
    TrainConfig,
    UnknownSettings,
)
from sweep.config.rules import point_problem
from sweep.config.search_settings import SEARCH_DOCS, SEARCH_METRICS, SearchConfig

__all__ = [  # the grid file's API; the settings types and the search block's re-exported for their users
    "DATASETS",
    "MAX_RUNS",
    "SEARCH_DOCS",
    "SEARCH_METRICS",
    "SECTIONS",
    "TOP_LEVEL_KEYS",
    "ConfigError",
    "DataConfig",
    "GridFile",
    "ModelConfig",
    "PointConfig",
    "SearchConfig",
    "Setting",
    "TrainConfig",
    "UnknownSettings",
    "field_docs",
    "load_grid",
    "point_problem",
]
