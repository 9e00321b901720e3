"""The claims report: report.md / report.html, rendered from what `sweep.claims` found.

`build(folders, out)` reads results folders (runs.csv, epochs.csv only), writes
tables (`sweep.analysis`), figures (`sweep.report.plots`), ``tables/claims.csv``,
``report.md`` and a self-contained ``report.html``. No TensorFlow, and nothing
read from the repository: an installed package rebuilds a report from the CSVs alone.
What a claim is, how it is checked and decided lives in `sweep.claims`; this package only presents it.

One job per module, data flowing one way:

- `headline`: C1's headline over its condition map, in words;
- `steps`: steps to target and the gradient noise scale;
- `map_section`, `map_figure`: condition maps' section and figure;
- `summary`, `answer`, `first_screen`, `post_figure`: what the answer says (read once from the findings), in
  full and on the first screen, and the first screen's figure;
- `reading_sections`, `seeds_figure`: the batch-size claims re-read; seeds to decide at 80% power;
- `background`: one function run in a forked child while the report goes on;
- `provenance`: git commit, package versions, machine (`stamp` reads it too);
- `until_section`: the "Seeds until decided" section, from decisions.csv of a `run --until-decided`;
- `sections`: findings, attribution, tuning -> the blocks of a `document.Doc`;
- `document`: the blocks and their Markdown and HTML renderers;
- `plots`, `plot_layout`, `scaling_plots`, `figure_index`: the figures, their layout, and their index;
- `stamp`: whether `sweep report` may keep the report it wrote last time;
- `study_report`, `study_words`: a batch-size study's report (study.md, study.html) and its recommendation in
  words (`sweep study`, `sweep advise`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sweep import analysis
from sweep.analysis import health as runs_health
from sweep.analysis import scaling
from sweep.analysis.estimates import NOT_TESTED
from sweep.base import atomic
from sweep.claims import attribution, comparable, maps
from sweep.claims.basis import tuned_lr
from sweep.claims.findings import Claim, Finding, claims_table
from sweep.claims.registry import CLAIMS, TUNED_FIRST, evaluate
from sweep.claims.verdict import verdict_text
from sweep.report import (
    figure_index,
    first_screen,
    map_figure,
    map_section,
    plots,
    post_figure,
    scaling_plots,
    sections,
    seeds_figure,
    until_section,
)
from sweep.report import steps as scaling_report
from sweep.report.background import background
from sweep.report.document import to_html, to_markdown
from sweep.report.plots import FigureFile

__all__ = ["CLAIMS", "Claim", "Finding", "Written", "build", "claims_table", "evaluate", "verdict_text"]


@dataclass(frozen=True)
class Written:
    markdown: Path
    html: Path
    findings: list[tuple[Claim, Finding | None]]
    verdicts: list[tuple[str, str]]  # (claim id, its verdict as the report's table words it)
    summary: list[str]  # the verdicts in words, for the terminal (`first_screen.terminal`)


def build(folders: Sequence[str | Path], out: str | Path | None = None, svg: bool = False) -> Written:
    """Tables, figures (SVG too on request) and the report for results folders, into out (default: the only folder)."""
    results = analysis.load(folders)
    target = Path(out) if out is not None else Path(folders[0])
    target.mkdir(parents=True, exist_ok=True)
    health = runs_health.run_health(results)
    healthy = runs_health.without(results.epochs, health)  # stuck runs stay in: none is left out for its outcome
    summary = analysis.run_summary(healthy)
    claims_summary = runs_health.claims_summary(results, health)  # a run timed in two folders: C6 names both
    until = until_section.read(results.folders)
    decided_in = until_section.folders_by_claim(until)
    sequential = until_section.by_claim(until)
    tuned = tuned_lr(analysis.run_summary(runs_health.without(results.tuned, health)), results.runs)
    untrained = analysis.run_summary(runs_health.untrained(results.epochs, health))
    findings = evaluate(claims_summary, decided_in, sequential, tuned, untrained)
    condition_maps = maps.maps(claims_summary, untrained)
    # Drawing (matplotlib) is most of a report's time: a child process draws, and reads the steps to
    # target the steps figures show, while this one checks the claims; neither needs the other's work.
    # The child starts as early as the figures' inputs allow.
    with background(lambda: _draw(results, findings, condition_maps, target, svg)) as drawing:
        analysis.write_tables(results, target, runs_health.trained(results.epochs, health))
        sensitivity = stuck_sensitivity(findings, results, health, decided_in)
        atomic.write_csv(claims_table(findings), target / "tables" / "claims.csv")
        atomic.write_csv(maps.table(condition_maps), target / "tables" / "maps.csv")
        tuned_epochs = runs_health.without(results.tuned, health)
        reads = comparable.comparable(summary, healthy) + comparable.comparable(
            tuned, tuned_epochs, TUNED_FIRST, comparable.TUNED
        )
        atomic.write_csv(comparable.table(reads), target / "tables" / "readings.csv")
        attributed, candidates = attribution.attribution(healthy), map_section.candidates(claims_summary)
        drawn = drawing.result()
    figures, curves, steps_figures, map_figures, main_figure = drawn
    every = [*figures, *steps_figures, *map_figures.values(), *([main_figure] if main_figure else [])]
    figure_index.prune(target / "figures", {f.name for f in every})
    scaling_report.write_tables(curves, target)
    doc = sections.document(
        results,
        findings,
        figures,
        attributed,
        health,
        sensitivity,
        reads,
        curves,
        steps_figures,
        until,
        sections.Where(condition_maps, map_figures, candidates),
        main_figure,
    )
    md, page = target / "report.md", target / "report.html"
    atomic.write_text(md, to_markdown(doc, target))
    atomic.write_text(page, to_html(doc))
    said = {c.id: sections.verdict(c, f, sequential.get(c.id)) for c, f in findings}
    verdicts = [(claim_id, v.long) for claim_id, v in said.items()]
    return Written(md, page, findings, verdicts, first_screen.terminal(findings, said))


def _draw(
    results: analysis.Results,
    findings: list[tuple[Claim, Finding | None]],
    condition_maps: list[maps.ConditionMap],
    target: Path,
    svg: bool,
) -> tuple[list[FigureFile], list[scaling.CurveReading], list[FigureFile], dict[str, FigureFile], FigureFile | None]:
    """Every figure: the per-folder ones and seeds to decide; the steps to target (read here, returned
    for the tables) and their figures; the condition maps; the first screen's picture of the post.
    """
    figures = plots.draw_all(results, target, svg=svg)
    seeds = seeds_figure.draw(findings, target, svg=svg)
    figures += [seeds] if seeds else []
    curves = scaling.read(results)
    steps_figures = scaling_plots.draw(curves, target, svg=svg)
    main = post_figure.draw(results.epochs, findings, target, svg=svg)
    return figures, curves, steps_figures, map_figure.draw(condition_maps, target, svg=svg), main


def stuck_sensitivity(
    findings: list[tuple[Claim, Finding | None]],
    results: analysis.Results,
    health: pd.DataFrame,
    decided_in: dict[str, str] | None = None,
) -> str:
    """Whether any verdict changes when the stuck runs (kept in every verdict) are left out; "" without any."""
    stuck = health[health[runs_health.IN_CLAIMS].astype(bool)] if len(health) else health
    if stuck.empty:
        return ""
    others = evaluate(
        analysis.run_summary(runs_health.without(results.epochs, health, everything=True)),
        decided_in,
        until_section.by_claim(until_section.read(results.folders)),
    )
    changed = [
        f"{claim.id} would be {_word(alt)} instead of {_word(f)}"
        for (claim, f), (_, alt) in zip(findings, others, strict=True)
        if _word(f) != _word(alt)
    ]
    head = f"Sensitivity: without the {len(stuck)} stuck run(s), "
    return head + ("; ".join(changed) if changed else "no verdict changes") + "."


def _word(finding: Finding | None) -> str:
    return finding.verdict if finding else NOT_TESTED
