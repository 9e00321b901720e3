"""What the key declarations (sweep/config/keys.py) say, as the tables the rest of the package reads:
every key's declaration by its dotted name, defaults, the keys some points do not use, slugs, the
keys added after the first release, the keys that shape the compiled graph or a pack, the keys that
set a training step's cost, the control axes and the post's settings, and docs/grid.md's key list.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from sweep.config.declare import COMPANION, CONTROL, COSTS, FIRST_RELEASE, GRAPH, NO_POST, PACK, Key, yaml_text
from sweep.config.keys import SECTIONS


@functools.cache
def declarations() -> dict[str, Key]:
    """Dotted key -> its declaration, in file order (data, model, train)."""
    return {
        f"{section}.{f.name}": dataclasses.replace(f.metadata["key"], name=f"{section}.{f.name}")
        for section, cls in SECTIONS.items()
        for f in dataclasses.fields(cls)
    }


def declaration(dotted: str) -> Key:
    return declarations()[dotted]


def default(dotted: str) -> Any:
    """A key's default value: default("model.bn_momentum") -> 0.99."""
    return declarations()[dotted].default


@functools.cache
def conditional() -> tuple[Key, ...]:
    """The keys some points do not use (declared with `Only`)."""
    return tuple(k for k in declarations().values() if k.only)


def field_docs() -> dict[str, str]:
    """Dotted key -> one-line doc, for --help."""
    return {name: k.doc for name, k in declarations().items()}


def slugs() -> dict[str, str]:
    """Dotted key -> its short name in run ids."""
    return {name: k.slug for name, k in declarations().items()}


@functools.cache
def added_later() -> frozenset[str]:
    """Keys that appeared after the first release: left out of a run's hashed spec at their default."""
    return frozenset(name for name, k in declarations().items() if k.since > FIRST_RELEASE)


@functools.cache
def graph_keys() -> tuple[str, ...]:
    """The keys whose values shape a compiled model's graph (sweep/train/trainer.py, `graph_key`)."""
    return tuple(name for name, k in declarations().items() if k.reach == GRAPH)


@functools.cache
def pack_keys() -> tuple[str, ...]:
    """The keys runs must share to train as one pack (sweep/train/pack.py, `pack_key`)."""
    return tuple(name for name, k in declarations().items() if k.reach in (GRAPH, PACK))


@functools.cache
def cost_keys() -> tuple[str, ...]:
    """The keys that set a training step's cost, a timing configuration's keys (sweep/config/timing_schema.py):
    grouped by what of the cost they set, in `COSTS`' order, each group in file order.
    """
    setting = [(name, k.cost) for name, k in declarations().items() if k.cost is not None]
    return tuple(name for name, cost in sorted(setting, key=lambda item: COSTS.index(item[1])))


def control_defaults() -> dict[str, Any]:
    """The control axes at their defaults: claims read the runs at these values."""
    return {name: k.default for name, k in declarations().items() if k.role == CONTROL}


def control_companions() -> tuple[str, ...]:
    """Settings that only accompany a control, or add records without changing training."""
    return tuple(name for name, k in declarations().items() if k.role == COMPANION)


def post_defaults() -> dict[str, Any]:
    """The post's setting of the keys it fixed: where several groups of runs could answer a question, these rows."""
    return {name: k.post for name, k in declarations().items() if k.post is not NO_POST}


def toggles() -> tuple[str, ...]:
    """The post's toggles, in the order of its figure panels."""
    toggled = [k for k in declarations().values() if k.toggle is not None]
    return tuple(k.name for k in sorted(toggled, key=lambda k: k.toggle or 0))


def readme_keys() -> str:
    """The sections of docs/grid.md's grid-file reference: every key with its default and doc."""
    lines = []
    for section, cls in SECTIONS.items():
        lines.append(f"  {section}:")
        for f in dataclasses.fields(cls):
            k = declaration(f"{section}.{f.name}")
            lines.append(f"{f'    {f.name}: {yaml_text(k.default)}':<26} # {k.doc}")
    return "\n".join(lines) + "\n"
