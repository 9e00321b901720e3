"""The report's sections, in reading order, written as blocks of a `Doc`.

Header (the results and their provenance), verdicts, runs with problems, how to read
the numbers, one section per claim, the attribution of C1's gap, batch sizes at
their own best learning rate, the gradient noise scale, figures and tables.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from sweep import vocab
from sweep.analysis import BACKEND_DEFAULT, Results, scaling, tuning, varying
from sweep.analysis.chance import ALPHA
from sweep.analysis.estimates import fmt_estimate
from sweep.analysis.health import IN_CLAIMS, Problem, left_out_by_setting, of_kind
from sweep.claims import attribution as attr
from sweep.claims import comparable, family
from sweep.claims import verdict as verdicts
from sweep.claims.findings import Claim, Finding, fmt_p, outcome_text
from sweep.claims.maps import MAPPED, ConditionMap
from sweep.claims.registry import CLAIMS, thresholds
from sweep.claims.verdict import Verdict, verdict_text
from sweep.report import provenance
from sweep.report.document import TITLE, Doc, Figure, Marked, Paragraph, Table
from sweep.report.figures.files import FigureFile
from sweep.report.sections import answer, first_screen, until
from sweep.report.sections import maps as map_sections
from sweep.report.sections import steps as steps_sections
from sweep.report.sections.readings import TUNING_EXPERIMENTS, attribution_section, comparable_section, tuning_section

TUNING_OTHERS = ("experiments/lr_search_momentum.yaml", "experiments/lr_search_sgd.yaml")  # other optimizers
SMOKE_EXPERIMENTS = "experiments/smoke.yaml"  # the quick check; no claim reads it
# The grid files that ship in experiments/, by what reads their runs. The header names a
# grid's file from this list, not from the disk: an installed package has no experiments/.
SHIPPED_GRIDS = frozenset(
    {*(c.experiments for c in CLAIMS), *(g for c in CLAIMS for g in c.needs.also)}
    | {m.experiments for m in MAPPED if m.experiments}
    | {attr.EXPERIMENTS, TUNING_EXPERIMENTS, *TUNING_OTHERS, SMOKE_EXPERIMENTS}
)


@dataclass(frozen=True)
class Where:
    """Where the claims hold: the condition maps, their figures, and the settings nearest the post's numbers."""

    maps: Sequence[ConditionMap] = ()
    figures: dict[str, FigureFile] = field(default_factory=dict)
    candidates: Sequence[map_sections.Candidate] = ()


def document(
    results: Results,
    findings: list[tuple[Claim, Finding | None]],
    figures: list[FigureFile],
    att: attr.Attribution | None = None,
    health: pd.DataFrame | None = None,
    sensitivity: str = "",
    reads: list[comparable.Read] | None = None,
    curves: list[scaling.CurveReading] | None = None,
    scaling_figures: list[FigureFile] | None = None,
    continued: Sequence[until.Found] = (),
    where: Where | None = None,
    main_figure: FigureFile | None = None,
) -> Doc:
    """The report's blocks: the first screen (verdicts in short, the post's picture, what they mean), the
    contents, then every section that supports them.
    """
    doc = Doc()
    where = where or Where()
    sequential = until.by_claim(continued)
    opening(doc, findings, sequential, where, main_figure, reads or [])
    doc.contents()
    doc.h(2, "Where these numbers come from")
    doc.p(
        "Does the blog post about Keras batch sizes hold? Each claim is checked on the runs of this sweep, with 95% "
        "Student-t intervals over seeds. Reproduce with `sweep report "
        + " ".join(str(f) for f in results.folders)
        + "`."
    )
    doc.table(("recorded", "value"), header(results))
    doc.h(2, "The answer in full")
    doc.bullets(answer.sentences(findings, where.maps, where.candidates))
    verdicts_section(doc, findings, where, sequential)
    health_section(doc, health if health is not None else pd.DataFrame(), results.runs, sensitivity)
    statistics_section(doc)
    doc.p(family.describe(findings))
    for claim, finding in findings:
        if finding is not None:
            claim_section(doc, claim, finding)
    until.section(doc, continued)
    map_sections.maps_section(doc, where.maps, where.figures)
    map_sections.reproduction_section(doc, where.candidates)
    fixed = [r for r in reads or [] if r.lr == comparable.FIXED]
    comparable_section(doc, fixed, [r for r in reads or [] if r.lr == comparable.TUNED])
    attribution_section(doc, att)
    tuning_section(doc, tuning.tuning(results))
    curves = scaling.read(results) if curves is None else curves
    steps_sections.steps_section(doc, curves, scaling_figures or [])
    steps_sections.noise_section(doc, curves)
    if figures:
        doc.h(2, "Figures")
        for fig in figures:
            doc.figure(fig)
    doc.h(2, "Tables")
    doc.p(
        "CSV files next to this report: `tables/curves.csv` (every metric at every epoch, mean and 95% CI per "
        "group of seeds), `tables/gaps.csv` (gap and eval_gap at epoch 2 and at the last epoch), "
        "`tables/run_summary.csv` (one row per run), `tables/claims.csv` (every check above), "
        "`tables/readings.csv` (the batch-size checks at every reading), "
        "`tables/steps_to_target.csv` and `tables/scaling_fit.csv` (the steps-to-target readings and fits)."
    )
    return doc


