"""The study report: study.md and a self-contained study.html in a results folder that holds a batch-size
study (`sweep study`), with tables/study.csv and figures/study_steps.png.

Its first screen answers the user's question: the recommendation and its reasons (`study_words`), then
one row per batch size (its result at its tuned lr, steps and seconds to the target, perfect scaling,
B_simple), the steps-to-target figure, and the warnings. The details follow, folded: the target's rule,
each learning-rate search, and how the numbers were measured. Reads the CSVs only (no TensorFlow).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sweep.analysis import study as reading
from sweep.analysis.estimates import Estimate, fmt_estimate
from sweep.analysis.scaling import perfect_scaling
from sweep.analysis.study import Rung, Study
from sweep.analysis.study_advice import Advice, advise, seconds_kind, seconds_to_target
from sweep.base import atomic
from sweep.report import provenance
from sweep.report.document import TITLE, Doc, to_html, to_markdown
from sweep.report.figures.files import FigureFile
from sweep.report.study_words import (
    advice_lines,
    lr_words,
    no_advice_words,
    num,
    rule_words,
    runner_up_words,
    seeds_words,
    stopping_words,
    terminal_lines,
)

STUDY_MD = "study.md"
STUDY_HTML = "study.html"
STUDY_CSV = "tables/study.csv"
FIGURE = "study_steps"


@dataclass(frozen=True)
class Written:
    markdown: Path
    html: Path
    lines: list[str]  # the recommendation, for the terminal (at most six lines under 100 characters)


def build(
    folder: Path, tolerance: float = reading.DEFAULT_TOLERANCE, devices: int = reading.DEFAULT_DEVICES
) -> Written:
    """Read the study in `folder` (NoStudy when there is none) and write its report there."""
    study = reading.read(folder, tolerance, devices)
    advice = advise(study)
    lines = advice_lines(advice) if advice else [no_advice_words(study)]
    doc = Doc()
    title = f"Your batch size, answered: the batch-size study in {folder}"
    doc.h(1, title)
    doc.p(_provenance(folder))
    doc.p(_about(study))
    doc.h(2, "Recommendation")
    doc.bullets(lines)
    head, rows = table(study)
    doc.table(head, rows)
    doc.p(_target_words(study))
    doc.p(stopping_words(study))
    figure = _figure(study, folder)
    if figure is not None:
        doc.figure(figure)
    doc.h(2, "Warnings")
    doc.bullets(list(advice.warnings) if advice and advice.warnings else ["None: no reading here is known to mislead."])
    doc.contents()
    _details(doc, study, advice)
    atomic.write_csv(csv_table(study, advice), folder / STUDY_CSV)
    markdown, html = folder / STUDY_MD, folder / STUDY_HTML
    atomic.write_text(markdown, to_markdown(doc, folder))
    atomic.write_text(html, to_html(doc).replace(f"<title>{TITLE}</title>", f"<title>{title}</title>", 1))
    return Written(markdown, html, terminal_lines(advice) if advice else lines)


def _provenance(folder: Path) -> str:
    return f"Results folder {folder}; " + "; ".join(f"{name}: {value}" for name, value in provenance.rows()) + "."


def _about(study: Study) -> str:
    return (
        f"Each batch size at its own learning rate, chosen by a search on a held-out seed "
        f"({'seed ' + str(study.search_seed) if study.search_seed is not None else 'the search seed'}) and re-run "
        f"at {seeds_words(study)}; read on {study.metric} (BatchNorm statistics recomputed for the weights where "
        f"recorded) at each run's last record, optimizer {study.optimizer}. Intervals are 95% Student-t over "
        f"seeds. {rule_words(study)} docs/study.md explains the procedure."
    )


def table(study: Study) -> tuple[list[str], list[list[str]]]:
    target = f"{study.metric} {study.target:g}" if study.target is not None else "the target"
    head = [
        "batch size",
        "tuned lr",
        f"{study.metric} at the last record",
        "raw val_acc",
        "at the grid file's lr",
        f"steps to {target}",
        "perfect scaling (steps)",
        f"seconds to {target}",
        "B_simple at the target" if study.b_simple_at != reading.LAST_RECORD else "B_simple at the last record",
        "stopped early",
    ]
    perfect = perfect_scaling(
        [r.target for r in study.rungs if r.target is not None], [r.batch_size for r in study.rungs]
    )
    rows = [
        [
            str(r.batch_size),
            f"{r.best_lr:.3g}" + (" (edge)" if r.edge else ""),
            fmt_estimate(r.val),
            fmt_estimate(r.raw),
            f"{fmt_estimate(r.untuned)} at lr {r.untuned_lr:g}" if r.untuned_lr is not None else "",
            _steps(r),
            f"{perfect[r.batch_size]:.0f}" if r.batch_size in perfect else "",
            num(seconds_to_target(study, r), ".3g") if r.target is not None and not r.target.not_reached else "",
            num(r.b_simple) if r.b_simple is not None else "",
            f"{r.stopped_early} of {r.runs}",
        ]
        for r in study.rungs
    ]
    return head, rows


def csv_table(study: Study, advice: Advice | None) -> pd.DataFrame:
    """tables/study.csv: one row per batch size, every number its own column (an estimate as its mean, low, high
    and n), no formatted strings; the target, the decision's verdict and p-value, and the pick.
    """
    perfect = perfect_scaling(
        [r.target for r in study.rungs if r.target is not None], [r.batch_size for r in study.rungs]
    )
    decision = advice.decision if advice else None
    fit = _fit_columns(study)
    rows = []
    for r in study.rungs:
        reached = r.target is not None and not r.target.not_reached
        test = decision.of(r.batch_size) if decision else None
        rows.append(
            {
                "batch_size": r.batch_size,
                "tuned_lr": r.best_lr,
                "lr_at_edge": bool(r.edge),
                **_columns(study.metric, r.val),
                **_columns("raw_val_acc", r.raw),
                "untuned_lr": r.untuned_lr,
                **_columns("untuned", r.untuned),
                "target_metric": study.metric,
                "target": study.target,
                "target_rule": study.target_rule,
                **_columns("steps_to_target", r.target.steps if r.target else None),
                "runs_not_reaching_target": r.target.not_reached if r.target else None,
                "perfect_scaling_steps": perfect.get(r.batch_size),
                **_columns("seconds_to_target", seconds_to_target(study, r) if reached else None),
                **_columns("b_simple", r.b_simple),
                "b_simple_read_at": study.b_simple_at,
                **fit,
                "runner_up_lr": r.runner_up.lr if r.runner_up else None,
                **_columns("runner_up", r.runner_up.val if r.runner_up else None),
                **_columns("best_minus_runner_up", r.runner_up.gap if r.runner_up else None),
                "tuned_runs": r.runs,
                "stopped_early": r.stopped_early,
                "verdict": "best" if decision and r is decision.best else (test.verdict.name.lower() if test else ""),
                "p_non_inferior": test.p_within if test else None,
                "recommended": advice is not None and r is advice.chosen,
            }
        )
    return pd.DataFrame(rows)


def _fit_columns(study: Study) -> dict[str, object]:
    """The fit's numbers, the same on every row: empty where B_crit is not to be relied on (`Fit.problem` says why:
    an interval without an end, or a form that does not fit), as tables/scaling_fit.csv leaves them.
    """
    fit = study.fit
    shown = fit if fit is not None and fit.identified else None
    return {
        **_attributes(shown, FIT_COLUMNS),
        "b_crit_problem": fit.problem if fit is not None else "not fitted",
        **_attributes(fit.bootstrap if fit is not None else None, BOOTSTRAP_COLUMNS),
        **_attributes(fit.lack_of_fit if fit is not None else None, LACK_OF_FIT_COLUMNS),
    }


# tables/study.csv's fit columns: column -> the attribute it holds
FIT_COLUMNS = {
    "b_crit_estimate": "b_crit",
    "b_crit_low": "b_crit_low",
    "b_crit_high": "b_crit_high",
    "s_min_estimate": "s_min",
    "s_min_low": "s_min_low",
    "s_min_high": "s_min_high",
}
BOOTSTRAP_COLUMNS = {
    "bootstrap_resamples": "resamples",
    "bootstrap_distinct_resamples": "distinct",
    "bootstrap_paired": "paired",
}
LACK_OF_FIT_COLUMNS = {
    "lack_of_fit_f": "f",
    "lack_of_fit_df_lack": "df_lack",
    "lack_of_fit_df_pure": "df_pure",
    "lack_of_fit_p": "p",
}


def _attributes(source: object | None, columns: dict[str, str]) -> dict[str, object]:
    """Each column's attribute of `source`; empty (None) where there is no source."""
    return {column: getattr(source, name) if source is not None else None for column, name in columns.items()}


