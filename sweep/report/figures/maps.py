"""The condition-map figure: one panel per check of the claim, one row per cell of the map.

Each row is the check's mean with its 95% interval over seeds, coloured by where that
interval lies against the claim's threshold (a description, not a test); the shaded band
is the claim's side of the threshold. Drawn
like the per-folder figures (`sweep.report.figures.curves`), again only when what it shows changed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from sweep.analysis import BATCH_SIZE
from sweep.analysis.chance import Answer
from sweep.analysis.outcome import Outcome
from sweep.analysis.selection import Selection
from sweep.base import atomic
from sweep.claims.maps import Cell, ConditionMap
from sweep.report.figures import files, layout

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

COLOURS = {Outcome.HOLDS: "tab:green", Outcome.FAILS: "tab:red", Outcome.UNDECIDED: "tab:gray"}


def draw(found: list[ConditionMap], out: Path, svg: bool = False) -> dict[str, files.FigureFile]:
    """One figure per map into out/figures/, by claim id."""
    folder = out / "figures"
    atomic.own_folder(folder)
    index = files.read_index(folder)  # the per-folder figures' index: one cache for every figure
    drawn = {}
    for m in found:
        key = hashlib.sha256(json.dumps([_numbers(m), _question(m), _where(m)], default=str).encode())
        key.update(Path(__file__).read_bytes())
        key.update(Path(layout.__file__).read_bytes())
        caption = (
            f"{m.claim.id} shows at a setting whose row is green in every panel and fails where a row is red; "
            f"each check's mean over seeds at every setting of {m.source} with its 95% t-interval (clipped to "
            "[-1, 1]), green where the interval lies wholly beyond the claim's threshold, red wholly short of it, "
            "grey where it spans it (a description per setting, not a test); shaded: the claim's side of the "
            "threshold."
        )
        name = f"map-{m.claim.id}"
        make = functools.partial(figure, m)
        drawn[m.claim.id] = files.cached_or_drawn(make, folder, name, caption, key.hexdigest(), index, svg)
    files.write_index(folder, index)
    return drawn


def _numbers(m: ConditionMap) -> list:
    return [
        (
            _label(c),
            [(k.label, k.estimate.mean, k.estimate.low, k.estimate.high, k.outcome().value) for k in c.checks],
        )
        for c in m.cells
    ]


def figure(m: ConditionMap) -> Figure:
    from matplotlib.figure import Figure

    panels = len(m.mapped.panels)
    fig = Figure(figsize=(4.2 * panels + 3.0, 1.2 + 0.32 * len(m.cells)), layout="constrained")
    axes = fig.subplots(1, panels, sharey=True, squeeze=False)[0]
    layout.title(fig, _question(m), _where(m))
    ys = list(range(len(m.cells)))[::-1]
    for i, (ax, title) in enumerate(zip(axes, m.mapped.panels, strict=True)):
        checks = [c.checks[i] for c in m.cells]
        _holds_band(ax, checks[0].low, checks[0].high)
        for y, check in zip(ys, checks, strict=True):
            e, colour = check.estimate, COLOURS[check.outcome()]
            below, above = layout.clipped(e.low, e.mean, e.high, layout.DIFFERENCE)
            ax.errorbar([e.mean], [y], xerr=[[below], [above]], fmt="o", color=colour, capsize=3)
        ax.set_title(title, fontsize="small")
        ax.set_xlabel("accuracy difference (fraction)")
        ax.grid(alpha=0.3, axis="x")
        ax.set_xlim(*_limits(checks))
    axes[0].set_yticks(ys, [_label(c) for c in m.cells], fontsize="small")
    handles = [axes[0].scatter([], [], color=c, label=o.words.legend) for o, c in COLOURS.items()]
    fig.legend(handles=handles, fontsize="small", loc="outside lower center", ncols=3)
    return fig


def _label(cell: Cell) -> str:
    """A row's label: its setting, and what its arms say where that is not a comparison (its colours then
    describe numbers that do not answer the claim).
    """
    return cell.label() if cell.answer is Answer.COMPARES else f"{cell.label()} ({cell.answer.value})"


def _question(m: ConditionMap) -> str:
    return f"At which settings does {m.claim.id} hold ({m.claim.test})?"


def _where(m: ConditionMap) -> str:
    """The map's folder, what every cell holds fixed (what sets cells apart is on the y axis), and the tally."""
    rows = pd.concat([c.rows for c in m.cells], ignore_index=True)
    return f"{m.source}: {Selection(BATCH_SIZE, rows, {}, 1).tested_at()}; {m.counts()}"


def _limits(checks: list) -> tuple[float, float]:
    """The x range: every interval and threshold, with a margin, within [-1, 1]."""
    points = [v for c in checks for v in (c.estimate.low, c.estimate.high, c.estimate.mean, c.low, c.high)]
    finite = [v for v in points if math.isfinite(v)]
    low, high = min(finite), max(finite)
    pad = 0.05 * (high - low or 1.0)
    return max(-1.0, low - pad), min(1.0, high + pad)


def _holds_band(ax: Axes, low: float, high: float) -> None:
    """Shade where a check holds (above low, below high, or between); accuracy differences lie in [-1, 1]."""
    ax.axvspan(low if math.isfinite(low) else -1.0, high if math.isfinite(high) else 1.0, color="tab:green", alpha=0.08)
    for bound in (low, high):
        if math.isfinite(bound):
            ax.axvline(bound, color="tab:green", linestyle="--", linewidth=1)
