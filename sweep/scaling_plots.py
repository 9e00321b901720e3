"""The steps-to-target figure: log-log steps against batch size, with the perfect-scaling line.

A companion of `sweep.plots` (same conventions: `matplotlib.figure.Figure` directly, no
pyplot, PNG into <out>/figures/), kept apart so the readings of `sweep.scaling` draw
without touching the per-folder figures. One figure per curve; it names its seeds and the metric
its targets are levels of (val_acc_recal where every run recorded it, else val_acc).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from sweep import plots
from sweep.plots import FigureFile
from sweep.scaling import CurveReading, TargetRow

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


CAPTION = (
    "Mean steps over the seeds that reached each target (error bars: 95% t-interval; none below 2 seeds). "
    "Dashed: perfect scaling (steps x batch constant) through the smallest batch size; dotted: the fit "
    "S = S_min (1 + B_crit / B) where identified; open triangles: the step budget where a seed did not reach "
    "the target."
)


def draw(readings: list[CurveReading], out: Path, svg: bool = False) -> list[FigureFile]:
    """One figure per curve that has a target, into out/figures/; redrawn only when its numbers changed."""
    folder = out / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    index = plots.read_index(folder)  # the per-folder figures' index: one cache for every figure
    drawn = []
    for reading in readings:
        if not reading.targets:
            continue
        curve = reading.curve
        name = "steps_to_target-" + re.sub(r"[^A-Za-z0-9]+", "_", f"{Path(curve.source).name}_{curve.lr}").strip("_")
        key = _drawing_key(reading)
        make = functools.partial(steps_figure, reading)
        drawn.append(plots.cached_or_drawn(make, folder, name, CAPTION, key, index, svg))
    (folder / plots.INDEX).write_text(json.dumps(index, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return drawn


def _drawing_key(reading: CurveReading) -> str:
    """What one figure is drawn from: the curve's label and metric, its per-run readings, the fits, this code."""
    digest = hashlib.sha256(f"{reading.curve.label()} {reading.curve.metric}".encode())
    digest.update(pd.util.hash_pandas_object(reading.reaches, index=False).to_numpy().tobytes())
    digest.update(repr((reading.targets, reading.rows, reading.fits)).encode())
    digest.update(Path(__file__).read_bytes())
    return digest.hexdigest()


def steps_figure(reading: CurveReading) -> Figure:
    from matplotlib.figure import Figure

    curve = reading.curve
    fig = Figure(figsize=(6.4, 4.8))
    ax = fig.subplots()
    fig.suptitle(f"Steps to target {curve.metric}: {curve.label()}", fontsize="medium")
    fits = {f.target: f for f in reading.fits}
    for i, target in enumerate(reading.targets):
        rows = sorted((r for r in reading.rows if r.target == target), key=lambda r: r.batch_size)
        _target_lines(ax, rows, f"C{i % 10}", f"{curve.metric} {target:g}")
        fit = fits.get(target)
        if fit is not None and fit.identified:
            xs = [r.batch_size for r in rows]
            ax.plot(xs, [fit.predict(b) for b in xs], linestyle=":", color=f"C{i % 10}")
    sizes = sorted({r.batch_size for r in reading.rows})
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_xlabel("batch size (log2 scale)")
    ax.set_ylabel("optimizer steps to first reach the target (log scale)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small")
    plots.place(fig)
    return fig


def _target_lines(ax: Axes, rows: list[TargetRow], color: str, label: str) -> None:
    reached = [r for r in rows if r.n_reached and math.isfinite(r.steps.mean)]
    xs = [r.batch_size for r in reached]
    means = [r.steps.mean for r in reached]
    errors = [
        [r.steps.mean - r.steps.low if math.isfinite(r.steps.low) else 0.0 for r in reached],
        [r.steps.high - r.steps.mean if math.isfinite(r.steps.high) else 0.0 for r in reached],
    ]
    # a t interval over 2-3 seeds can reach below 0, which a log axis cannot show: clip at the mean's tenth
    errors[0] = [min(e, m * 0.9) for e, m in zip(errors[0], means, strict=True)]
    ax.errorbar(xs, means, yerr=errors, marker="o", capsize=3, color=color, label=label)
    complete = [r for r in rows if not r.not_reached]
    if complete:
        first = complete[0]
        constant = first.steps.mean * first.batch_size
        sizes = [r.batch_size for r in rows if r.batch_size >= first.batch_size]
        ax.plot(sizes, [constant / b for b in sizes], linestyle="--", color=color, alpha=0.6)
    missed = [r for r in rows if r.not_reached]
    ax.scatter(
        [r.batch_size for r in missed],
        [r.budget_steps for r in missed],
        marker="^",
        facecolors="none",
        edgecolors=color,
    )
