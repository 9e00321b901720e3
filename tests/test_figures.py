"""Figures that say what they show: titles, captions, lines per panel, category order, intervals in bounds.

The combined report of the committed results is built once (a forked child draws its figures, so those
tests are `integration`); each figure it shows is then drawn again here, in this process, from the same
functions and data, so that its axes can be read: a PNG cannot be asked how many lines it holds.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest

from sweep import analysis as an
from sweep import report, vocab
from sweep.analysis import health as runs_health
from sweep.analysis import scaling
from sweep.claims import maps
from sweep.report.figures import curves as plots
from sweep.report.figures import files as figure_index
from sweep.report.figures import layout as plot_layout
from sweep.report.figures import maps as map_figure
from sweep.report.figures import seeds as seeds_figure
from sweep.report.figures import steps as scaling_plots

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

RESULTS = Path(__file__).resolve().parents[1] / "results"
FOLDERS = (
    "article",
    "batch_sizes",
    "causes",
    "gpus",
    "controls",
    "lr_search",
    "lr_search_momentum",
    "lr_search_sgd",
    "map_c1",
    "map_c2",
    "map_c3",
)
# Drawn by sweep/report/figures/post.py, which these tests do not draw again: its title and caption are checked here,
# its axes are not.
OTHER_FIGURES = {"the_post_picture", "map-C1-lag"}  # tested in test_answer_readings and test_headline
HIDDEN = ("None", "none", "", " ")  # line styles that draw no line (error-bar caps, markers alone)


@dataclasses.dataclass(frozen=True)
class Built:
    out: Path
    written: report.Written
    results: an.Results


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    out = tmp_path_factory.mktemp("figures")
    folders = [RESULTS / name for name in FOLDERS]
    return Built(out, report.build(folders, out), an.load(folders))


@pytest.fixture(scope="module")
def drawn(built: Built) -> dict[str, Figure]:
    """Every figure of the report, drawn again in this process, by name."""
    results = built.results
    figures = {}
    for source, epochs in results.folder_epochs.groupby(an.SOURCE, sort=False):
        for plan in plots.plans(epochs, str(source)):
            figures[f"{Path(str(source)).name}-{plan.name}"] = plan.make()
    shown = [r for r in scaling.read(results) if r.targets]
    for reading, name in zip(shown, scaling_plots.names([r.curve for r in shown]), strict=True):
        figures[name] = scaling_plots.steps_figure(reading)
    for found in maps.maps(runs_health.claims_summary(results)):
        figures[f"map-{found.claim.id}"] = map_figure.figure(found)
    figures[seeds_figure.NAME] = seeds_figure.figure(seeds_figure.rows(built.written.findings))
    return figures


def shown_in_report(built: Built) -> dict[str, dict[str, Any]]:
    """The figures report.md shows, with the title and caption the figure index recorded for each."""
    index = json.loads((built.out / "figures" / figure_index.INDEX).read_text(encoding="utf-8"))
    names = re.findall(r"figures/([^)\s]+)\.png", (built.out / "report.md").read_text(encoding="utf-8"))
    assert names and set(names) <= set(index)
    return {name: index[name] for name in dict.fromkeys(names)}


def panels(fig: Figure) -> list[Axes]:
    return [ax for ax in fig.get_axes() if ax.get_visible()]


def lines(ax: Axes) -> list:
    """The data lines of a panel: drawn as lines in data coordinates (not a reference line across the panel,
    not an error bar's caps or a marker alone).
    """
    return [
        line for line in ax.get_lines() if line.get_transform() is ax.transData and line.get_linestyle() not in HIDDEN
    ]


def error_segments(ax: Axes) -> list[np.ndarray]:
    """The end points of every error bar of a panel (errorbar's and bar's, vertical or horizontal)."""
    from matplotlib.container import ErrorbarContainer

    segments = []
    for container in ax.containers:  # a bar chart's error bars are an ErrorbarContainer of their own too
        for collection in container.lines[2] if isinstance(container, ErrorbarContainer) else ():
            segments += [np.asarray(s) for s in collection.get_segments()]
    return segments


def bands(ax: Axes) -> list[np.ndarray]:
    """The vertices of the filled interval bands of a panel (fill_between)."""
    from matplotlib.collections import PolyCollection

    return [p.vertices for c in ax.collections if isinstance(c, PolyCollection) for p in c.get_paths()]


@pytest.mark.integration
def test_no_two_figures_of_the_report_share_a_title(built: Built, drawn: dict[str, Figure]) -> None:
    shown = shown_in_report(built)
    titles = [entry["title"] for entry in shown.values()]
    repeated = {t for t in titles if titles.count(t) > 1}
    assert not repeated, repeated
    assert set(drawn) <= set(shown) and set(shown) - set(drawn) <= OTHER_FIGURES  # the tests below read the rest
    for name, figure in drawn.items():  # what the report names each figure is what the figure says
        assert shown[name]["title"] == " ".join(figure.get_suptitle().split()), name
    # the two steps-to-target figures of map_c1 at lr 0.01 (Adam, SGD with momentum) are two files, each named
    steps = [entry["title"] for name, entry in shown.items() if name.startswith("steps_to_target-map_c1_")]
    assert sum("optimizer=adam, lr=0.01," in t for t in steps) == 1
    assert sum("optimizer=momentum, lr=0.01," in t for t in steps) == 1
    # each per-folder figure names its results folder
    for name, entry in shown.items():
        folder = name.split("-", 1)[0]
        if folder in FOLDERS:
            assert f"results/{folder}:" in entry["title"], (name, entry["title"])


@pytest.mark.integration
def test_every_figure_has_a_caption(built: Built) -> None:
    for name, entry in shown_in_report(built).items():
        assert entry.get("caption", "").strip(), name


@pytest.mark.integration
def test_no_panel_holds_more_than_8_lines_and_legends_are_legible(drawn: dict[str, Figure]) -> None:
    for name, fig in drawn.items():
        for ax in panels(fig):
            found = lines(ax)
            assert len(found) <= plot_layout.MAX_LINES, (name, ax.get_title(), len(found))
            looks = [(str(line.get_color()), line.get_linestyle()) for line in found]
            assert len(set(looks)) == len(looks), (name, ax.get_title(), looks)  # no two alike
        legends = [*fig.legends, *(ax.get_legend() for ax in panels(fig) if ax.get_legend() is not None)]
        for legend in legends:
            assert min(t.get_fontsize() for t in legend.get_texts()) >= 8, name


@pytest.mark.integration
def test_the_toggles_charts_put_numbers_in_numeric_order(drawn: dict[str, Figure]) -> None:
    """The causes chart (C2 to C5) and the map_c2 chart: samples per class 25 before 50, imbalance 0 before 0.95."""
    charts = {name: fig for name, fig in drawn.items() if name.endswith("-toggles")}
    assert {"causes-toggles", "map_c2-toggles"} <= set(charts)
    numeric = 0
    for name, fig in charts.items():
        for ax in panels(fig):
            ticks = [t.get_text().split("\n")[0] for t in ax.get_xticklabels()]
            try:
                values = [float(t) for t in ticks]
            except ValueError:
                continue  # words: none, scale, standardize
            numeric += 1
            assert values == sorted(values), (name, ax.get_xlabel(), ticks)
    assert numeric >= 4  # imbalance, width and samples per class in causes, imbalance in map_c2


@pytest.mark.integration
def test_no_interval_crosses_what_its_quantity_can_be(drawn: dict[str, Figure]) -> None:
    """Epoch times and throughput never below 0; accuracies within [0, 1]; accuracy differences within [-1, 1]."""
    checked = {"seconds": 0, "accuracy": 0, "difference": 0}
    for name, fig in drawn.items():
        for ax in panels(fig):
            label = ax.get_ylabel() + ax.get_xlabel()
            if "seconds" in label or "per second" in label:
                kind, low, high = "seconds", 0.0, math.inf
            elif "train accuracy - val accuracy" in label or "accuracy difference" in label:
                kind, low, high = "difference", -1.0, 1.0
            elif "accuracy (fraction correct)" in label or "val_acc at the last epoch" in label:
                kind, low, high = "accuracy", 0.0, 1.0
            else:
                continue
            axis = 0 if "accuracy difference" in ax.get_xlabel() else 1  # the map's intervals lie along x
            values = [s[:, axis] for s in error_segments(ax)] + [b[:, 1] for b in bands(ax)]
            for v in values:
                assert low - 1e-9 <= v.min() and v.max() <= high + 1e-9, (name, label, v.min(), v.max())
            checked[kind] += len(values)
    assert all(checked.values()), checked


# --- on constructed numbers, without a report


@pytest.mark.unit
def test_clipped_keeps_an_interval_within_its_bounds() -> None:
    assert plot_layout.clipped(-0.4, 0.3, 1.0, plot_layout.NON_NEGATIVE) == pytest.approx((0.3, 0.7))
    assert plot_layout.clipped(0.9, 0.95, 1.02, plot_layout.ACCURACY) == pytest.approx((0.05, 0.05))
    assert plot_layout.clipped(math.nan, 0.5, math.nan, plot_layout.ACCURACY) == (0.0, 0.0)  # one seed: none


@pytest.mark.unit
def test_epoch_time_error_bars_stop_at_zero_seconds() -> None:
    """Three seeds, one far slower: the t interval of batch 8's epoch time reaches below 0 s; its bar does not."""
    times = [1.0, 1.2, 9.0]
    summary = pd.DataFrame(
        {
            an.BATCH_SIZE: [8, 8, 8, 64, 64, 64],
            vocab.SEED: [0, 1, 2] * 2,
            vocab.EPOCH_SECONDS: times + [0.5, 0.6, 0.55],
            vocab.SAMPLES_PER_SECOND: [100.0, 90.0, 5.0, 900.0, 800.0, 850.0],
        }
    )
    mean, sd = np.mean(times), np.std(times, ddof=1)
    assert mean - 4.303 * sd / math.sqrt(3) < 0  # t(0.975, 2) = 4.303: the interval crosses 0 s
    fig = plots.speed_vs_batch(summary, "constructed")
    time_axis = next(ax for ax in fig.get_axes() if "seconds" in ax.get_ylabel())
    lows = [s[:, 1].min() for s in error_segments(time_axis)]
    assert len(lows) == 2 and min(lows) == pytest.approx(0.0)


@pytest.mark.unit
@pytest.mark.parametrize("report", sorted(RESULTS.glob("*/report.md")), ids=lambda p: p.parent.name)
def test_every_committed_report_has_figures_with_distinct_titles_and_a_caption(report: Path) -> None:
    """What a reader of the committed reports sees: no two figures titled alike, none without a caption."""
    text = report.read_text(encoding="utf-8")
    titles = re.findall(r"^!\[([^\]]*)\]\(figures/", text, re.MULTILINE)
    captions = re.findall(r"^\*([^*]+)\* (.+)$", text, re.MULTILINE)
    assert titles and len(set(titles)) == len(titles), [t for t in titles if titles.count(t) > 1]
    assert [title for title, _ in captions] == titles and all(len(c) > 20 for _, c in captions)
