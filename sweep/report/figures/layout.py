"""How the figures are laid out: titles that say what a figure shows, margins, legends, panels and line encodings.

Shared by every figure module (`sweep.report.figures.curves`, `sweep.report.figures.steps`, `sweep.report.figures.maps`,
`sweep.report.figures.seeds`) so that all of them follow the same rules:

- a title names the figure's question, its results folder and the settings it holds fixed
  (`title`), wrapped to the figure's width;
- no panel holds more than MAX_LINES lines: a figure splits its lines into panels by the fewest
  settings that keep it there (`facet_keys`), colours by one setting and styles lines by the rest
  (`Encoding`);
- an interval never leaves what its quantity can be (`clipped`: no epoch time below 0 s, no
  accuracy outside [0, 1]);
- legends are "small" (8.3 pt) at the saved size, never smaller.

matplotlib is imported only inside the functions that draw.
"""

from __future__ import annotations

import math
import textwrap
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from sweep import analysis as an
from sweep.analysis.selection import fmt_value, matches

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MAX_LINES = 8  # lines per panel: more and neither colours nor a legend tell them apart
STYLES: tuple[Literal["-", "--", ":", "-."], ...] = ("-", "--", ":", "-.")  # line styles that stay apart at 100 dpi
ACCURACY = (0.0, 1.0)  # where an accuracy can lie
DIFFERENCE = (-1.0, 1.0)  # where a difference of two accuracies can lie
NON_NEGATIVE = (0.0, math.inf)  # seconds, images per second
POST = "the post's setting"  # a line whose settings are all at the post's defaults
TITLE_CHARS_PER_INCH = 11  # characters of 10-pt text per inch of figure: where a title wraps


def title(fig: Figure, question: str, where_: str) -> None:
    """The figure's title: its question, then its results folder and the settings it holds fixed, wrapped to the
    figure's width (the report reads the title on one line: `cached_or_drawn` joins the lines).
    """
    chars = max(40, int(fig.get_size_inches()[0] * TITLE_CHARS_PER_INCH))
    fig.suptitle("\n".join(textwrap.wrap(question, chars) + textwrap.wrap(where_, chars)), fontsize="medium")


def _title_lines(fig: Figure) -> int:
    return fig.get_suptitle().count("\n") + 1 if fig.get_suptitle() else 0


def clipped(low: float, mean: float, high: float, bounds: tuple[float, float]) -> tuple[float, float]:
    """An interval's error-bar lengths below and above the mean, kept within what the quantity can be:
    a t interval over few seeds reaches below 0 s or past accuracy 1, which no run can. No interval: 0.
    """
    below = mean - max(low, bounds[0]) if math.isfinite(low) else 0.0
    above = min(high, bounds[1]) - mean if math.isfinite(high) else 0.0
    return max(below, 0.0), max(above, 0.0)


