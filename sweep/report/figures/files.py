"""A figures folder: its figure files, and its index (`figures.json`) of what each figure was drawn from, its
title and caption, so a figure is drawn again only when that changes, and a figure no longer drawn is removed.
matplotlib is not imported here: `cached_or_drawn` calls the figure's own maker only when it must draw.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweep.base import atomic

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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


@dataclass(frozen=True)
class FigureFile:
    name: str
    png: Path
    svg: Path | None
    title: str
    caption: str


def cached_or_drawn(
    make: Callable[[], Figure], folder: Path, name: str, caption: str, key: str, index: dict[str, Any], svg: bool
) -> FigureFile:
    png, svg_path = folder / f"{name}.png", (folder / f"{name}.svg" if svg else None)
    known = index.get(name, {})
    if known.get("key") == key and png.exists() and (svg_path is None or svg_path.exists()):
        known["caption"] = caption  # the index says what the report shows: its title and caption
        return FigureFile(name, png, svg_path, known["title"], caption)
    fig = make()
    fig.savefig(png, dpi=100, metadata={"Software": None})
    if svg_path is not None:
        # no timestamp and ids salted by name, not random: same data, same file (no churn in committed SVGs)
        import matplotlib  # already loaded by make(); imported here to keep `sweep report --help` light

        with matplotlib.rc_context({"svg.hashsalt": name}):
            fig.savefig(svg_path, metadata={"Date": None})
    else:
        (folder / f"{name}.svg").unlink(missing_ok=True)  # an SVG of older data would mislead
    title = " ".join(fig.get_suptitle().split()) or name  # one line: the suptitle is wrapped to the figure
    index[name] = {"key": key, "title": title, "caption": caption}
    return FigureFile(name, png, svg_path, title, caption)
