"""The report's main figure, on its first screen: the post's picture, drawn from the runs its claim read.

Top panel: the running train_acc (solid) and val_acc (dashed) the post read, against optimizer steps,
one colour per batch size, with the post's numbers at epoch 2 marked. Bottom panel, where the runs
recorded it: the same weights read with BatchNorm's statistics recomputed (train_eval_acc_recal and
val_acc_recal). A gap that shows on top and closes below is BatchNorm's lag, not generalisation.

The runs are C1's (batch 8 and 64 at the settings its check chose); without them, C7's (the smallest
and largest batch). Steps, not epochs, on the x axis: at one epoch a large batch has taken far fewer
steps, which is the post's comparison. No TensorFlow; matplotlib's `Figure` directly, as `sweep.report.figures.curves`.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from sweep import analysis as an
from sweep import vocab
from sweep.base import atomic
from sweep.claims.findings import Claim, Finding, Part
from sweep.claims.registry import the
from sweep.report.figures import files
from sweep.report.figures.files import FigureFile

if TYPE_CHECKING:
    from matplotlib.axes import Axes

NAME = "the_post_picture"
# The post's numbers at epoch 2: batch -> (train_acc, val_acc)
POST = {64: (0.80, 0.06), 8: (0.60, 0.60)}
MAX_BATCHES = 4  # two lines each per panel: at most 8
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def runs_read(findings: Sequence[tuple[Claim, Finding | None]]) -> tuple[str, Finding] | None:
    """(claim id, finding) whose runs the figure draws: the post's picture's (C1), else the batch sizes'
    fit and generalisation's (C7); None when neither was tested.
    """
    found = {c.id: f for c, f in findings if f is not None and f.checks and f.run_ids}
    return next(((cid, found[cid]) for cid in (the(Part.PICTURE).id, the(Part.SCALING).id) if cid in found), None)


def draw(
    epochs: pd.DataFrame, findings: Sequence[tuple[Claim, Finding | None]], out: Path, svg: bool = False
) -> FigureFile | None:
    """The figure into out/figures/, or None when no batch-size claim was tested."""
    chosen = runs_read(findings)
    if chosen is None or an.BATCH_SIZE not in epochs:
        return None
    claim_id, finding = chosen
    rows = epochs[epochs[vocab.RUN_ID].astype(str).isin(finding.run_ids)]
    sizes = _batches(sorted(int(b) for b in rows[an.BATCH_SIZE].dropna().unique()))
    if claim_id == the(Part.PICTURE).id:  # its runs may include other batch sizes its evidence read; the post's two
        sizes = [b for b in sizes if b in POST]
    if len(sizes) < 2:
        return None
    recal = vocab.VAL_ACC_RECAL in rows and rows[vocab.VAL_ACC_RECAL].notna().any()
    folders = ", ".join(sorted(rows[an.SOURCE].astype(str).unique())) if an.SOURCE in rows else ""
    title = f"The post's picture ({claim_id}'s runs): {folders}, {finding.tested_at}"
    folder = out / "figures"
    atomic.own_folder(folder)
    index = files.read_index(folder)  # drawn again only when its runs, its sizes or this code changed
    drawn = files.cached_or_drawn(
        lambda: _figure(rows, sizes, recal, title), folder, NAME, _caption(recal, rows), _key(rows, sizes), index, svg
    )
    files.write_index(folder, index)
    return dataclasses.replace(drawn, title=title)  # one line; the drawn title is wrapped


def _key(rows: pd.DataFrame, sizes: list[int]) -> str:
    digest = hashlib.sha256(pd.util.hash_pandas_object(rows, index=False).to_numpy().tobytes())
    digest.update(repr(sizes).encode())
    digest.update(Path(__file__).read_bytes())
    return digest.hexdigest()


def _batches(sizes: list[int]) -> list[int]:
    """At most MAX_BATCHES: the smallest, the largest, and the post's 8 and 64 where present."""
    if len(sizes) <= MAX_BATCHES:
        return sizes
    keep = [sizes[0], sizes[-1], *(b for b in POST if b in sizes)]
    keep += [b for b in sizes if b not in keep]
    return sorted(dict.fromkeys(keep[:MAX_BATCHES]))


