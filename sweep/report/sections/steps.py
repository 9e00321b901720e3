"""The report's "Steps to target" and "Gradient noise scale" sections, and their CSV tables.

Numbers come from `sweep.analysis.scaling` (steps to target, the fit) and `sweep.analysis.critical` (B_simple
and the prediction from it); this module only lays them out and writes
`tables/steps_to_target.csv` and `tables/scaling_fit.csv`. Each row's `metric` column names what its
curve was read on (val_acc_recal where every run recorded it, else val_acc); `target` is a level of
that metric, and `best_not_reached` the best value of it a seed that missed the target got to.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from sweep.analysis import critical, scaling, scaling_fit, timing
from sweep.analysis.estimates import Estimate
from sweep.base import atomic
from sweep.report.document import Doc
from sweep.report.figures.files import FigureFile
from sweep.report.figures.steps import fixed_settings

STEPS_CSV, FIT_CSV = "steps_to_target.csv", "scaling_fit.csv"


def _num(value: float, digits: int = 0) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else "-"


def fmt_steps(e: Estimate, digits: int = 0) -> str:
    if e.n == 0:
        return "-"
    if not math.isfinite(e.low):
        return f"{_num(e.mean, digits)} ({e.n} seed, no interval)"
    return f"{_num(e.mean, digits)} [{_num(e.low, digits)}, {_num(e.high, digits)}]"


def reached_text(row: scaling.TargetRow) -> str:
    text = f"{row.n_reached} of {row.n_runs}"
    if row.not_reached:
        text += f"; {row.not_reached} not reached within budget ({row.budget_steps} steps)"
    if row.at_first_record:
        text += f"; {row.at_first_record} by the first record (read from step 0 at chance)"
    return text


# --- tables on disk


ESTIMATED = ("steps", "epochs", "seconds_runs", "seconds_quiet")  # steps_to_target.csv's estimates, each with its CI
STEPS_COLUMNS = (
    *("results", "lr", "seeds", "settings", "metric", "batch_size", "target", "n_runs", "n_reached"),
    *("n_not_reached_within_budget", "budget_steps", "reached_at_first_record"),
    *(f"{name}_{part}" for name in ESTIMATED for part in ("mean", "ci_low", "ci_high")),
    "best_not_reached",
)
FIT_COLUMNS = (
    *("results", "lr", "seeds", "metric", "target", "batch_sizes_fitted", "batch_sizes_left_out", "points"),
    *("s_min", "s_min_ci_low", "s_min_ci_high", "b_crit", "b_crit_ci_low", "b_crit_ci_high"),
    *("interval", "resamples", "distinct_resamples", "paired_seeds"),
    *("lack_of_fit_f", "lack_of_fit_df_lack", "lack_of_fit_df_pure", "lack_of_fit_p", "not_identified"),
)


def steps_table(readings: list[scaling.CurveReading]) -> pd.DataFrame:
    """One row per curve, batch size and target."""
    rows = []
    for reading in readings:
        c = reading.curve
        for r in reading.rows:
            rows.append(
                {
                    "results": c.source,
                    "lr": c.lr,
                    "seeds": " ".join(map(str, c.seeds)),
                    "settings": c.context,
                    "metric": c.metric,
                    "batch_size": r.batch_size,
                    "target": r.target,
                    "n_runs": r.n_runs,
                    "n_reached": r.n_reached,
                    "n_not_reached_within_budget": r.not_reached,
                    "budget_steps": r.budget_steps,
                    "reached_at_first_record": r.at_first_record,
                    **_columns("steps", r.steps),
                    **_columns("epochs", r.epochs),
                    **_columns("seconds_runs", r.seconds),
                    **_columns("seconds_quiet", r.quiet_seconds),
                    "best_not_reached": " ".join(f"{v:.4f}" for v in r.best_val_missed),
                }
            )
    return pd.DataFrame(rows, columns=list(STEPS_COLUMNS))  # the header also where no curve was read


def _columns(name: str, e: Estimate) -> dict[str, float]:
    return {f"{name}_mean": e.mean, f"{name}_ci_low": e.low, f"{name}_ci_high": e.high}


def fit_table(readings: list[scaling.CurveReading]) -> pd.DataFrame:
    """One row per curve and target; the numbers are empty where the fit is not identified or its form does not fit
    (`not_identified` says why).
    """
    rows = []
    for reading in readings:
        c = reading.curve
        for f in reading.fits:
            shown, boot, test = f.identified, f.bootstrap, f.lack_of_fit
            rows.append(
                {
                    "results": c.source,
                    "lr": c.lr,
                    "seeds": " ".join(map(str, c.seeds)),
                    "metric": c.metric,
                    "target": f.target,
                    "batch_sizes_fitted": " ".join(map(str, f.batch_sizes)),
                    "batch_sizes_left_out": " ".join(map(str, f.left_out)),
                    "points": f.n_points,
                    "s_min": f.s_min if shown else math.nan,
                    "s_min_ci_low": f.s_min_low if shown else math.nan,
                    "s_min_ci_high": f.s_min_high if shown else math.nan,
                    "b_crit": f.b_crit if shown else math.nan,
                    "b_crit_ci_low": f.b_crit_low if shown else math.nan,
                    "b_crit_ci_high": f.b_crit_high if shown else math.nan,
                    "interval": f"95%, {boot.words()}" if boot else "",
                    "resamples": boot.resamples if boot else math.nan,
                    "distinct_resamples": boot.distinct if boot else math.nan,
                    "paired_seeds": boot.paired if boot else None,
                    "lack_of_fit_f": test.f if test else math.nan,
                    "lack_of_fit_df_lack": test.df_lack if test else math.nan,
                    "lack_of_fit_df_pure": test.df_pure if test else math.nan,
                    "lack_of_fit_p": test.p if test else math.nan,
                    "not_identified": f.problem,
                }
            )
    return pd.DataFrame(rows, columns=list(FIT_COLUMNS))  # the header also where nothing was fitted


def write_tables(readings: list[scaling.CurveReading], out: Path) -> None:
    folder = out / "tables"
    atomic.own_folder(folder)
    atomic.write_csv(steps_table(readings), folder / STEPS_CSV)
    atomic.write_csv(fit_table(readings), folder / FIT_CSV)


# --- sections


def steps_section(doc: Doc, readings: list[scaling.CurveReading], figures: list[FigureFile]) -> None:
    doc.h(2, "Steps to target")
    with_targets = [r for r in readings if r.targets]
    if not with_targets:
        doc.p("No group of runs covers two batch sizes that reach a common accuracy level: nothing to read here.")
        return
    doc.p(
        "Shallue et al. (2019) compare batch sizes by the optimizer steps each needs to reach a target. A group of "
        "runs is read on val_acc_recal (BatchNorm statistics recomputed for the weights) where every one of its runs "
        "recorded it, else on raw val_acc, which lags behind the weights at a large batch size (few steps move "
        "BatchNorm's moving statistics); each group's heading names its metric. Per run, the step where the metric "
        "first reaches the target is interpolated linearly between the record that reaches it and the one before "
        "(before the first record: step 0 at chance accuracy, 1 / classes). Targets: the levels "
        f"{', '.join(f'{t:g}' for t in scaling.TARGET_LADDER)} above chance that at least half of a group's batch "
        f"sizes reach with at least {scaling_fit.MIN_REACHED} seeds. A seed that never reaches a target is counted as "
        "not reached within its budget (its last record), never dropped or imputed; the mean is over the seeds "
        f"that reached it (lower than the truth when some did not), and fewer than {scaling_fit.MIN_REACHED} give no "
        "interval. Seconds (runs) are the runs' own wall time (epoch_seconds summed; epoch 1 includes graph "
        "tracing), as noisy as the machine was while they ran. Seconds (quiet), where a results folder has a "
        "timing.csv (`sweep time GRID`), are each run's steps to the target times the best of a "
        "benchmark-style timing of one training step at its batch size: comparable between batch sizes."
    )
    for reading in with_targets:
        _curve_block(doc, reading)
        quiet = timing.describe(Path(reading.curve.source))
        if quiet and any(r.quiet_seconds.n for r in reading.rows):
            doc.p(quiet)
        spread = scaling.seconds_spread(reading.curve)
        if spread is not None:
            b, lo, hi = spread
            doc.p(
                f"How noisy the seconds are: at batch {b} one epoch (epochs 2 on) took {lo:.1f} to {hi:.1f} s across "
                f"these runs, a factor of {hi / lo:.1f}, for the same work."
            )
    for fig in figures:
        doc.figure(fig)


def _heading(c: scaling.Curve) -> str:
    """A curve's heading: its folder and every setting it holds fixed, optimizer and lr first (two curves of
    one folder at one lr differ in their optimizer), as its figure's title says them.
    """
    return f"{c.source}: {fixed_settings(c)}; seeds {', '.join(map(str, c.seeds))}; read on {c.metric}"


def _curve_block(doc: Doc, reading: scaling.CurveReading) -> None:
    c = reading.curve
    doc.h(3, _heading(c))
    quiet = any(r.quiet_seconds.n for r in reading.rows)
    doc.table(
        ("batch", f"target {c.metric}", "seeds reached", "steps [95% CI]", "epochs", "seconds (runs)")
        + (("seconds (quiet)",) if quiet else ()),
        [
            (
                str(r.batch_size),
                f"{r.target:g}",
                reached_text(r),
                fmt_steps(r.steps),
                fmt_steps(r.epochs, 2),
                fmt_steps(r.seconds, 1),
            )
            + ((fmt_steps(r.quiet_seconds, 1),) if quiet else ())
            for r in reading.rows
        ],
    )
    doc.p(
        f"Fit of S = S_min (1 + B_crit / B) to the steps to each target {c.metric}: least squares in log steps over "
        "each batch size's mean log steps (weighted by its seeds), at the batch sizes where every seed reached the "
        f"target; 95% intervals from a percentile bootstrap over seeds ({scaling_fit.RESAMPLES} resamples, seeds "
        "paired across batch sizes where every batch size ran the same seeds, each resample refitted; n seeds allow "
        "only C(2n - 1, n) distinct resamples, 10 at 3 seeds, so with few seeds the ends are coarse). The lack-of-fit "
        "F test sets the batch means' departure from the curve against the seeds' spread about their means; at "
        "p < 0.05 the form does not fit and no B_crit is given."
    )
    doc.table(
        (
            "target",
            "batch sizes fitted",
            "left out (a seed did not reach)",
            "S_min [95% CI]",
            "B_crit [95% CI]",
            "lack of fit",
        ),
        [_fit_cells(f) for f in reading.fits],
    )


def _fit_cells(f: scaling_fit.Fit) -> tuple[str, ...]:
    fitted = ", ".join(map(str, f.batch_sizes)) or "none"
    left = ", ".join(map(str, f.left_out)) or "none"
    test = f.lack_of_fit
    lack = "no test" if test is None else f"F = {test.f:.3g} ({test.df_lack}, {test.df_pure} df), p = {test.p:.2g}"
    if not f.identified:
        return (f"{f.target:g}", fitted, left, "not identified", f"not identified: {f.problem}", lack)
    return (
        f"{f.target:g}",
        fitted,
        left,
        f"{f.s_min:.0f} [{f.s_min_low:.0f}, {f.s_min_high:.0f}]",
        f"{f.b_crit:.1f} [{f.b_crit_low:.1f}, {f.b_crit_high:.1f}]",
        lack,
    )


def noise_section(doc: Doc, readings: list[scaling.CurveReading]) -> None:
    measured = [(r, n) for r in readings if (n := critical.noise_reading(r.curve)) is not None]
    if not measured:
        return
    doc.h(2, "Gradient noise scale")
    doc.p(
        "B_simple = tr(Sigma) / |G|^2 (McCandlish et al. 2018), estimated at every record from gradient norms at the "
        "run's batch size and at 4 times it (their appendix A.1), the two terms averaged separately over 1,024 "
        "training images before the ratio. Mean [95% CI] over seeds at each epoch's end, with the group's metric "
        "there (how far training had got: val_acc_recal where recorded, as for the steps to target). McCandlish et "
        "al. predict S = S_min (1 + B_noise / B) steps to a target with B_noise close to B_simple; below it a larger "
        "batch needs proportionally fewer steps. Below, each batch size's steps are predicted from the nearest "
        "smaller batch size that reached the target with every seed (its 95% interval), with B_noise anywhere in the "
        "range of the per-seed B_simple at the runs' last records."
    )
    for reading, noise in measured:
        _noise_block(doc, reading, noise)


def _noise_block(doc: Doc, reading: scaling.CurveReading, noise: critical.NoiseReading) -> None:
    curve = noise.curve
    doc.h(3, _heading(curve))
    epochs = sorted({c.epoch for c in noise.cells})
    cells = {(c.batch_size, c.epoch): c for c in noise.cells}
    doc.table(
        ("batch", *(f"epoch {e}: B_simple / {curve.metric}" for e in epochs)),
        [
            (
                str(b),
                *(
                    f"{_est(cells[(b, e)].b_simple, 0)} / {cells[(b, e)].val.mean:.3f}" if (b, e) in cells else "-"
                    for e in epochs
                ),
            )
            for b in sorted({c.batch_size for c in noise.cells})
        ],
    )
    for sentence in critical.noise_sentences(noise):
        doc.p(sentence)
    if curve.lr != scaling.TUNED:
        doc.p(
            "McCandlish et al.'s prediction assumes a learning rate tuned for each batch size, so it is compared "
            "with the steps only at the tuned lr."
        )
        return
    preds = critical.predictions(reading.rows, noise.last_low, noise.last_high)
    if preds:
        doc.table(
            ("target", "batch", "from batch (its steps)", "predicted steps", "measured", "outcome"),
            [
                (
                    f"{p.target:g}",
                    str(p.batch_size),
                    f"{p.anchor} ({fmt_steps(p.anchor_steps)})",
                    f"{p.low:.0f}-{p.high:.0f}",
                    f"{fmt_steps(p.row.steps)}; {reached_text(p.row)}",
                    p.outcome,
                )
                for p in preds
            ],
        )
    doc.p("Conclusion: " + " ".join(critical.conclusion(noise, preds, reading.fits)))


def _est(e: Estimate, digits: int) -> str:
    return fmt_steps(e, digits)
