"""The package's layout: few top-level modules, every package's modules named in its docstring, and
imports that follow the layers of tests/layers.py (no cycle, none against the flow).
"""

from __future__ import annotations

import ast

import layers
import pytest

pytestmark = pytest.mark.unit


def test_no_import_goes_against_the_layers_and_none_is_circular() -> None:
    assert layers.violations() == []
    assert layers.cycles() == []


def test_every_package_is_placed_in_a_layer() -> None:
    packages = {layers.package_of(m) for m in layers.modules()} - {"sweep"}
    assert packages <= set(layers.RANK), sorted(packages - set(layers.RANK))


def test_the_top_level_holds_only_the_entry_points_and_the_shared_names() -> None:
    assert sorted(p.name for p in layers.SWEEP.glob("*.py")) == ["__init__.py", "__main__.py", "exits.py", "vocab.py"]


def test_each_package_docstring_names_each_of_its_modules() -> None:
    missing = []
    for init in sorted(layers.SWEEP.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        for module in sorted(init.parent.glob("*.py")):
            if module.stem != "__init__" and f"`{module.stem}`" not in doc:
                missing.append(f"{init.parent.name}/{module.name}")
    assert missing == []


def test_a_layering_violation_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check itself can fail: with train placed below config, train's imports of config go against it."""
    monkeypatch.setitem(layers.RANK, "train", 1)
    assert any(v.startswith("sweep.train.") and "may not import config" in v for v in layers.violations())
