"""Writing a report: `build(folders, out)` reads results folders (runs.csv, epochs.csv only) and writes the
tables, the figures (drawn in a forked child meanwhile), ``tables/claims.csv``, ``report.md`` and ``report.html``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sweep import analysis
from sweep.analysis import health as runs_health
from sweep.analysis import scaling
from sweep.analysis.outcome import NOT_TESTED, Outcome
from sweep.base import atomic
from sweep.claims import attribution, comparable, maps, reproduction
from sweep.claims.basis import tuned_lr
from sweep.claims.findings import Claim, Finding, claims_table
from sweep.claims.registry import STEPS_DIFFER, TUNED_FIRST, evaluate
from sweep.report.background import background
from sweep.report.document import to_html, to_markdown
from sweep.report.figures import curves as curve_figures
from sweep.report.figures import files, lag, post, seeds
from sweep.report.figures import maps as map_figures
from sweep.report.figures import steps as steps_figures
from sweep.report.figures.files import FigureFile
from sweep.report.sections import assemble, first_screen, until
from sweep.report.sections import steps as steps_sections


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
    for own in ("figures", "tables"):  # refused before anything is written
        atomic.refuse_link(target / own)
    target.mkdir(parents=True, exist_ok=True)
    health = runs_health.run_health(results)
    healthy = runs_health.without(results.epochs, health)  # runs at chance and stuck runs stay in
    summary = analysis.run_summary(healthy)
    continued = until.read(results.folders)
    inputs = Inputs.of(results, health, continued)
    claims_summary, tuned = inputs.table, inputs.tuned
    findings = inputs.evaluate()
    condition_maps = maps.maps(claims_summary)
    # Drawing (matplotlib) is most of a report's time: a child process draws, and reads the steps to
    # target the steps figures show, while this one checks the claims; neither needs the other's work.
    # The child starts as early as the figures' inputs allow.
    with background(lambda: _draw(results, findings, condition_maps, target, svg)) as drawing:
        analysis.write_tables(results, target)
        sensitivity = stuck_sensitivity(findings, results, health, continued)
        atomic.write_csv(claims_table(findings), target / "tables" / "claims.csv")
        atomic.write_csv(maps.table(condition_maps), target / "tables" / "maps.csv")
        tuned_epochs = runs_health.without(results.tuned, health)
        advice = tuple(c for c in TUNED_FIRST if c in STEPS_DIFFER)  # C6's time to target has no other point
        reads = comparable.comparable(summary, healthy) + comparable.comparable(
            tuned, tuned_epochs, advice, comparable.TUNED
        )
        atomic.write_csv(comparable.table(reads), target / "tables" / "readings.csv")
        attributed, candidates = attribution.attribution(healthy), reproduction.candidates(claims_summary)
        drawn = drawing.result()
    figures, curves, steps_drawn, maps_drawn, main_figure = drawn
    every = [*figures, *steps_drawn, *maps_drawn.values(), *([main_figure] if main_figure else [])]
    files.prune(target / "figures", {f.name for f in every})
    steps_sections.write_tables(curves, target)
    doc = assemble.document(
        results,
        findings,
        figures,
        attributed,
        health,
        sensitivity,
        reads,
        curves,
        steps_drawn,
        continued,
        assemble.Where(condition_maps, maps_drawn, candidates),
        main_figure,
    )
    md, page = target / "report.md", target / "report.html"
    atomic.write_text(md, to_markdown(doc, target))
    atomic.write_text(page, to_html(doc))
    said = {c.id: assemble.verdict(c, f, inputs.sequential.get(c.id)) for c, f in findings}
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
    figures = curve_figures.draw_all(results, target, svg=svg)
    to_decide = seeds.draw(findings, target, svg=svg)
    figures += [to_decide] if to_decide else []
    curves = scaling.read(results)
    steps_drawn = steps_figures.draw(curves, target, svg=svg)
    main = post.draw(results.epochs, findings, target, svg=svg)
    mapped = map_figures.draw(condition_maps, target, svg=svg)
    mechanism = lag.draw(condition_maps, target, svg=svg)
    return figures, curves, steps_drawn, {**mapped, **({lag.NAME: mechanism} if mechanism else {})}, main


@dataclass(frozen=True)
class Inputs:
    """What the claims are evaluated on: the claims' run summary, the tuned re-runs, and the folders and
    decisions of `run --until-decided`. Built once for the report and once more, without the stuck runs,
    for its sensitivity line, so both evaluate alike.
    """

    table: pd.DataFrame  # the run summary every claim reads (`health.claims_summary`)
    tuned: pd.DataFrame  # the tuned re-runs, for the batch-size advice (`basis.tuned_lr`)
    decided_in: dict[str, str]  # claim -> the folder that continued it with `run --until-decided`
    sequential: dict[str, pd.DataFrame]  # claim -> its rows of decisions.csv

    @classmethod
    def of(cls, results: analysis.Results, health: pd.DataFrame, continued: Sequence[until.Found]) -> Inputs:
        """The inputs from results, less the runs `health` leaves out of the claims."""
        tuned = tuned_lr(analysis.run_summary(runs_health.without(results.tuned, health)), results.runs)
        table = runs_health.claims_summary(results, health)  # a run timed in two folders: C6 names both
        return cls(table, tuned, until.folders_by_claim(continued), until.by_claim(continued))

    def evaluate(self) -> list[tuple[Claim, Finding | None]]:
        return evaluate(self.table, self.decided_in, self.sequential, self.tuned)


def stuck_sensitivity(
    findings: list[tuple[Claim, Finding | None]],
    results: analysis.Results,
    health: pd.DataFrame,
    continued: Sequence[until.Found],
) -> str:
    """Whether any verdict changes when the stuck runs (kept in every verdict) are left out; "" without any.
    The claims are evaluated as the report's are (`Inputs`), with only the stuck runs left out.
    """
    stuck = runs_health.of_kind(health, runs_health.Problem.STUCK)
    if stuck.empty:
        return ""
    others = Inputs.of(results, runs_health.leaving_out(health, runs_health.Problem.STUCK), continued).evaluate()
    changed = [
        f"{claim.id} would be {_word(alt)} instead of {_word(f)}"
        for (claim, f), (_, alt) in zip(findings, others, strict=True)
        if _state(f) != _state(alt)
    ]
    head = f"Sensitivity: without the {len(stuck)} stuck run(s), "
    return head + ("; ".join(changed) if changed else "no verdict changes") + "."


def _state(finding: Finding | None) -> tuple[bool, Outcome, Outcome | None] | None:
    """What a verdict is, compared as a value: untested (None), or whether it cannot answer, its direction's
    outcome and its size's ("supported" and "direction shown, size undecided" differ).
    """
    return None if finding is None else (finding.cannot_answer(), finding.outcome, finding.size_outcome)


def _word(finding: Finding | None) -> str:
    return finding.verdict if finding else NOT_TESTED
