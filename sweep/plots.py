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
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from sweep import analysis as an
from sweep import estimates, selection, vocab
from sweep.estimates import estimate
from sweep.selection import (
    choose_context,
    fmt_value,
    matches,
    sorted_values,
    toggle_values,
    where,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

INDEX = "figures.json"  # figure name -> {"key": what it was drawn from, "title": its title}

LABELS = {
    vocab.TRAIN_ACC: "train_acc (running mean, training mode)",
    vocab.TRAIN_EVAL_ACC: "train_eval_acc (end of epoch, inference mode)",
    vocab.VAL_ACC: "val_acc (end of epoch, inference mode)",
    vocab.GAP: "gap = train_acc - val_acc",
    vocab.EVAL_GAP: "eval_gap = train_eval_acc - val_acc",
}


@dataclass(frozen=True)
class FigureFile:
    name: str
    png: Path
    svg: Path | None
    title: str
    caption: str


def draw_all(results: an.Results, out: Path, svg: bool = False) -> list[FigureFile]:
    """Every figure the data supports, for each results folder, into out/figures/."""
    folder = out / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    figures: list[FigureFile] = []
    if results.folder_epochs.empty:
        return figures
    index = read_index(folder)
    for source, epochs in results.folder_epochs.groupby(an.SOURCE, sort=False):
        figures += draw_source(epochs, folder, Path(str(source)).name, index, svg)
    (folder / INDEX).write_text(json.dumps(index, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return figures


def _seeds(summary: pd.DataFrame) -> str:
    """The seeds behind a figure, for its caption: "seeds 0, 1, 2"."""
    seeds = sorted(int(s) for s in summary[vocab.SEED].dropna().unique())
    return f"seed{'s' if len(seeds) != 1 else ''} {', '.join(map(str, seeds))}"


def draw_source(epochs: pd.DataFrame, folder: Path, prefix: str, index: dict[str, Any], svg: bool) -> list[FigureFile]:
    summary = an.run_summary(epochs)
    drawn: list[FigureFile] = []
    key = _drawing_key(epochs)

    def save(name: str, make: Callable[[], Figure], caption: str) -> None:
        drawn.append(cached_or_drawn(make, folder, f"{prefix}-{name}", caption, key, index, svg))

    by_batch = choose_context(summary, an.BATCH_SIZE)
    if by_batch is not None:
        chosen = epochs[epochs[vocab.RUN_ID].isin(by_batch.rows[vocab.RUN_ID])]
        note = f" Runs: {by_batch.describe()}."
        save("accuracy_curves", lambda: accuracy_curves(chosen), "Mean over seeds, 95% t-interval bands." + note)
        save("gap_curves", lambda: gap_curves(chosen), "Solid: gap (what the post read); dashed: eval_gap." + note)
        save(
            "speed", lambda: speed_vs_batch(by_batch.rows), "Epochs 2 onwards (epoch 1 includes graph tracing)." + note
        )
    if an.BATCH_SIZE in an.varying(summary):
        save(
            "final_val_acc",
            lambda: final_val_vs_batch(summary),
            f"One line per combination of the other settings that vary; {_seeds(summary)}.",
        )
    toggles = [t for t in an.TOGGLES if t in an.varying(summary)]
    if toggles:
        save(
            "toggles",
            lambda: toggle_gaps(summary, toggles),
            "Each panel compares one setting with the others at the post's defaults; error bars: 95% t-interval; "
            f"{_seeds(summary)}.",
        )
    by_gpus = choose_context(summary, an.GPUS)
    if by_gpus is not None:
        chosen = epochs[epochs[vocab.RUN_ID].isin(by_gpus.rows[vocab.RUN_ID])]
        save(
            "gpus_curves", lambda: gpus_curves(chosen), f"Same global batch in each panel. Runs: {by_gpus.describe()}."
        )
    return drawn


def cached_or_drawn(
    make: Callable[[], Figure], folder: Path, name: str, caption: str, key: str, index: dict[str, Any], svg: bool
) -> FigureFile:
    png, svg_path = folder / f"{name}.png", (folder / f"{name}.svg" if svg else None)
    known = index.get(name, {})
    if known.get("key") == key and png.exists() and (svg_path is None or svg_path.exists()):
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
    title = fig.get_suptitle() or name
    index[name] = {"key": key, "title": title}
    return FigureFile(name, png, svg_path, title, caption)


def _drawing_key(epochs: pd.DataFrame) -> str:
    """What a folder's figures are drawn from: its epochs table, the drawing code, matplotlib."""
    digest = hashlib.sha256(pd.util.hash_pandas_object(epochs, index=False).to_numpy().tobytes())
    digest.update(",".join(map(str, epochs.columns)).encode())
    digest.update(_code_digest())
    return digest.hexdigest()


@functools.cache  # once per process, not once per results folder
def _code_digest() -> bytes:
    """The drawing code (this module and the analysis modules it reads) and matplotlib's version."""
    digest = hashlib.sha256()
    for module in (__file__, an.__file__, selection.__file__, estimates.__file__):
        digest.update(Path(module).read_bytes())
    digest.update(importlib.metadata.version("matplotlib").encode())
    return digest.digest()


def read_index(folder: Path) -> dict[str, Any]:
    try:
        index = json.loads((folder / INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: everything is drawn again
    return index if isinstance(index, dict) else {}


# --- helpers


def _band(ax: Axes, stats: pd.DataFrame, label: str, **style: Any) -> None:
    """Mean line and 95% CI band of one metric (stats: rows of analysis.summarize)."""
    from matplotlib.ticker import MaxNLocator

    stats = stats.sort_values(vocab.EPOCH)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole numbers
    line = ax.plot(stats[vocab.EPOCH], stats["mean"], marker="o", markersize=3, label=label, **style)[0]
    ax.fill_between(stats[vocab.EPOCH], stats["ci_low"], stats["ci_high"], color=line.get_color(), alpha=0.15)


def _panels(count: int, title: str, width: float = 4.2, height: float = 3.4) -> tuple[Figure, list[Axes]]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(width * count, 6.0), height + 0.8))
    axes = fig.subplots(1, count, sharey=True, squeeze=False)[0].tolist()
    fig.suptitle(title)
    return fig, axes


def place(fig: Figure, columns: int = 1, gap: float = 0.15, legend_rows: int = 0, titles: bool = False) -> None:
    """Margins in inches, fixed: room for tick labels, axis labels, a suptitle, panel `titles` and
    `legend_rows` of a figure legend below. Constrained layout measured every label twice per save,
    about half of a figure's drawing time; these figures' labels are of known length.

    `gap`: inches between panels (0.15 with a shared y axis; more when each panel has its own labels).
    The legend adds to the figure's height: a legend of many lines does not squeeze the panels."""
    legend = 0.2 * legend_rows + 0.15 if legend_rows else 0.0
    width, height = fig.get_size_inches()
    height += legend
    fig.set_size_inches(width, height)
    left, right = 0.75, 0.2
    bottom = 0.55 + legend
    top = 0.45 + (0.3 if titles else 0.0)
    panel = (width - left - right - gap * (columns - 1)) / columns
    fig.subplots_adjust(
        left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height, wspace=gap / panel
    )


def legend_below(fig: Figure, axes: Axes, columns: int = 1) -> int:
    """A figure legend of `axes`' lines centred under the panels; returns its rows, for `place`."""
    handles, labels = axes.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=columns, fontsize="small")
    return -(-len(labels) // columns)


# --- the figures


def accuracy_curves(epochs: pd.DataFrame) -> Figure:
    """train_acc, train_eval_acc and val_acc against epoch, one panel per batch size."""
    metrics = (vocab.TRAIN_ACC, vocab.TRAIN_EVAL_ACC, vocab.VAL_ACC)
    stats = an.summarize(epochs, metrics, by=[an.BATCH_SIZE])
    sizes = sorted_values(stats[an.BATCH_SIZE])
    fig, axes = _panels(len(sizes), "Is train_acc far above val_acc early on, and at which batch sizes?", width=3.4)
    for ax, size in zip(axes, sizes, strict=True):
        for metric, style in zip(metrics, ("-", "--", "-"), strict=True):
            rows = stats[(stats[an.BATCH_SIZE] == size) & (stats["metric"] == metric)]
            _band(ax, rows, LABELS[metric], linestyle=style)
        ax.set_title(f"batch size {fmt_value(size)}")
        ax.set_ylim(0, 1)  # accuracies; a t band over few seeds can reach past 0 and 1
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy (fraction correct)")
    rows = legend_below(fig, axes[0], columns=1 if len(axes) < 3 else 3)
    place(fig, len(axes), legend_rows=rows, titles=True)
    return fig


def gap_curves(epochs: pd.DataFrame) -> Figure:
    """gap (solid) and eval_gap (dashed) against epoch, one colour per batch size."""
    stats = an.summarize(epochs, (vocab.GAP, vocab.EVAL_GAP), by=[an.BATCH_SIZE])
    fig, (ax,) = _panels(1, "Does the train-val gap grow with batch size?")
    ax.set_title("solid: gap (training-mode running mean); dashed: eval_gap (inference mode)", fontsize="small")
    for i, size in enumerate(sorted_values(stats[an.BATCH_SIZE])):
        color = f"C{i % 10}"
        for metric, style in ((vocab.GAP, "-"), (vocab.EVAL_GAP, "--")):
            rows = stats[(stats[an.BATCH_SIZE] == size) & (stats["metric"] == metric)]
            _band(ax, rows, f"batch {fmt_value(size)}: {metric}", linestyle=style, color=color)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xlabel("epoch")
    ax.set_ylabel("train accuracy - val accuracy (fraction)")
    ax.legend(fontsize="small", ncol=2)
    ax.grid(alpha=0.3)
    place(fig, titles=True)
    return fig


def _log2_batch_axis(ax: Axes, sizes: list[Any]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [fmt_value(s) for s in sizes])
    ax.set_xlabel("batch size (global, images per step; log2 scale)")
    ax.grid(alpha=0.3)


def _errorbar_by_batch(ax: Axes, rows: pd.DataFrame, metric: str, label: str) -> None:
    points = [(size, estimate(group[metric])) for size, group in rows.groupby(an.BATCH_SIZE)]
    xs = [p[0] for p in points]
    means = [p[1].mean for p in points]
    errors = [[p[1].mean - p[1].low for p in points], [p[1].high - p[1].mean for p in points]]
    ax.errorbar(xs, means, yerr=errors, marker="o", capsize=3, label=label)


def final_val_vs_batch(summary: pd.DataFrame) -> Figure:
    """val_acc at the last epoch against batch size, one line per combination of the other settings."""
    others = an.varying(summary, exclude=[an.BATCH_SIZE])
    fig, (ax,) = _panels(1, "Which batch size ends with the best val_acc?")
    groups = summary.groupby(others, dropna=False, sort=True) if others else [((), summary)]
    for values, rows in groups:
        values = values if isinstance(values, tuple) else (values,)
        _errorbar_by_batch(ax, rows, an.column(vocab.VAL_ACC, "last"), _combination_label(others, values))
    _log2_batch_axis(ax, sorted_values(summary[an.BATCH_SIZE]))
    ax.set_ylabel("val_acc at the last epoch (fraction)")
    place(fig, legend_rows=legend_below(fig, ax))
    return fig


def _is_default(key: str, value: Any, defaults: dict[str, Any]) -> bool:
    if key not in defaults or defaults[key] is None:
        return False  # a set value of a default-None key (ghost_batch_size=8) is never the default
    return bool(matches(pd.Series([value]), defaults[key]).iloc[0])


def _combination_label(keys: list[str], values: tuple) -> str:
    """What sets a line apart: its settings that are set (not empty) and not at the post's default."""
    defaults = {**an.POST_DEFAULTS, **an.CONTROL_DEFAULTS}
    shown = [(k, v) for k, v in zip(keys, values, strict=True) if not pd.isna(v) and not _is_default(k, v, defaults)]
    return ", ".join(f"{k}={fmt_value(v)}" for k, v in shown) or "the post's setting"


def speed_vs_batch(summary: pd.DataFrame) -> Figure:
    """Epoch time and samples per second against batch size."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 4.0))
    axes = fig.subplots(1, 2)
    fig.suptitle("Do larger batches train faster per epoch?")
    sizes = sorted_values(summary[an.BATCH_SIZE])
    for ax, metric, unit in zip(
        axes,
        (vocab.EPOCH_SECONDS, vocab.SAMPLES_PER_SECOND),
        ("epoch time (seconds)", "throughput (training images per second)"),
        strict=True,
    ):
        _errorbar_by_batch(ax, summary, metric, "mean over seeds, 95% CI")
        _log2_batch_axis(ax, sizes)
        ax.set_ylabel(unit)
        ax.legend(fontsize="small")
    place(fig, columns=2, gap=1.0)
    return fig


def toggle_gaps(summary: pd.DataFrame, toggles: list[str]) -> Figure:
    """For each toggle: gap and eval_gap at epoch 2 and at the end, per value of the toggle."""
    fig, axes = _panels(len(toggles), "Does each suspected cause open a train-val gap?", width=3.0)
    bars = [(vocab.GAP, "epoch2"), (vocab.GAP, "last"), (vocab.EVAL_GAP, "epoch2"), (vocab.EVAL_GAP, "last")]
    for ax, toggle in zip(axes, toggles, strict=True):
        chosen = choose_context(summary, toggle)
        rows = chosen.rows if chosen is not None else summary
        values = toggle_values(rows, toggle)
        for i, (metric, when) in enumerate(bars):
            ests = [estimate(where(rows, toggle, v)[an.column(metric, when)]) for v in values]
            xs = [j + (i - 1.5) * 0.2 for j in range(len(values))]
            errors = [[e.mean - e.low for e in ests], [e.high - e.mean for e in ests]]
            ax.bar(
                xs,
                [e.mean for e in ests],
                width=0.2,
                yerr=errors,
                capsize=2,
                label=f"{metric} at {'epoch 2' if when == 'epoch2' else 'the end'}",
                hatch="//" if i >= 2 else None,
            )
        ax.set_xticks(range(len(values)), [fmt_value(v) for v in values])
        ax.set_xlabel(toggle)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("train accuracy - val accuracy (fraction)")
    rows = legend_below(fig, axes[0], columns=4 if len(axes) > 2 else 2)  # four entries fit 9 inches, not 6
    place(fig, len(axes), legend_rows=rows)
    return fig


def gpus_curves(epochs: pd.DataFrame) -> Figure:
    """val_acc (solid) and train_eval_acc (dashed) against epoch, one colour per replica count."""
    stats = an.summarize(epochs, (vocab.VAL_ACC, vocab.TRAIN_EVAL_ACC), by=[an.BATCH_SIZE, an.GPUS])
    sizes = sorted_values(stats[an.BATCH_SIZE])
    fig, axes = _panels(len(sizes), "Do G replicas at the same global batch learn like one device?")
    for ax, size in zip(axes, sizes, strict=True):
        at_size = stats[stats[an.BATCH_SIZE] == size]
        for i, gpus in enumerate(sorted_values(at_size[an.GPUS])):
            for metric, style in ((vocab.VAL_ACC, "-"), (vocab.TRAIN_EVAL_ACC, "--")):
                rows = at_size[(at_size[an.GPUS] == gpus) & (at_size["metric"] == metric)]
                _band(ax, rows, f"{fmt_value(gpus)} replica(s): {metric}", linestyle=style, color=f"C{i % 10}")
        ax.set_title(f"global batch {fmt_value(size)}")
        ax.set_ylim(0, 1)  # accuracies; a t band over few seeds can reach past 0 and 1
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy (fraction correct)")
    axes[-1].legend(fontsize="small")
    place(fig, len(axes), titles=True)
    return fig