def opening(
    doc: Doc,
    findings: list[tuple[Claim, Finding | None]],
    sequential: dict[str, pd.DataFrame],
    where: Where,
    main_figure: FigureFile | None,
    reads: list[comparable.Read],
) -> None:
    """The title, each tested claim's verdict in short beside the post's picture, and what it means."""
    doc.h(1, TITLE)
    rows = first_screen.rows(findings, {c.id: verdict(c, f, sequential.get(c.id)) for c, f in findings})
    table = (
        Table(first_screen.HEAD, tuple(rows)) if rows else Paragraph("These results test none of the post's claims.")
    )
    if main_figure is not None:
        doc.row(table, Figure(main_figure))
    else:
        doc.blocks.append(table)
    untested = first_screen.untested(findings)
    if untested:
        doc.p(untested)
    doc.bullets(first_screen.bullets(findings, where.maps, reads))


def verdicts_section(
    doc: Doc, findings: list[tuple[Claim, Finding | None]], where: Where, sequential: dict[str, pd.DataFrame]
) -> None:
    """Every tested claim: the post's words, each check's estimate, the verdict with where it was mapped, and
    what it was read from in full.
    """
    doc.h(2, "Verdicts in full")
    mapped = {m.claim.id: m for m in where.maps}
    doc.table(
        ("claim", "the post", "estimate [95% CI] (n)", "verdict", "read from, and where"),
        [
            (
                c.id,
                c.quote,
                "; ".join(f"{k.label}: {fmt_estimate(k.estimate)}" for k in f.checks),
                Marked(
                    verdict_where(c, f, mapped.get(c.id), sequential.get(c.id)),
                    verdict(c, f, sequential.get(c.id)).lead,
                ),
                domain(f),
            )
            for c, f in findings
            if f is not None
        ],
    )
    untested = first_screen.untested(findings)
    if untested:
        doc.p(untested)


def verdict_where(
    claim: Claim, finding: Finding | None, found: ConditionMap | None, sequential: pd.DataFrame | None = None
) -> str:
    """The verdict at the settings it read (the sequential one after `run --until-decided`), then, where
    the claim was mapped, where it is supported and where not.
    """
    said = verdict(claim, finding, sequential)
    text = said.long
    if found is not None:
        text += f". Over {len(found.cells)} settings of {found.source}: {found.summary()}"
    return text


def domain(finding: Finding | None) -> str:
    """Where a verdict holds: the numbers it read, its optimizer and learning rate, and the other settings."""
    if finding is None:
        return ""
    named = [] if "optimizer=" in finding.tested_at else [f"optimizer {finding.optimizer}"]
    named += [] if "lr=" in finding.tested_at else [f"lr {finding.lr}"]  # several lrs: the tested_at omits them
    return "; ".join([finding.reading, *named, f"at {finding.tested_at}"])


def verdict(claim: Claim, finding: Finding | None, sequential: pd.DataFrame | None = None) -> Verdict:
    """The claim's verdict: the sequential one where `run --until-decided` decided its checks, else fixed-n."""
    return verdicts.of(claim, finding, sequential)


# --- header: the results, then where the report was made


