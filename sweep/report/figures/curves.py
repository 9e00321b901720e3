"""Figures from analysis tables: PNG (and SVG on request) into <out>/figures/. No TensorFlow, no pyplot.

Figures are drawn per results folder (their names start with the folder's name)
and only when that folder's runs vary the setting a figure needs. Every line is
the mean over seeds; bands and error bars are the 95% Student-t interval (see
`sweep.analysis`). `matplotlib.figure.Figure` is used directly, so no GUI backend
or global pyplot state is involved.

Drawing is the longest part of a report (about 2.7 s of CPU of 7.8 on 100 runs,
plus 1 s to import matplotlib), so a figure is drawn again only when what it shows
may have changed: `figures/figures.json` keeps, per figure, a hash of its folder's
epochs table, of this code and of matplotlib's version. matplotlib itself is
imported only when something is drawn. Margins are fixed (`place`), not
constrained layout, which measured every label twice per save.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from sweep import analysis as an
from sweep import vocab
from sweep.analysis import curves, estimates, selection, settings, summary
from sweep.analysis.estimates import estimate
from sweep.analysis.selection import (
    OPTIMIZER,
    Selection,
    choose_context,
    fmt_value,
    sorted_values,
    toggle_values,
    where,
)
from sweep.base import atomic
from sweep.report.figures import layout
from sweep.report.figures.files import FigureFile, cached_or_drawn, read_index, write_index

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


LABELS = vocab.PLOT_LABELS  # a metric's name in a legend, declared with the metric (sweep/vocab.py)


def draw_all(results: an.Results, out: Path, svg: bool = False) -> list[FigureFile]:
    """Every figure the data supports, for each results folder, into out/figures/."""
    folder = out / "figures"
    atomic.own_folder(folder)
    figures: list[FigureFile] = []
    if results.folder_epochs.empty:
        return figures
    index = read_index(folder)
    for source, epochs in results.folder_epochs.groupby(an.SOURCE, sort=False):
        figures += draw_source(epochs, folder, Path(str(source)).name, index, svg)
    write_index(folder, index)
    return figures


def _seeds(summary: pd.DataFrame) -> str:
    """The seeds behind a figure, for its caption: "seeds 0, 1, 2"."""
    seeds = sorted(int(s) for s in summary[vocab.SEED].dropna().unique())
    return f"seed{'s' if len(seeds) != 1 else ''} {', '.join(map(str, seeds))}"


@dataclass(frozen=True)
class Plan:
    """One figure a results folder supports: its file name, how to draw it, and its caption."""

    name: str
    make: Callable[[], Figure]
    caption: str


def draw_source(epochs: pd.DataFrame, folder: Path, prefix: str, index: dict[str, Any], svg: bool) -> list[FigureFile]:
    key = _drawing_key(epochs)
    source = str(epochs[an.SOURCE].iloc[0]) if an.SOURCE in epochs else prefix
    return [
        cached_or_drawn(p.make, folder, f"{prefix}-{p.name}", p.caption, key, index, svg) for p in plans(epochs, source)
    ]


def plans(epochs: pd.DataFrame, source: str) -> list[Plan]:
    """Every figure one results folder's epochs support, each titled with `source` and what it holds fixed."""
    summary = an.run_summary(epochs)
    found: list[Plan] = []
    by_batch = choose_context(summary, an.BATCH_SIZE)
    if by_batch is not None:
        chosen = epochs[epochs[vocab.RUN_ID].isin(by_batch.rows[vocab.RUN_ID])]
        where_ = f"{source}: {by_batch.tested_at()}"
        note = f" Runs: {by_batch.describe()}."
        found += [
            Plan(
                "accuracy_curves",
                functools.partial(accuracy_curves, chosen, where_),
                "Compare train_acc (solid blue) with val_acc (solid green) at epoch 2 in each batch size's panel: the "
                "post's symptom is the first far above the second at the large batch sizes only; train_eval_acc "
                "(dashed) is the same training images in inference mode. Mean over seeds, 95% t-interval bands." + note,
            ),
            Plan(
                "gap_curves",
                functools.partial(gap_curves, chosen, where_),
                "A gap that grows with batch size shows as the larger batch sizes' lines higher in the left panel "
                "(what the post read); the right panel shows how much of it remains in inference mode (eval_gap)."
                + note,
            ),
            Plan(
                "speed",
                functools.partial(speed_vs_batch, by_batch.rows, where_),
                "Larger batches train faster per epoch where epoch time falls (left) and throughput rises (right) from "
                "left to right; epochs 2 onwards (epoch 1 includes graph tracing), error bars clipped at 0 s." + note,
            ),
        ]
    if an.BATCH_SIZE in an.varying(summary):
        fixed = _fixed(summary, an.BATCH_SIZE)
        found.append(
            Plan(
                "final_val_acc",
                functools.partial(final_val_vs_batch, summary, f"{source}: {fixed}"),
                "The highest point of a line is the batch size that ends with the best val_acc at that line's "
                "settings; lines that cross say the answer depends on them. Error bars: 95% t-interval clipped to "
                f"[0, 1]; {_seeds(summary)}.",
            )
        )
    toggles = [t for t in an.TOGGLES if t in an.varying(summary)]
    if toggles:
        fixed = _fixed(summary, toggles[0])
        found.append(
            Plan(
                "toggles",
                functools.partial(toggle_gaps, summary, toggles, f"{source}: {fixed}"),
                "A suspected cause opens a train-val gap where its bars stand above those of the value marked "
                "reference in its panel; each panel compares one setting with the others at the post's defaults; "
                f"error bars: 95% t-interval; {_seeds(summary)}.",
            )
        )
    by_gpus = choose_context(summary, an.GPUS)
    if by_gpus is not None:
        chosen = epochs[epochs[vocab.RUN_ID].isin(by_gpus.rows[vocab.RUN_ID])]
        found.append(
            Plan(
                "gpus_curves",
                functools.partial(gpus_curves, chosen, f"{source}: {by_gpus.tested_at()}"),
                "G replicas learn like one device where the lines of every replica count lie on one another in each "
                f"panel (same global batch). Runs: {by_gpus.describe()}.",
            )
        )
    return found


