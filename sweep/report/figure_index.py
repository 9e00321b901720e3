"""The index of a figures folder (`figures.json`): what each figure was drawn from, its title and caption, so
a figure is drawn again only when that changes, and a figure no longer drawn is removed. No matplotlib.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sweep.base import atomic

INDEX = "figures.json"  # figure name -> {"key": what it was drawn from, "title": its title, "caption": its caption}


def prune(folder: Path, drawn: set[str]) -> list[str]:
    """Remove the figures an earlier report drew here and this one did not (a setting no longer in the
    results, a renamed figure): a stale PNG beside the report would show numbers it no longer holds.
    Only names in the index go: files this harness did not draw are left alone. Returns the names removed.
    """
    index = read_index(folder)
    stale = sorted(name for name in index if name not in drawn)
    for name in stale:
        for suffix in (".png", ".svg"):
            (folder / f"{name}{suffix}").unlink(missing_ok=True)
        del index[name]
    if stale:
        write_index(folder, index)
    return stale


def write_index(folder: Path, index: dict[str, Any]) -> None:
    atomic.write_text(folder / INDEX, json.dumps(index, indent=1, sort_keys=True) + "\n")


def read_index(folder: Path) -> dict[str, Any]:
    try:
        index = json.loads((folder / INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: everything is drawn again
    return index if isinstance(index, dict) else {}