def header(results: Results) -> list[tuple[str, str]]:
    runs = results.runs
    statuses = runs[vocab.STATUS].value_counts().to_dict() if vocab.STATUS in runs else {}
    names = sorted(runs["sweep"].dropna().unique().tolist()) if "sweep" in runs else []
    return [
        ("results folders", ", ".join(str(f) for f in results.folders)),
        ("grids (name:)", ", ".join(f"{n} ({grid_file(n)})" for n in names) or "none"),
        ("settings that vary", ", ".join(varying(results.epochs)) or "none"),
        ("runs", f"{len(runs)} ({', '.join(f'{v} {k}' for k, v in sorted(statuses.items()))})" if len(runs) else "0"),
        ("training wall time", _wall_time(runs)),
        ("training devices (runs.csv)", _devices(runs)),
        ("Keras backend (runs.csv)", _backends(runs)),
        *provenance.rows(),
    ]


def grid_file(name: str) -> str:
    """The shipped grid file a sweep's name comes from, if there is one."""
    path = f"experiments/{name}.yaml"
    return path if path in SHIPPED_GRIDS else "grid file not in experiments/"


def _wall_time(runs: pd.DataFrame) -> str:
    if "duration_seconds" not in runs or runs["duration_seconds"].dropna().empty:
        return "unknown"
    total = runs["duration_seconds"].sum()
    started = pd.to_datetime(runs["started"], errors="coerce", format="ISO8601").min()
    finished = pd.to_datetime(runs["finished"], errors="coerce", format="ISO8601").max()
    span = (finished - started).total_seconds() if pd.notna(started) and pd.notna(finished) else math.nan
    return f"{total / 60:.1f} min summed over runs; first start to last finish {span / 60:.1f} min"


def _devices(runs: pd.DataFrame) -> str:
    if "devices" not in runs:
        return "unknown"
    parts = []
    for (devices, virtual), group in runs.groupby(["devices", "virtual_devices"], dropna=False):
        kind = "logical CPU devices" if str(virtual) == "True" else "physical"
        parts.append(f"{devices} ({kind}; {len(group)} runs)")
    return "; ".join(parts) or "unknown"


def _backends(runs: pd.DataFrame) -> str:
    """Runs per Keras backend; results written before runs.csv recorded it ran on tensorflow."""
    if runs.empty:
        return "unknown"
    column = runs[vocab.BACKEND] if vocab.BACKEND in runs else pd.Series(BACKEND_DEFAULT, index=runs.index)
    counts = column.fillna(BACKEND_DEFAULT).value_counts().sort_index()
    return "; ".join(f"{name} ({count} runs)" for name, count in counts.items())


# --- the claims


def health_section(doc: Doc, health: pd.DataFrame, runs: pd.DataFrame, sensitivity: str = "") -> None:
    """Runs with a problem: those left out of the claims (nothing to read), counted per setting, and those that
    stay in every number (at chance, stuck), listed as notes.
    """
    if health.empty:
        return
    doc.h(2, "Runs with problems")
    left_out = int((~health[IN_CLAIMS].astype(bool)).sum())
    at_chance, stuck = (len(of_kind(health, kind)) for kind in (Problem.AT_CHANCE, Problem.STUCK))
    doc.p(
        f"{len(health)} run(s) have a problem. Left out of the claims, having nothing to read: {left_out} (a "
        "diverged or failed run has no finished epochs, and a validation set of one class cannot compare settings); "
        "a setting that lost seeds to them has fewer seeds and a wider interval. In every number, interval, check "
        f"and map cell: {at_chance} at chance (every accuracy at its last record at most twice chance, or chance "
        f"plus a quarter of the rest where that is less) and {stuck} stuck (a model that predicts one class). A run "
        "at chance is what its setting did, not a broken run: whether a comparison can answer is decided from its "
        "arms over seeds, a one-sided binomial test of each arm's accuracy (correct answers pooled over seeds) "
        f"against chance at {ALPHA:g}. Where the compared arm sits at chance and its control learned, the cause "
        "prevents learning, and the verdict says so; where the control did not learn, the comparison cannot answer."
    )
    counted = left_out_by_setting(health, runs)
    if counted:
        doc.p("Left out, per setting: " + "; ".join(f"{setting}: {n}" for setting, n in counted) + ".")
    if sensitivity:
        doc.p(sensitivity)
    doc.table(
        ("run", "status", "problem", "in the verdicts"),
        [
            (r[vocab.RUN_ID], r[vocab.STATUS], r["problem"], "yes" if r[IN_CLAIMS] else "no")
            for _, r in health.iterrows()
        ],
    )