def _fixed(summary: pd.DataFrame, axis: str) -> str:
    """The settings every run of a folder shares, as `Selection.tested_at` words them: a setting empty in some
    runs and set in others varies (ghost_batch_size), so only the optimizer of the varying ones is kept (tested_at
    would otherwise name its default).
    """
    varying = [c for c in an.varying(summary) if c != OPTIMIZER]
    return Selection(axis, summary.drop(columns=varying), {}, 1).tested_at()


def _drawing_key(epochs: pd.DataFrame) -> str:
    """What a folder's figures are drawn from: its epochs table, the drawing code, matplotlib."""
    digest = hashlib.sha256(pd.util.hash_pandas_object(epochs, index=False).to_numpy().tobytes())
    digest.update(",".join(map(str, epochs.columns)).encode())
    digest.update(_code_digest())
    return digest.hexdigest()


@functools.cache  # once per process, not once per results folder
def _code_digest() -> bytes:
    """The drawing code (this module, its layout rules and the analysis modules it reads) and matplotlib's version."""
    digest = hashlib.sha256()
    analysis = (curves.__file__, settings.__file__, summary.__file__, selection.__file__, estimates.__file__)
    for module in (__file__, layout.__file__, *analysis):
        digest.update(Path(module).read_bytes())
    digest.update(importlib.metadata.version("matplotlib").encode())
    return digest.digest()


# --- helpers


def _band(ax: Axes, stats: pd.DataFrame, label: str, bounds: tuple[float, float], **style: Any) -> None:
    """Mean line and 95% CI band of one metric (stats: rows of analysis.summarize), the band within `bounds`."""
    from matplotlib.ticker import MaxNLocator

    stats = stats.sort_values(vocab.EPOCH)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole numbers
    line = ax.plot(stats[vocab.EPOCH], stats["mean"], marker="o", markersize=3, label=label, **style)[0]
    low, high = stats["ci_low"].clip(*bounds), stats["ci_high"].clip(*bounds)
    ax.fill_between(stats[vocab.EPOCH], low, high, color=line.get_color(), alpha=0.15)


# --- the figures


