"""Each destination to its target: the target's module imported (its extra checked first, `ExportError` naming
the install command when missing), then every target written.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from sweep.export.runs import ExportError, load
from sweep.export.targets import TARGETS


def target(name: str) -> Any:
    """The module that writes `name`; ExportError naming the install command when its extra is missing."""
    for package in TARGETS[name].needs:
        try:
            importlib.import_module(package)
        except ImportError:
            raise ExportError(
                f"--{name} needs the {name} extra: pip install 'batchsweep[{name}]' "
                f"(in a checkout: pip install -e '.[{name}]')"
            ) from None
    return importlib.import_module(TARGETS[name].module)


def export(folder: Path, destinations: dict[str, str]) -> list[str]:
    """Write the results folder to every destination (target name -> where); one line per target."""
    results = load(folder)
    modules = {name: target(name) for name in destinations}  # every extra checked before anything is written
    return [modules[name].write(results, where) for name, where in destinations.items()]