def statistics_section(doc: Doc) -> None:
    doc.h(2, "How to read the numbers")
    doc.p(
        "A number in brackets is a 95% confidence interval over seeds: mean +- t(0.975, n-1) x sd / sqrt(n), "
        "with n the number of seeds (t = 4.30 for 3 seeds, so intervals are wide). It assumes the seed-to-seed "
        "values are roughly normal; with 3 seeds it cannot check that (a bootstrap over 3 seeds has only 10 distinct "
        "resamples and would give intervals that are too narrow). Comparisons between two settings pair runs "
        "with the same seed (same initial weights and data order), which removes the seed-to-seed spread they share."
    )
    doc.p(
        "Each check has a p-value from the same t-test as its interval (paired over seeds where it is a paired "
        "difference, one-sample otherwise): twice the smaller one-sided p-value of 'it holds' and 'it fails'; for a "
        "band (C9) 'it holds' is TOST, both one-sided tests. Uncorrected, p < 0.05 exactly when the 95% interval "
        "lies wholly inside (holds) or wholly outside (fails) the region. A check with a no-effect margin (C5) also "
        "fails when its interval lies wholly within the margin of its bound: an effect that small is none "
        "(equivalence). Error control is per claim (below): a claim whose checks must all hold is supported when "
        "each holds at 0.05 and contradicted when one of its k checks fails at 0.05 / k; C4, where one kind of "
        "mismatch is enough, the other way round. Otherwise it is undecided at the seeds it has, with the seeds "
        "80% power would need. A claim's direction decides it; where the post gives a size (C1's 80% against 6%) "
        "or a size is stated (C2-C5), 'direction shown, size not' says the sign is shown and the size is not; a "
        "mechanism (C1: BatchNorm's lag) is an equivalence test of its own."
    )
    doc.p(
        "Seeds to decide: for an undecided check, the smallest n with 80% power to decide it the way its mean "
        "points, taking the observed mean and sd as true, at the two-sided level of that side (0.05, or 0.05 / k "
        "where one of the claim's k checks is enough); a band needs both one-sided tests. The range beside it "
        "repeats this at the ends of the sd's 95% chi-square interval: 3 seeds say little about an sd, so the "
        "range is wide."
    )
    doc.p(
        "gap = train_acc - val_acc is what the post read: train_acc is Keras's running mean over the epoch in "
        "training mode. eval_gap = train_eval_acc - val_acc compares the same end-of-epoch model on training and "
        "validation images, both in inference mode. A large gap with a small eval_gap is a measurement effect "
        "(running mean, BatchNorm batch statistics vs moving statistics), not a failure to generalise."
    )
    doc.p(
        f"Thresholds (accuracies as fractions): {'; '.join(t.words() for t in thresholds())}. "
        "Where several groups of runs could answer a claim, the runs at the post's defaults (shuffled, balanced, "
        "same preprocessing, width 1, 1 device) are used, then the group with the most values of the compared "
        "setting, the most seeds, and the earliest results folder on the command line."
    )


def claim_section(doc: Doc, claim: Claim, finding: Finding | None) -> None:
    doc.h(2, first_screen.section_heading(claim))
    doc.p(f"Verdict: {verdict_text(claim, finding)}.")
    doc.p(f'The post: "{claim.quote}".')
    doc.p(f"Checked: {claim.test}.")
    if finding is None:
        doc.p(f"This sweep has no runs that compare what the claim needs; `{claim.experiments}` tests it.")
        return
    doc.p(f"Read from: {domain(finding)}. Runs used: {finding.selection}.")
    doc.table(
        ("check", "decides", "mean [95% CI] (n)", "holds when", "p (level)", "outcome"),
        [
            (c.label, role, fmt_estimate(c.estimate), c.region(), fmt_p(c), outcome_text(c))
            for role, checks in (
                ("the verdict", finding.checks),
                ("size", finding.size),
                ("mechanism", finding.mechanism),
            )
            for c in checks
        ],
    )
    if finding.evidence:
        doc.table(
            ("more evidence (does not decide)", "mean [95% CI] (n)"),
            [(e.label, fmt_estimate(e.estimate)) for e in finding.evidence],
        )
    for note in finding.notes:
        doc.p(note)