def _columns(name: str, e: Estimate | None) -> dict[str, float | int | None]:
    if e is None or e.n == 0:
        return {f"{name}_estimate": None, f"{name}_low": None, f"{name}_high": None, f"{name}_n": 0}
    return {f"{name}_estimate": e.mean, f"{name}_low": e.low, f"{name}_high": e.high, f"{name}_n": e.n}


def _steps(rung: Rung) -> str:
    row = rung.target
    if row is None:
        return "n/a"
    if row.not_reached:
        return f"{row.not_reached} of {row.n_runs} runs not reached within {row.budget_steps} steps"
    return num(row.steps)


def _figure(study: Study, folder: Path) -> FigureFile | None:
    if study.reading is None:
        return None
    from sweep.report.figures import steps as steps_figures

    fig = steps_figures.steps_figure(study.reading)
    png = folder / "figures" / f"{FIGURE}.png"
    with atomic.replacing(png, ".png") as tmp:
        fig.savefig(tmp, dpi=100, metadata={"Software": None})
    title = " ".join(fig.get_suptitle().split()) or FIGURE
    caption = (
        "Solid: measured steps to the target (95% interval over seeds); dashed: perfect scaling from the smallest "
        "batch size that reached it (steps x batch constant); dotted: the fit S = S_min (1 + B_crit / B), drawn only "
        "where its interval has both ends and the lack-of-fit test does not reject it; "
        "triangles: runs that did not reach it, at their last record."
    )
    return FigureFile(FIGURE, png, None, title, caption)


