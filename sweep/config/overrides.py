"""Overrides from the command line: `sweep run GRID train.epochs=1 seeds=[0]`.

Each override is `KEY=VALUE`, its value read as YAML (`seeds=[0,1]`, `model.batchnorm=false`). A
`section.key` (data, model, train) is set for every point: in `base`, and taken out of the grid's axes
and variants, so the override wins everywhere; `grid.section.key=[...]` makes (or replaces) an axis;
`name`, `seeds` and `search.*` replace their top-level settings. The grid file's YAML is changed
before it is checked, so an override is validated as the file is, with the same did-you-mean.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

from sweep.config import declared
from sweep.config.gridyaml import YamlError, parse_yaml
from sweep.config.keys import SECTIONS
from sweep.config.problems import KeyProblem, unknown

EXAMPLE = "e.g. train.epochs=1 or seeds=[0,1]"


def apply(raw: Any, overrides: Sequence[str]) -> Any:
    """The grid file's YAML (a mapping) with every override applied, in order; the file's own is unchanged."""
    if not overrides:
        return raw
    merged = copy.deepcopy(raw) if isinstance(raw, dict) else {}
    for text in overrides:
        key, value = _split(text)
        _set(merged, key, value, text)
    return merged


def _split(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise KeyProblem(f"override {text!r}", f"give KEY=VALUE, {EXAMPLE}")
    try:
        return key.strip(), parse_yaml(value, f"override {key.strip()}")
    except YamlError as err:
        raise KeyProblem(f"override {key.strip()}", str(err).partition(": ")[2]) from None


def _set(merged: dict, key: str, value: Any, text: str) -> None:
    parts = key.split(".")
    if parts[0] in SECTIONS and len(parts) == 2:
        _set_everywhere(merged, key, parts[0], parts[1], value)
    elif parts[0] == "grid" and len(parts) == 3:
        _mapping(merged, "grid")[".".join(parts[1:])] = value
    elif parts[0] == "search" and len(parts) in (2, 3):
        search = _mapping(merged, "search")
        (search if len(parts) == 2 else _mapping(search, parts[1]))[parts[-1]] = value
    elif len(parts) == 1:
        merged[key] = value  # name, seeds; anything else is refused by the file's own check of top-level keys
    else:
        raise KeyProblem(
            f"override {key}",
            f"set a key as section.key ({', '.join(f'{s}.<key>' for s in SECTIONS)}), grid.section.key, "
            f"search.<key>, name or seeds, {EXAMPLE}",
        )


def _set_everywhere(merged: dict, dotted: str, section: str, name: str, value: Any) -> None:
    """`dotted` at `value` for every point: in base, and no longer varied by the grid or a variant."""
    names = [f.name for f in dataclasses.fields(SECTIONS[section])]
    if name not in names:
        raise KeyProblem(f"override {dotted}", unknown(name, names))
    if isinstance(value, list) and isinstance(declared.default(dotted), (bool, int, float, str)):
        listed = ",".join(map(str, value))
        raise KeyProblem(
            f"override {dotted}",
            f"sets one value for every point, and {value} is a list; did you mean the grid axis "
            f"grid.{dotted}=[{listed}]?",
        )
    _mapping(_mapping(merged, "base"), section)[name] = value
    if isinstance(merged.get("grid"), dict):
        merged["grid"].pop(dotted, None)
    if isinstance(merged.get("variants"), list):
        merged["variants"] = [
            {k: v for k, v in variant.items() if k != dotted} if isinstance(variant, dict) else variant
            for variant in merged["variants"]
        ]


def _mapping(parent: dict, key: str) -> dict:
    """parent[key] as a mapping to set keys in (made where missing or null)."""
    if parent.get(key) is None:
        parent[key] = {}
    if not isinstance(parent[key], dict):
        raise KeyProblem(key, f"must be a mapping to override keys in, got {type(parent[key]).__name__}")
    return parent[key]
