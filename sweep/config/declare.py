"""How a grid key is declared: `key(...)` and the `Key` it carries, the condition under which a key
is used (`Only`), the key versions and analysis roles, what a changed value reaches, what of a training
step's cost a key sets, and how a value is written in a grid file.
sweep/config/keys.py declares every key with these; nothing here knows any particular key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from sweep.config.validators import Validator

# Key versions: 1 the first release, 2 the control axes, 3 the gradient noise scale, 4 recalibrated
# BatchNorm evaluation, 5 imbalance_keeps, 6 the user's own model, data and callbacks; a new key
# takes the next number. A key that appeared after the first release is left out of a run's
# hashed spec while at its default, so adding it changed no existing run id (sweep/config/plan.py).
FIRST_RELEASE = 1

# How the analysis treats a key (sweep/analysis/__init__.py; docs/internals.md, "Controls").
CONTROL = "control"  # a mechanism arm: claims read the runs with it at its default
COMPANION = "companion"  # only accompanies a control (steps with budget: steps) or adds records, not updates


# What a key's value reaches, for the compiled-model cache and packing (each key declares one; graph_key
# and pack_key are derived from the declarations, so a new key cannot be left out of them by mistake).
GRAPH = "graph"  # it shapes the compiled model's graph: a worker builds a fresh model when it changes
PACK = "pack"  # not the graph, but runs that differ in it cannot train as towers of one pack
DATA = "data"  # a run's own data only (its order, preprocessing, seed): runs may differ in it within a pack
RUN = "run"  # set per run on a reused model (the learning rate's variable, the stopping rule): likewise
REACHES = (GRAPH, PACK, DATA, RUN)

# What of a training step's cost a key sets, for timing.csv (sweep/config/timing_schema.py): runs that differ
# only in keys declaring none (seed, learning rate, data order, imbalance, budgets, measurements) share one
# quiet timing. A timing configuration lists its keys in this order, each group in file order: the order of
# timing.csv's columns and of its configuration strings, which are matched as written.
MODEL = "model"  # the model's layers and their sizes
INPUT = "input"  # the input's shape and the classes: the dataset, classes and image size
UPDATE = "update"  # the optimizer's work per step
BATCH = "batch"  # the examples per step and the replicas that share them
COSTS = (MODEL, INPUT, UPDATE, BATCH)


class _NoPost:
    def __repr__(self) -> str:
        return "NO_POST"


NO_POST: Any = _NoPost()  # the post did not fix this key


def yaml_text(value: Any) -> str:
    """A value as the grid file writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return "[" + ", ".join(yaml_text(v) for v in value) + "]"
    return str(value)


@dataclass(frozen=True)
class Only:
    """The key matters only where the key `on` has one of `values`; elsewhere it is inert."""

    on: str
    values: tuple[Any, ...]
    required: bool = False  # ... and must then be set (not its default)

    def describe(self) -> str:
        return f"{self.on} {' | '.join(yaml_text(v) for v in self.values)}"


@dataclass(frozen=True)
class Key:
    """One grid key's declaration."""

    name: str  # dotted, section.field; filled in by declarations()
    default: Any
    check: Validator
    doc: str  # one line, for --help and docs/grid.md
    slug: str  # its short name in run ids: bs64
    reach: str  # GRAPH | PACK | DATA | RUN: what a changed value reaches
    since: int  # the key version it appeared in; FIRST_RELEASE or later
    only: Only | None = None
    role: str | None = None  # CONTROL | COMPANION | None
    toggle: int | None = None  # its place among the post's toggles (the toggles figure's panels)
    post: Any = NO_POST  # the post's value; where several groups of runs answer a question, rows at it are used
    cost: str | None = None  # MODEL | INPUT | UPDATE | BATCH: what of a training step's cost it sets; None: nothing

    def where_used(self) -> str:
        """Where the key is used, "train.budget steps"; "" for a key every point uses."""
        return self.only.describe() if self.only else ""


def key(
    default: Any,
    check: Validator,
    doc: str,
    *,
    slug: str,
    reach: str,
    since: int = FIRST_RELEASE,
    only: Only | None = None,
    role: str | None = None,
    toggle: int | None = None,
    post: Any = NO_POST,
    cost: str | None = None,
) -> Any:
    """A dataclass field carrying its declaration."""
    if reach not in REACHES:
        raise ValueError(f"reach must be one of {', '.join(REACHES)}, got {reach!r}")
    if cost is not None and cost not in COSTS:
        raise ValueError(f"cost must be one of {', '.join(COSTS)} or None, got {cost!r}")
    declared = Key(
        name="",
        default=default,
        check=check,
        doc=doc,
        slug=slug,
        reach=reach,
        since=since,
        only=only,
        role=role,
        toggle=toggle,
        post=post,
        cost=cost,
    )
    return dataclasses.field(default=default, metadata={"key": declared})