def _target_words(study: Study) -> str:
    """The target and the rule that chose it, under the table it is read in."""
    if study.target is None:
        return f"No target for steps to target: {study.target_rule}."
    return (
        f"The target, {study.metric} {study.target:g}, was fixed from the learning-rate searches' held-out runs "
        f"before the tuned runs were read: {study.target_rule}. The tuned runs compared at it did not choose it."
    )


def _details(doc: Doc, study: Study, advice: Advice | None) -> None:
    doc.h(2, "The learning-rate searches")
    doc.bullets(
        [
            f"Batch {r.batch_size}: {lr_words(study, r)}"
            + (f"; {r.edge}" if r.edge else "")
            + runner_up_words(study, r)
            for r in study.rungs
        ]
    )
    doc.h(2, "How it was measured")
    doc.p(f"Seconds to target are {seconds_kind(study)}. {study.timing_note}".strip())
    doc.p(_fit_method(study))
    if advice is not None and advice.devices is not None and (study.fit is None or study.fit.form_fits):
        p = advice.devices
        doc.p(
            f"The {p.devices}-device prediction: S(G B) = S_min (1 + B_crit / (G B)) from the fit, a step at global "
            f"batch {p.devices * p.batch_size} assumed as long as one measured at batch {p.batch_size}; the speed-up "
            "S(B) / S(G B) is 1 at B_crit = 0 and G at B_crit = infinity, so its interval is B_crit's mapped "
            "through it."
        )
    doc.p(
        "References: Efron and Tibshirani 1993, 'An introduction to the bootstrap' (the percentile interval); Draper "
        "and Smith 1998, 'Applied regression analysis' (the lack-of-fit F test); Shallue et al. 2019, 'Measuring the "
        "effects of data parallelism on neural network training' "
        "(steps to target per batch size, each at its own tuned lr); McCandlish et al. 2018, 'An empirical model of "
        "large-batch training' (S = S_min (1 + B_crit / B), the noise scale); Google's Deep Learning Tuning Playbook "
        "(retune the lr when the batch size changes). docs/study.md says what this study assumes."
    )


def _fit_method(study: Study) -> str:
    """How B_crit was fitted, its interval drawn and its form tested; and where B_simple was read."""
    fit = study.fit
    boot = fit.bootstrap if fit is not None else None
    draws = ""
    if boot is not None:
        how = "seeds paired across batch sizes" if boot.paired else "seeds drawn within each batch size"
        note = f"; {boot.note()}" if boot.note() else ""
        draws = f" ({boot.resamples} resamples, {how}, a fixed RNG seed{note})"
    return (
        "The critical batch size: S = S_min (1 + B_crit / B) fitted by least squares in log steps to each batch size's "
        "mean log steps over its seeds (weighted by its seeds), over the batch sizes whose every run reached the "
        f"target; its 95% interval a percentile bootstrap over seeds{draws}, each resample refitted. The lack-of-fit F "
        "test sets the batch means' departure from the curve against the seeds' spread about their batch mean (pure "
        "error); at p < 0.05 the form does not fit and B_crit is not reported. B_simple is read at "
        f"{study.b_simple_at}."
    )