def accuracy_curves(epochs: pd.DataFrame, where_: str = "") -> Figure:
    """train_acc, train_eval_acc and val_acc against epoch, one panel per batch size."""
    metrics = (vocab.TRAIN_ACC, vocab.TRAIN_EVAL_ACC, vocab.VAL_ACC)
    stats = an.summarize(epochs, metrics, by=[an.BATCH_SIZE])
    sizes = sorted_values(stats[an.BATCH_SIZE])
    question = "Is train_acc far above val_acc early on, and at which batch sizes?"
    fig, axes = layout.panels(len(sizes), question, where_, width=3.4, columns=4)
    for ax, size in zip(axes, sizes, strict=True):
        for metric, style in zip(metrics, ("-", "--", "-"), strict=True):
            rows = stats[(stats[an.BATCH_SIZE] == size) & (stats["metric"] == metric)]
            _band(ax, rows, LABELS[metric], layout.ACCURACY, linestyle=style)
        ax.set_title(f"batch size {fmt_value(size)}")
        ax.set_ylim(0, 1)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    for ax in axes[:: min(len(axes), 4)]:
        ax.set_ylabel("accuracy (fraction correct)")
    rows = layout.legend_below(fig, axes[0], columns=1 if len(axes) < 3 else 3)
    layout.place(fig, min(len(axes), 4), legend_rows=rows, titles=True, rows=-(-len(axes) // 4))
    return fig


def gap_curves(epochs: pd.DataFrame, where_: str = "") -> Figure:
    """gap (left) and eval_gap (right) against epoch, one colour per batch size; a row per MAX_LINES sizes."""
    stats = an.summarize(epochs, (vocab.GAP, vocab.EVAL_GAP), by=[an.BATCH_SIZE])
    sizes = sorted_values(stats[an.BATCH_SIZE])
    chunks = [sizes[i : i + layout.MAX_LINES] for i in range(0, len(sizes), layout.MAX_LINES)]
    fig, axes = layout.panels(2 * len(chunks), "Does the train-val gap grow with batch size?", where_, columns=2)
    for r, chunk in enumerate(chunks):
        for ax, metric, words in zip(
            axes[2 * r : 2 * r + 2],
            (vocab.GAP, vocab.EVAL_GAP),
            ("training-mode running mean", "training images in inference mode"),
            strict=True,
        ):
            for i, size in enumerate(chunk):
                rows = stats[(stats[an.BATCH_SIZE] == size) & (stats["metric"] == metric)]
                _band(ax, rows, f"batch {fmt_value(size)}", layout.DIFFERENCE, color=f"C{i}")
            ax.set_title(f"{metric} ({words})", fontsize="small")
            ax.axhline(0, color="grey", linewidth=0.8)
            ax.set_xlabel("epoch")
            ax.grid(alpha=0.3)
            ax.legend(fontsize="small", ncol=2)
        axes[2 * r].set_ylabel("train accuracy - val accuracy (fraction)")
    layout.place(fig, 2, titles=True, rows=len(chunks))
    return fig


def _log2_batch_axis(ax: Axes, sizes: list[Any]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [fmt_value(s) for s in sizes])
    ax.set_xlabel("batch size (global; log2 scale)")  # fits a 3.6-inch panel: faceted figures sit side by side
    ax.grid(alpha=0.3)


def _errorbar_by_batch(
    ax: Axes, rows: pd.DataFrame, metric: str, bounds: tuple[float, float], dodge: float = 1.0, **style: Any
) -> None:
    """Mean and 95% interval (within `bounds`) per batch size; `dodge` shifts the points (a factor on the log2
    axis) so that the error bars of several lines at one batch size do not hide each other.
    """
    points = [(size, estimate(group[metric])) for size, group in rows.groupby(an.BATCH_SIZE)]
    errors = [layout.clipped(e.low, e.mean, e.high, bounds) for _, e in points]
    ax.errorbar(
        [size * dodge for size, _ in points],
        [e.mean for _, e in points],
        yerr=[[b for b, _ in errors], [a for _, a in errors]],
        marker="o",
        capsize=3,
        **style,
    )


def final_val_vs_batch(summary: pd.DataFrame, where_: str = "") -> Figure:
    """val_acc at the last epoch against batch size, one line per combination of the other settings that vary:
    panels split by as few of them as keep MAX_LINES lines a panel, colour by one, line style by the rest.
    """
    others = an.varying(summary, exclude=[an.BATCH_SIZE])
    facets = layout.facet_keys(summary, others)
    inner = [k for k in others if k not in facets]
    panels = [((), summary)] if not facets else list(summary.groupby(facets, dropna=False, sort=True))
    columns = min(len(panels), 3)
    fig, axes = layout.panels(
        len(panels), "Which batch size ends with the best val_acc?", where_, width=3.6, columns=columns
    )
    encode = layout.Encoding(summary, inner)
    metric = an.column(vocab.VAL_ACC, "last")
    for ax, (values, rows) in zip(axes, panels, strict=True):
        lines = rows.groupby(inner, dropna=False, sort=True) if inner else [((), rows)]
        lines = list(lines)
        for i, (line_values, line) in enumerate(lines):
            style = encode.style(line_values if isinstance(line_values, tuple) else (line_values,), i)
            dodge = 2 ** (0.04 * (i - (len(lines) - 1) / 2))
            _errorbar_by_batch(ax, line, metric, layout.ACCURACY, dodge, **style)
        if facets:
            ax.set_title(layout.combination_label(facets, values if isinstance(values, tuple) else (values,)))
        _log2_batch_axis(ax, sorted_values(summary[an.BATCH_SIZE]))
        ax.set_ylim(-0.02, 1.02)
        if not encode.split and inner:
            ax.legend(fontsize="small")  # a line per combination: each panel names its own
    for ax in axes[::columns]:
        ax.set_ylabel("val_acc at the last epoch (fraction)")
    legend_rows = 0
    if encode.split:
        handles, labels = encode.legend()
        legend_rows = layout.legend(fig, handles, labels, columns=min(3, len(labels)))
    layout.place(fig, columns, legend_rows=legend_rows, titles=bool(facets), rows=-(-len(panels) // columns))
    return fig


def speed_vs_batch(summary: pd.DataFrame, where_: str = "") -> Figure:
    """Epoch time and samples per second against batch size."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 4.0))
    axes = fig.subplots(1, 2)
    layout.title(fig, "Do larger batches train faster per epoch?", where_)
    sizes = sorted_values(summary[an.BATCH_SIZE])
    for ax, metric, unit in zip(
        axes,
        (vocab.EPOCH_SECONDS, vocab.SAMPLES_PER_SECOND),
        ("epoch time (seconds)", "throughput (training images per second)"),
        strict=True,
    ):
        _errorbar_by_batch(ax, summary, metric, layout.NON_NEGATIVE, label="mean over seeds, 95% CI")
        _log2_batch_axis(ax, sizes)
        ax.set_ylim(bottom=0)  # times and rates start at 0: the axis shows how much faster, not only which
        ax.set_ylabel(unit)
        ax.legend(fontsize="small")
    layout.place(fig, columns=2, gap=1.0)
    return fig


def toggle_gaps(summary: pd.DataFrame, toggles: list[str], where_: str = "") -> Figure:
    """For each toggle: gap and eval_gap at epoch 2 and at the end, per value of the toggle in numeric order,
    the reference value (the post's setting; the most samples per class) marked under its tick.
    """
    question = "Does each suspected cause open a train-val gap?"
    fig, axes = layout.panels(len(toggles), question, where_, width=3.0)
    bars = [(vocab.GAP, "epoch2"), (vocab.GAP, "last"), (vocab.EVAL_GAP, "epoch2"), (vocab.EVAL_GAP, "last")]
    for ax, toggle in zip(axes, toggles, strict=True):
        chosen = choose_context(summary, toggle)
        rows = chosen.rows if chosen is not None else summary
        reference = toggle_values(rows, toggle)[0]
        values = sorted_values(rows[toggle])  # numbers in numeric order, False before True
        for i, (metric, when) in enumerate(bars):
            ests = [estimate(where(rows, toggle, v)[an.column(metric, when)]) for v in values]
            xs = [j + (i - 1.5) * 0.2 for j in range(len(values))]
            errors = [layout.clipped(e.low, e.mean, e.high, layout.DIFFERENCE) for e in ests]
            ax.bar(
                xs,
                [e.mean for e in ests],
                width=0.2,
                yerr=[[b for b, _ in errors], [a for _, a in errors]],
                capsize=2,
                label=f"{metric} at {'epoch 2' if when == 'epoch2' else 'the end'}",
                hatch="//" if i >= 2 else None,
            )
        ticks = [fmt_value(v) + ("\n(reference)" if layout.same(v, reference) else "") for v in values]
        ax.set_xticks(range(len(values)), ticks)
        ax.set_xlabel(toggle)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("train accuracy - val accuracy (fraction)")
    rows = layout.legend_below(fig, axes[0], columns=4 if len(axes) > 2 else 2)  # four entries fit 9 inches, not 6
    layout.place(fig, len(axes), legend_rows=rows + 1)  # + 1: the reference's second tick line
    return fig


def gpus_curves(epochs: pd.DataFrame, where_: str = "") -> Figure:
    """val_acc (solid) and train_eval_acc (dashed) against epoch, one colour per replica count."""
    stats = an.summarize(epochs, (vocab.VAL_ACC, vocab.TRAIN_EVAL_ACC), by=[an.BATCH_SIZE, an.GPUS])
    sizes = sorted_values(stats[an.BATCH_SIZE])
    fig, axes = layout.panels(len(sizes), "Do G replicas at the same global batch learn like one device?", where_)
    for ax, size in zip(axes, sizes, strict=True):
        at_size = stats[stats[an.BATCH_SIZE] == size]
        for i, gpus in enumerate(sorted_values(at_size[an.GPUS])):
            for metric, style in ((vocab.VAL_ACC, "-"), (vocab.TRAIN_EVAL_ACC, "--")):
                rows = at_size[(at_size[an.GPUS] == gpus) & (at_size["metric"] == metric)]
                label = f"{fmt_value(gpus)} replica(s): {metric}"
                _band(ax, rows, label, layout.ACCURACY, linestyle=style, color=f"C{i % 10}")
        ax.set_title(f"global batch {fmt_value(size)}")
        ax.set_ylim(0, 1)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy (fraction correct)")
    axes[-1].legend(fontsize="small")
    layout.place(fig, len(axes), titles=True)
    return fig
