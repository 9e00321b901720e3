"""C1's mechanism figure: every cell's epoch-2 gap against the weight BatchNorm's moving statistics still give
their initial values (momentum^steps), at both batch sizes, raw and recalibrated.

Raw (filled): the post's gap, train_acc - val_acc, read with the moving statistics as they are at epoch 2.
Recalibrated (open, at weight 0: statistics recomputed for the same weights keep nothing of their initial
values): eval_gap_recal. Each cell's raw point is joined to its recalibrated one. Cells that differ only in
BatchNorm's momentum trained the same weights (training normalises with batch statistics), so their
recalibrated point is one and is drawn once. If BatchNorm's lag makes the post's picture, the raw gap climbs
with the weight while the recalibrated points stay together.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sweep.analysis.estimates import Estimate
from sweep.base import atomic
from sweep.claims import headline
from sweep.claims.findings import POST_GAP, Part
from sweep.claims.maps import ConditionMap
from sweep.claims.registry import the
from sweep.report.figures import files, layout

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

NAME = "map-C1-lag"
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f")


def draw(found: Sequence[ConditionMap], out: Path, svg: bool = False) -> files.FigureFile | None:
    """The figure into out/figures/ for the C1 map with BatchNorm cells and recalibrated numbers, else None."""
    c1 = next((m for m in found if m.claim.id == the(Part.PICTURE).id), None)
    settings = [s for s in headline.settings(c1) if s.weight is not None] if c1 is not None else []
    if c1 is None or not settings:
        return None
    folder = out / "figures"
    atomic.own_folder(folder)
    index = files.read_index(folder)
    key = hashlib.sha256(json.dumps([_numbers(s) for s in settings], default=str).encode())
    key.update(Path(__file__).read_bytes())
    key.update(Path(layout.__file__).read_bytes())
    caption = (
        f"Each cell of the C1 map with BatchNorm ({c1.source}): its gap at epoch 2 against momentum^steps, the "
        "weight BatchNorm's moving statistics still give their initial values, with its 95% interval over seeds. "
        "Filled: the post's reading (train_acc - val_acc); open, at weight 0: eval_gap_recal, the same weights "
        "with the statistics recomputed, drawn once for cells that differ only in momentum (they trained the same "
        f"weights); a line joins each cell's two. Dotted: the post's size at batch {headline.LARGE} "
        f"({POST_GAP.value:g})."
    )
    drawn = files.cached_or_drawn(lambda: figure(settings), folder, NAME, caption, key.hexdigest(), index, svg)
    files.write_index(folder, index)
    return drawn


def _numbers(s: headline.Setting) -> list[object]:
    return [s.label, s.weight, s.weight_small, s.gap, s.gap_small, s.recal_gap, s.recal_gap_small]


def figure(settings: Sequence[headline.Setting]) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10.0, 4.2), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    layout.title(
        fig,
        f"Does BatchNorm's lag make the post's picture? The epoch-2 gap against momentum^steps, batch "
        f"{headline.SMALL} and {headline.LARGE}",
        "raw (filled) and recalibrated (open, at 0)",
    )
    colours = {o: COLOURS[i % len(COLOURS)] for i, o in enumerate(dict.fromkeys(s.optimizer for s in settings))}
    for ax, batch in zip(axes, (headline.SMALL, headline.LARGE), strict=True):
        drawn_twins: set[str] = set()
        for s in settings:
            weight, gap, recal = _at(s, batch)
            if weight is None:
                continue
            colour = colours[s.optimizer]
            ax.plot([weight, 0.0], [gap.mean, recal.mean], color=colour, alpha=0.3, linewidth=0.8)
            _point(ax, weight, gap, colour, filled=True)
            if s.twin not in drawn_twins:
                drawn_twins.add(s.twin)
                _point(ax, 0.0, recal, colour, filled=False)
        ax.axhline(0.0, color="black", linewidth=0.5)
        if batch == headline.LARGE:
            ax.axhline(POST_GAP.value, color="black", linestyle=":", linewidth=0.8)
        ax.set_title(f"batch {batch}")
        ax.set_xlabel("momentum^steps at epoch 2 (weight of the initial statistics)")
        ax.set_xlim(-0.05, 1.0)
    axes[0].set_ylabel("gap at epoch 2")
    for optimizer, colour in colours.items():
        axes[1].plot([], [], "o", color=colour, label=optimizer)
    axes[1].legend(fontsize=7, loc="upper left")
    return fig


def _at(s: headline.Setting, batch: int) -> tuple[float | None, Estimate, Estimate]:
    if batch == headline.LARGE:
        return s.weight, s.gap, s.recal_gap
    return s.weight_small, s.gap_small, s.recal_gap_small


def _point(ax: Axes, x: float, e: Estimate, colour: str, filled: bool) -> None:
    low, high = max(e.mean - e.low, 0.0), max(e.high - e.mean, 0.0)
    errors = [[low], [high]] if e.n > 1 else None
    face = colour if filled else "white"
    ax.errorbar([x], [e.mean], yerr=errors, fmt="o", color=colour, markerfacecolor=face, markersize=4, capsize=2)