def _caption(recal: bool, rows: pd.DataFrame) -> str:
    seeds = rows[vocab.SEED].nunique()
    text = (
        f"Mean over {seeds} seed{'s' if seeds != 1 else ''}, x on a log scale. Top: the running train_acc (solid) "
        "and val_acc (dashed) the post read; stars: the post's numbers at epoch 2, placed at each batch size's "
        "step count at epoch 2 here."
    )
    if recal:
        text += (
            " Bottom: the same weights with BatchNorm's statistics recomputed (train_eval_acc_recal, "
            "val_acc_recal): a gap that closes here was BatchNorm's lag, not a failure to generalise."
        )
    return text


def _figure(rows: pd.DataFrame, sizes: list[int], recal: bool, title: str):  # noqa: ANN202 (matplotlib Figure)
    from matplotlib.figure import Figure

    panels = 2 if recal else 1
    fig = Figure(figsize=(6.0, 2.6 * panels + 1.3))
    axes = fig.subplots(panels, 1, sharex=True, squeeze=False)[:, 0].tolist()
    fig.suptitle(_wrapped(title), fontsize=9)
    means = rows.groupby([an.BATCH_SIZE, vocab.STEP]).mean(numeric_only=True).reset_index()
    # the running train_acc restarts at each epoch: read it, as the post did, at epochs' ends only
    ends = means[means[vocab.EPOCH] % 1 == 0]
    _panel(axes[0], ends, sizes, (vocab.TRAIN_ACC, vocab.VAL_ACC), "What the post read (running train_acc, raw)")
    _mark_post(axes[0], ends, sizes)
    if recal:
        pair = (vocab.TRAIN_EVAL_ACC_RECAL, vocab.VAL_ACC_RECAL)
        _panel(axes[1], means, sizes, pair, "The same weights, BatchNorm's statistics recomputed")
    axes[-1].set_xlabel("optimizer steps (log scale)")
    _legend(fig, sizes)
    fig.subplots_adjust(left=0.1, right=0.97, top=1 - 0.75 / fig.get_figheight(), bottom=0.85 / fig.get_figheight())
    return fig


def _wrapped(title: str, width: int = 80) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(title, width))


def _panel(ax: Axes, means: pd.DataFrame, sizes: list[int], metrics: tuple[str, str], name: str) -> None:
    for colour, size in zip(COLOURS, sizes, strict=False):
        line = means[means[an.BATCH_SIZE] == size].sort_values(vocab.STEP)
        for metric, style in zip(metrics, ("-", "--"), strict=True):
            if metric in line and line[metric].notna().any():
                ax.plot(line[vocab.STEP], line[metric], style, color=colour)
    ax.set_xscale("log")
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")
    ax.set_title(name, fontsize=9)
    ax.grid(alpha=0.3)


def _mark_post(ax: Axes, means: pd.DataFrame, sizes: list[int]) -> None:
    """The post's epoch-2 numbers at each batch size's step count at epoch 2 in these runs."""
    for colour, size in zip(COLOURS, sizes, strict=False):
        at2 = means[(means[an.BATCH_SIZE] == size) & (means[vocab.EPOCH] == 2)]
        if size not in POST or at2.empty:
            continue
        step = float(at2[vocab.STEP].iloc[0])
        ax.plot([step] * 2, POST[size], "*", color=colour, markersize=11, markeredgecolor="black")


def _legend(fig, sizes: list[int]) -> None:  # noqa: ANN001 (matplotlib Figure)
    """Colour = batch size, line style = train or val, star = the post's numbers: one entry each, below the
    panels, where it hides no curve.
    """
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, label=f"batch {b}") for c, b in zip(COLOURS, sizes, strict=False)]
    handles += [
        Line2D([], [], color="grey", linestyle="-", label="train"),
        Line2D([], [], color="grey", linestyle="--", label="val"),
        Line2D([], [], color="grey", marker="*", linestyle="", markeredgecolor="black", label="the post, epoch 2"),
    ]
    fig.legend(handles=handles, fontsize=8, loc="lower center", ncol=len(handles), frameon=False)