def panels(
    count: int, question: str, where_: str, width: float = 4.2, height: float = 3.4, columns: int | None = None
) -> tuple[Figure, list[Axes]]:
    """`count` panels sharing the y axis, in rows of `columns` (default: one row); unused grid cells hidden."""
    from matplotlib.figure import Figure

    columns = min(count, columns or count)
    rows = -(-count // columns)
    fig = Figure(figsize=(max(width * columns, 6.0), height * rows + 0.8))
    grid = fig.subplots(rows, columns, sharey=True, squeeze=False).ravel().tolist()
    for ax in grid[count:]:
        ax.set_visible(False)
    title(fig, question, where_)
    return fig, grid[:count]


def place(
    fig: Figure, columns: int = 1, gap: float = 0.15, legend_rows: int = 0, titles: bool = False, rows: int = 1
) -> None:
    """Margins in inches, fixed: room for tick labels, axis labels, the title's lines, panel `titles` and
    `legend_rows` of a figure legend below. Constrained layout measured every label twice per save,
    about half of a figure's drawing time; these figures' labels are of known length.

    `gap`: inches between panels (0.15 with a shared y axis; more when each panel has its own labels).
    The legend and a title of several lines add to the figure's height: they do not squeeze the panels.
    """
    legend = 0.2 * legend_rows + 0.15 if legend_rows else 0.0
    lines = _title_lines(fig)
    width, height = fig.get_size_inches()
    height += legend + 0.2 * max(lines - 1, 0)
    fig.set_size_inches(width, height)
    left, right = 0.75, 0.2
    bottom = 0.55 + legend
    top = 0.25 + 0.2 * lines + (0.3 if titles else 0.0)
    vgap = 0.75 + (0.3 if titles else 0.0)  # tick labels and axis label of the row above, and a panel title
    panel = (width - left - right - gap * (columns - 1)) / columns
    tall = (height - top - bottom - vgap * (rows - 1)) / rows
    fig.subplots_adjust(
        left=left / width,
        right=1 - right / width,
        bottom=bottom / height,
        top=1 - top / height,
        wspace=gap / panel,
        hspace=vgap / tall,
    )


def legend_below(fig: Figure, axes: Axes, columns: int = 1) -> int:
    """A figure legend of `axes`' lines centred under the panels; returns its rows, for `place`."""
    handles, labels = axes.get_legend_handles_labels()
    return legend(fig, handles, labels, columns)


def legend(fig: Figure, handles: list, labels: list[str], columns: int) -> int:
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=columns, fontsize="small")
    return -(-len(labels) // columns)


def _combos(rows: pd.DataFrame, keys: list[str]) -> int:
    return len(rows.drop_duplicates(keys)) if keys else 1


def facet_keys(rows: pd.DataFrame, keys: list[str]) -> list[str]:
    """The fewest settings to split panels by so that no panel holds more than MAX_LINES lines (one per
    combination of `keys`): greedily the setting that leaves the fewest lines per panel, then the fewest panels.
    """
    facets: list[str] = []
    inner = list(keys)

    def most_lines(split: list[str]) -> int:
        return max(_combos(g, inner) for _, g in rows.groupby(split, dropna=False)) if split else _combos(rows, inner)

    while inner and most_lines(facets) > MAX_LINES:
        best = min(inner, key=lambda k: (most_lines([*facets, k]) > MAX_LINES, _combos(rows, [*facets, k]), k))
        facets.append(best)
        inner.remove(best)
    return facets


class Encoding:
    """How the lines of a panel are told apart: colour by the inner setting with the most values (one colour
    per value, the same in every panel), line style by the combination of the others (`split`). Where those
    do not fit (more than MAX_LINES colours or 4 styles), one colour per line of the panel, each labelled.
    """

    def __init__(self, rows: pd.DataFrame, keys: list[str]) -> None:
        self.keys = keys
        by_count = sorted(keys, key=lambda k: (-rows[k].nunique(dropna=False), k))
        self.colour = by_count[0] if by_count else ""
        self.rest = [k for k in keys if k != self.colour]
        self.colours = _distinct(rows, [self.colour]) if self.colour else []
        # the post's setting first: it gets the solid line
        self.styles = sorted(_distinct(rows, self.rest), key=lambda v: combination_label(self.rest, v) != POST)
        self.split = 0 < len(self.colours) <= MAX_LINES and len(self.styles) <= len(STYLES)

    def style(self, values: tuple, position: int) -> dict[str, Any]:
        """The line of `values` (of `keys`), the `position`-th of its panel."""
        if not self.split:
            return {"color": f"C{position}", "label": combination_label(self.keys, values) if self.keys else ""}
        named = dict(zip(self.keys, values, strict=True))
        colour = _position(self.colours, (named[self.colour],))
        return {"color": f"C{colour}", "linestyle": STYLES[_position(self.styles, tuple(named[k] for k in self.rest))]}

    def legend(self) -> tuple[list, list[str]]:
        """The figure legend's handles and labels where lines are `split`: colours, then line styles."""
        from matplotlib.lines import Line2D

        handles = [Line2D([], [], color=f"C{i}", marker="o") for i in range(len(self.colours))]
        labels = [f"{self.colour}={fmt_value(c[0])}" for c in self.colours]  # named even at the post's default
        if len(self.styles) > 1:
            handles += [Line2D([], [], color="black", linestyle=style) for style in STYLES[: len(self.styles)]]
            labels += [combination_label(self.rest, s) for s in self.styles]
        return handles, labels


def _position(options: list[tuple], values: tuple) -> int:
    """Where `values` is among `options`, an empty cell matching an empty cell."""
    return next(i for i, o in enumerate(options) if all(same(a, b) for a, b in zip(o, values, strict=True)))


def _distinct(rows: pd.DataFrame, keys: list[str]) -> list[tuple]:
    """The combinations of `keys` present, in sort order (as groupby gives them)."""
    if not keys:
        return [()]
    return [v if isinstance(v, tuple) else (v,) for v, _ in rows.groupby(keys, dropna=False, sort=True)]


def same(a: Any, b: Any) -> bool:
    return (pd.isna(a) and pd.isna(b)) or a == b


def _is_default(key: str, value: Any, defaults: dict[str, Any]) -> bool:
    if key not in defaults or defaults[key] is None:
        return False  # a set value of a default-None key (ghost_batch_size=8) is never the default
    return bool(matches(pd.Series([value]), defaults[key]).iloc[0])


def combination_label(keys: list[str], values: tuple) -> str:
    """What sets a line apart: its settings that are set (not empty) and not at the post's default (a colour
    legend names its one setting even there: "train.lr=0.001").
    """
    defaults = {**an.POST_DEFAULTS, **an.CONTROL_DEFAULTS}
    shown = [(k, v) for k, v in zip(keys, values, strict=True) if not pd.isna(v) and not _is_default(k, v, defaults)]
    return ", ".join(f"{k}={fmt_value(v)}" for k, v in shown) or POST
