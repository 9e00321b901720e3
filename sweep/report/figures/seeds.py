"""The figure "seeds to decide at 80% power": one row per undecided check of the report.

A point at the seeds per setting that give 80% power (`sweep.analysis.power`), a line over the
range the sd's 95% chi-square interval allows, and a mark at the seeds the check has now.
Drawn like the per-folder figures (`sweep.report.figures.curves`), again only when what it shows changed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from sweep.analysis.power import MAX_SEEDS, SeedsNeeded, seeds_needed
from sweep.base import atomic
from sweep.claims.findings import Claim, Finding
from sweep.report.figures import files, layout

if TYPE_CHECKING:
    from matplotlib.figure import Figure

NAME = "claims-seeds_to_decide"
LABEL_WIDTH = 70  # characters of a check's label shown on the axis

Row = tuple[str, int, SeedsNeeded]  # label, seeds now, seeds needed


def rows(findings: list[tuple[Claim, Finding | None]]) -> list[Row]:
    """Every undecided check with an interval, in claim order."""
    out: list[Row] = []
    for claim, finding in findings:
        for check in finding.undecided() if finding else ():
            if check.estimate.n >= 2:
                label = f"{claim.id}: {check.label}"
                out.append((_short(label), check.estimate.n, seeds_needed(check)))
    return out


def _short(label: str) -> str:
    return label if len(label) <= LABEL_WIDTH else label[: LABEL_WIDTH - 3] + "..."


def draw(findings: list[tuple[Claim, Finding | None]], out: Path, svg: bool = False) -> files.FigureFile | None:
    """The figure into out/figures/, or None when every check is decided."""
    shown = rows(findings)
    if not shown:
        return None
    folder = out / "figures"
    atomic.own_folder(folder)
    index = files.read_index(folder)  # the per-folder figures' index: one cache for every figure
    key = hashlib.sha256(json.dumps([(r[0], r[1], r[2].n, r[2].low, r[2].high) for r in shown]).encode())
    key.update(Path(__file__).read_bytes())
    key.update(Path(layout.__file__).read_bytes())
    alpha = shown[0][2].alpha
    caption = (
        "A check whose dot lies near its x needs few more seeds to be decided; one far to the right, or an arrow, "
        "cannot be decided at a seed count worth running. "
        f"Each undecided check: the seeds per setting for 80% power at two-sided level {alpha:.2g} "
        "(its claim's level for the side it points to), taking the observed mean and sd as true (dot); the line "
        "spans the sd's "
        f"95% chi-square interval; an arrow: more than {MAX_SEEDS}; x: the seeds the check has now."
    )
    drawn = files.cached_or_drawn(lambda: figure(shown), folder, NAME, caption, key.hexdigest(), index, svg)
    files.write_index(folder, index)
    return drawn


def figure(shown: list[Row]) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 1.2 + 0.4 * len(shown)), layout="constrained")
    ax = fig.subplots()
    layout.title(
        fig,
        "Seeds to decide at 80% power: how many seeds per setting would decide each undecided check?",
        f"The report's {len(shown)} undecided checks, each at the runs its verdict reads (its claim's section names "
        "the results folder, optimizer, lr and settings)",
    )
    cap = MAX_SEEDS * 1.5  # where "more than MAX_SEEDS" is drawn
    for y, (_, now, need) in enumerate(shown):
        low, high = (cap if v is None else v for v in (need.low, need.high))
        ax.hlines(y, low, high, color="C0", linewidth=2)  # a range per row, not a line: one collection
        if need.high is None:
            ax.plot([cap], [y], marker=">", linestyle="none", color="C0")  # marks, not lines
        ax.plot([cap if need.n is None else need.n], [y], marker="o", linestyle="none", color="C0")
        ax.plot([now], [y], marker="x", linestyle="none", color="C3")
    ax.set_yticks(range(len(shown)), [r[0] for r in shown], fontsize="small")
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(1.5, cap * 1.3)
    ax.set_xlabel(f"seeds per setting (log scale; right edge: more than {MAX_SEEDS})")
    ax.grid(alpha=0.3, axis="x")
    return fig
