"""The steps-to-target figure: log-log steps against batch size, with the perfect-scaling line.

A companion of `sweep.report.figures.curves` (same conventions: `matplotlib.figure.Figure` directly, no
pyplot, PNG into <out>/figures/), kept apart so the readings of `sweep.analysis.scaling` draw
without touching the per-folder figures. One figure per curve; its title names the results folder,
the optimizer, the lr and the other settings the curve holds fixed (`fixed_settings`, which the
report's headings use too), its seeds and the metric its targets are levels of (val_acc_recal where
every run recorded it, else val_acc).
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from sweep.analysis import BATCH_SIZE
from sweep.analysis.scaling import TUNED, Curve, CurveReading, TargetRow, perfect_scaling
from sweep.analysis.selection import OPTIMIZER, Selection
from sweep.base import atomic
from sweep.config import declared
from sweep.report.figures import files, layout
from sweep.report.figures.files import FigureFile

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


CAPTION = (
    "Where a target's solid line follows its dashed perfect-scaling line, doubling the batch halves the steps to "
    "reach it; where it flattens above that line, larger batches stop saving steps. Mean steps over the seeds that "
    "reached each target (error bars: 95% t-interval, none below 2 seeds, never below a tenth of the mean on the log "
    "axis); dashed: perfect scaling (steps x batch constant) through the smallest batch size; dotted: the fit "
    "S = S_min (1 + B_crit / B) where identified (an interval with both ends, the lack-of-fit test not rejecting "
    "the form); open triangles: the step budget where a seed did not reach the "
    "target."
)
TARGETS_PER_PANEL = 2  # three lines each (measured, perfect scaling, fit): 6, within layout.MAX_LINES
KINDS: tuple[tuple[dict[str, Any], str], ...] = (  # the figure legend: what each kind of line or mark is
    ({"linestyle": "-", "marker": "o"}, "measured: mean steps, 95% t-interval"),
    ({"linestyle": "--"}, "perfect scaling through the smallest batch"),
    ({"linestyle": ":"}, "fit S = S_min (1 + B_crit / B)"),
    ({"linestyle": "none", "marker": "^", "fillstyle": "none"}, "a seed did not reach it: its step budget"),
)


def draw(readings: list[CurveReading], out: Path, svg: bool = False) -> list[FigureFile]:
    """One figure per curve that has a target, into out/figures/; redrawn only when its numbers changed."""
    folder = out / "figures"
    atomic.own_folder(folder)
    index = files.read_index(folder)  # the per-folder figures' index: one cache for every figure
    shown = [r for r in readings if r.targets]
    drawn = []
    for reading, name in zip(shown, names([r.curve for r in shown]), strict=True):
        key = _drawing_key(reading)
        make = functools.partial(steps_figure, reading)
        drawn.append(files.cached_or_drawn(make, folder, name, CAPTION, key, index, svg))
    files.write_index(folder, index)
    return drawn


def names(curves: list[Curve]) -> list[str]:
    """Each curve's figure name, "steps_to_target-<folder>_<lr>"; where two curves of a folder share an lr (one
    per optimizer), each adds its optimizer, and where that is not enough, its place among them.
    """

    def slug(*parts: str) -> str:
        return "steps_to_target-" + re.sub(r"[^A-Za-z0-9]+", "_", "_".join(parts)).strip("_")

    first = [slug(Path(c.source).name, c.lr) for c in curves]
    second = [
        slug(Path(c.source).name, optimizer(c), c.lr) if first.count(n) > 1 else n
        for c, n in zip(curves, first, strict=True)
    ]
    return [n if second.count(n) == 1 else f"{n}_{second[:i].count(n) + 1}" for i, n in enumerate(second)]


def optimizer(curve: Curve) -> str:
    column = curve.epochs.get(OPTIMIZER)
    used = sorted(column.dropna().astype(str).unique()) if column is not None else []
    return ", ".join(used) or str(declared.default(OPTIMIZER))


def fixed_settings(curve: Curve) -> str:
    """What a curve holds fixed besides its batch sizes, optimizer and lr first, as its figure title and report
    heading say it: "optimizer=momentum, lr=0.01, samples_per_class=100, epochs=2" (`Selection.tested_at`),
    "lr tuned per batch size" where each batch size ran at its search's best lr.
    """
    said = Selection(BATCH_SIZE, curve.epochs, {}, 1).tested_at().rsplit(";", 1)[0].split(", ")
    if curve.lr == TUNED:
        said.insert(1, f"lr {TUNED}")  # after the optimizer, which tested_at always names first
    return ", ".join(said)


def _drawing_key(reading: CurveReading) -> str:
    """What one figure is drawn from: the curve's label, settings and metric, its per-run readings, the fits,
    this code and the layout rules.
    """
    digest = hashlib.sha256(f"{reading.curve.label()} {fixed_settings(reading.curve)} {reading.curve.metric}".encode())
    digest.update(pd.util.hash_pandas_object(reading.reaches, index=False).to_numpy().tobytes())
    digest.update(repr((reading.targets, reading.rows, reading.fits)).encode())
    digest.update(Path(__file__).read_bytes())
    digest.update(Path(layout.__file__).read_bytes())
    return digest.hexdigest()


def steps_figure(reading: CurveReading) -> Figure:
    """Steps against batch size, log-log, TARGETS_PER_PANEL targets a panel (one colour each, the same in every
    panel): measured (solid), perfect scaling (dashed) and the fit (dotted).
    """
    from matplotlib.lines import Line2D

    curve = reading.curve
    groups = [reading.targets[i : i + TARGETS_PER_PANEL] for i in range(0, len(reading.targets), TARGETS_PER_PANEL)]
    columns = min(len(groups), 2)
    question = f"Steps to target {curve.metric}: how many fewer steps does a larger batch need?"
    where_ = f"{curve.source}: {fixed_settings(curve)}; seeds {', '.join(map(str, curve.seeds))}"
    fig, axes = layout.panels(len(groups), question, where_, width=4.0, height=3.2, columns=columns)
    fits = {f.target: f for f in reading.fits}
    sizes = sorted({r.batch_size for r in reading.rows})
    for ax, group in zip(axes, groups, strict=True):
        for target in group:
            colour = f"C{reading.targets.index(target) % 10}"
            rows = sorted((r for r in reading.rows if r.target == target), key=lambda r: r.batch_size)
            _target_lines(ax, rows, colour, f"{curve.metric} {target:g}")
            fit = fits.get(target)
            if fit is not None and fit.identified:
                xs = [r.batch_size for r in rows]
                ax.plot(xs, [fit.predict(b) for b in xs], linestyle=":", color=colour)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.set_xlabel("batch size (log2 scale)")
        ax.set_title(f"target{'s' if len(group) > 1 else ''} {' and '.join(f'{t:g}' for t in group)}")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize="small")
    for ax in axes[::columns]:
        ax.set_ylabel("optimizer steps to first reach\nthe target (log scale)")
    handles = [Line2D([], [], color="black", **style) for style, _ in KINDS]
    legend_rows = layout.legend(fig, handles, [label for _, label in KINDS], columns=2)
    layout.place(fig, columns, legend_rows=legend_rows, titles=True, rows=-(-len(groups) // columns))
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
    perfect = perfect_scaling(rows, [r.batch_size for r in rows])
    if perfect:
        ax.plot(list(perfect), list(perfect.values()), linestyle="--", color=color, alpha=0.6)
    missed = [r for r in rows if r.not_reached]
    ax.scatter(
        [r.batch_size for r in missed],
        [r.budget_steps for r in missed],
        marker="^",
        facecolors="none",
        edgecolors=color,
    )
