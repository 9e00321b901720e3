"""A batch-size study's recommendation in words: the few lines `sweep advise` prints and the study report's
first screen opens with. Every number is a field of `sweep.analysis.study` / `study_advice`, with its
interval, reading, optimizer, tuned lr and seeds; nothing is said that the interval does not support.
"""

from __future__ import annotations

import math

from sweep.analysis.estimates import ALPHA, Estimate, fmt_estimate
from sweep.analysis.scaling_fit import Fit
from sweep.analysis.study import Rung, Study
from sweep.analysis.study_advice import Advice, by_seconds, seconds_kind, seconds_to_target
from sweep.analysis.study_decision import CEILING, Basis, margin


def num(e: Estimate, style: str = ".0f") -> str:
    """ "412 [380, 444] (n=3)": steps (style ".0f") and seconds (".3g"), with the interval where there is one;
    a lower end below 0 is shown as 0, where a count or a duration ends.
    """
    if e.n == 0 or not math.isfinite(e.mean):
        return "n/a"
    if e.n == 1 or not math.isfinite(e.low):
        return f"{e.mean:{style}} ({e.n} seed{'s' if e.n > 1 else ''}, no interval)"
    return f"{e.mean:{style}} [{max(e.low, 0):{style}}, {e.high:{style}}] (n={e.n})"


def lr_words(study: Study, rung: Rung) -> str:
    """ "lr 0.00312 (adam, tuned over [0.0001, 0.03] by 6 trials at seed 100)"."""
    where = f"[{rung.lr_range[0]:.3g}, {rung.lr_range[1]:.3g}]" if rung.lr_range else "its range"
    seed = f" at seed {study.search_seed}" if study.search_seed is not None else ""
    return f"lr {rung.best_lr:.3g} ({study.optimizer}, tuned over {where} by {rung.trials} trials{seed})"


def runner_up_words(study: Study, rung: Rung) -> str:
    """ "; the runner-up lr 0.0035 scores 0.921 [...] at the same seeds, best minus it 0.006 [...]" (search.rerun)."""
    other = rung.runner_up
    if other is None:
        return ""
    return (
        f"; the runner-up lr {other.lr:.3g} scores {fmt_estimate(other.val)} at the same seeds, best minus it "
        f"{fmt_estimate(other.gap)}"
    )


def seeds_words(study: Study) -> str:
    return f"seeds {', '.join(map(str, study.seeds))}"


def stopping_words(study: Study) -> str:
    """How the runs stopped, and per batch size how many tuned runs a rule ended early."""
    rules = [r for r in study.stop_rules if r is not None]
    budget = f"{study.epochs} epochs" if study.epochs else "train.epochs"
    if not rules:
        how = f"Every run had a fixed budget of {budget}, no early stopping, the same at every batch size"
    else:
        how = "; ".join(
            f"stopping when {r.metric} had not improved by more than {r.min_delta:g} for {r.patience} epochs"
            for r in rules
        )
        how = f"Runs trained up to {budget}, {how}" + (", the same rule at every batch size" if len(rules) == 1 else "")
    counts = ", ".join(f"batch {r.batch_size} {r.stopped_early} of {r.runs}" for r in study.rungs)
    return f"{how}. Tuned runs stopped early: {counts}."


def rule_words(study: Study) -> str:
    """The decision rule and its margin, as the report states it before any number."""
    delta = margin(study.tolerance, study.val_images)
    return (
        f"The decision rule: the largest batch size non-inferior to the best (the highest mean) at margin "
        f"{delta.words()}, by a one-sided t-test over seeds at {ALPHA:g} (paired by seed); where these seeds cannot "
        "separate the candidates, the fastest of them to the target."
    )


def recommendation(advice: Advice) -> str:
    """The pick, the decision rule that made it, and its numbers (sweep/analysis/study_decision.py)."""
    study, chosen, best, decision = advice.study, advice.chosen, advice.best, advice.decision
    assert decision is not None
    train = f"Train with batch {chosen.batch_size} at {lr_words(study, chosen)}"
    rule = f"at margin {decision.margin.value:.3g} (one-sided t-tests over seeds at {ALPHA:g})"
    best_words = f"batch {best.batch_size}, {study.metric} {fmt_estimate(best.val)}"
    if decision.basis in (Basis.CEILING, Basis.AT_CHANCE):
        return _bounded_words(advice)
    if decision.basis is Basis.NON_INFERIORITY:
        if chosen is best:
            return (
                f"{train}: the best, {study.metric} {fmt_estimate(best.val)} ({seeds_words(study)}); no larger batch "
                f"size is shown non-inferior to it {rule}{_apart(advice)}."
            )
        test = decision.of(chosen.batch_size)
        return (
            f"{train}: the largest batch size non-inferior to the best ({best_words}) {rule}: {best.batch_size} "
            f"minus {chosen.batch_size} is {fmt_estimate(advice.gap)} ({seeds_words(study)}), "
            f"{test.test_words() if test else ''}{_apart(advice)}."
        )
    which = ", ".join(map(str, advice.unseparated))
    apart = f"these seeds cannot separate the best ({best_words}) from batch {which} {rule}"
    if decision.basis is Basis.TIME_TO_TARGET and chosen.target is not None:
        return (
            f"{train}: {apart}, so the pick is by time to target, the fastest to {study.metric} {study.target:g} "
            f"of the batch sizes not shown worse than the best: {num(seconds_to_target(study, chosen), '.3g')} s."
        )
    return f"{train}: {apart}, and no time to target decides between them: the largest shown non-inferior."


def _bounded_words(advice: Advice) -> str:
    """Every batch size at the ceiling or at chance: the study cannot separate them."""
    study, chosen, decision = advice.study, advice.chosen, advice.decision
    assert decision is not None
    if decision.basis is Basis.AT_CHANCE:
        return (
            f"No recommendation: every batch size reads {study.metric} within the margin of chance "
            f"({study.chance:.3g}): nothing was learned, so the study cannot separate batch sizes; train longer "
            "or widen the lr range."
        )
    said = (
        f"Every batch size reads {study.metric} at the ceiling (each interval at or above {CEILING:g}): the study "
        "cannot separate batch sizes on it; a harder task (fewer epochs or images) would"
    )
    if not by_seconds(study) or chosen.target is None:
        return f"{said}. No time to target decides between them."
    return (
        f"{said}. By time to target: batch {chosen.batch_size} at {lr_words(study, chosen)}, the fastest to "
        f"{study.metric} {study.target:g}: {num(seconds_to_target(study, chosen), '.3g')} s."
    )


def no_advice_words(study: Study) -> str:
    """Why there is no advice: no tuned run trained, or every one stayed at chance (then the study cannot tell)."""
    reasons = [why for r in study.rungs for why in r.failed]
    if reasons and all("chance" in why for why in reasons):
        return (
            f"No recommendation: every tuned run stayed at chance on {study.metric}, so the study cannot separate "
            "batch sizes; train longer (train.epochs) or widen the lr range."
        )
    return "No tuned run of any batch size trained: nothing to recommend."


def _apart(advice: Advice) -> str:
    """The batch sizes these seeds cannot place against the best (the warnings say by how much)."""
    if not advice.unseparated:
        return ""
    which = ", ".join(map(str, advice.unseparated))
    return f"; these seeds do not separate batch {advice.best.batch_size} from batch {which} (see the warnings)"


def fastest_words(advice: Advice) -> str:
    study, rung = advice.study, advice.fastest
    if rung is None or rung.target is None:
        return f"Fastest to target: not read ({_no_reading(study)})."
    return (
        f"Fastest to {study.metric} {study.target:g} on this machine: batch {rung.batch_size} at "
        f"{lr_words(study, rung)}, {num(seconds_to_target(study, rung), '.3g')} s and {num(rung.target.steps)} steps, "
        f"in {seconds_kind(study)}{_next(advice)}."
    )


def _next(advice: Advice) -> str:
    """The runner-up, and whether the two intervals overlap (then these seeds do not order them)."""
    ranked = by_seconds(advice.study)
    if len(ranked) < 2:
        return ""
    first, second = (seconds_to_target(advice.study, r) for r in ranked[:2])
    overlap = second.low <= first.high if math.isfinite(first.high) and math.isfinite(second.low) else True
    said = f"; next, batch {ranked[1].batch_size} in {num(second, '.3g')} s"
    return said + (", an interval that overlaps the fastest's: these seeds do not order them" if overlap else "")


def critical_words(study: Study) -> str:
    """B_crit with its bootstrap interval and lack-of-fit test, or plainly why it is not reported; B_simple by it."""
    fit = study.fit
    if fit is None:
        return f"Critical batch size: not fitted ({_no_reading(study)})."
    at = f"Critical batch size at {study.metric} {fit.target:g}"
    if math.isnan(fit.b_crit):
        return f"{at}: not fitted, {fit.problem}{_noise(study)}."
    if not fit.form_fits:
        return f"{at}: not reported. {misfit_words(fit)}{_noise(study)}."
    high = "no upper end" if math.isinf(fit.b_crit_high) else f"{fit.b_crit_high:.0f}"
    how = fit.bootstrap.words() if fit.bootstrap else "no bootstrap"
    note = f"; {fit.bootstrap.note()}" if fit.bootstrap and fit.bootstrap.note() else ""
    test = f"; {fit.lack_of_fit.words()}, the form not rejected" if fit.lack_of_fit else "; no lack-of-fit test"
    state = "" if fit.identified else f" (not identified: {fit.problem})"
    return (
        f"{at}: B_crit {fit.b_crit:.0f} [{fit.b_crit_low:.0f}, {high}] (95% interval, {how}{note}; S = S_min "
        f"(1 + B_crit / B) fitted to the mean log steps of batch sizes {', '.join(map(str, fit.batch_sizes))}, each "
        f"at its tuned lr{test}){state}{_noise(study)}."
    )


def misfit_words(fit: Fit) -> str:
    """Why the form does not fit, in words: the test, and the steps per batch size that break it."""
    assert fit.lack_of_fit is not None
    said = f"S = S_min (1 + B_crit / B) does not fit these steps ({fit.lack_of_fit.words()})"
    cuts = ", ".join(f"x{c:.2g}" for c in fit.shrinks())
    sizes = fit.batch_sizes
    doubling = all(b == 2 * a for a, b in zip(sizes[:-1], sizes[1:], strict=True))
    shape = " (the form has each cut smaller than the one before, from x2 toward x1)" if doubling else ""
    return (
        f"{said}: from one batch size to the next ({', '.join(map(str, sizes))}) the mean steps fell by {cuts}"
        f"{shape}, departing from the curve by more than the seeds vary; no single B_crit describes them, so none "
        "is reported"
    )


def _noise(study: Study) -> str:
    """B_simple's range over the batch sizes, and where it was read."""
    b_simple = [r.b_simple.mean for r in study.rungs if r.b_simple is not None and r.b_simple.n]
    if not b_simple:
        return ""
    return (
        f"; the gradient noise scale B_simple at {study.b_simple_at} ranges {min(b_simple):.0f}-{max(b_simple):.0f} "
        "over the batch sizes (McCandlish et al. 2018 take it as an estimate of B_crit)"
    )


def _no_reading(study: Study) -> str:
    """Why nothing was read at the target: no target (the rule says why), or no tuned curve to read."""
    if study.target is None:
        return study.target_rule
    return "no tuned runs at two or more batch sizes trained"


def devices_words(advice: Advice) -> str:
    p, fit = advice.devices, advice.study.fit
    if fit is not None and not fit.form_fits and fit.lack_of_fit is not None:
        return (
            f"{advice.study.devices} devices: no prediction, the steps do not follow S = S_min (1 + B_crit / B) "
            f"({fit.lack_of_fit.words()})."
        )
    if p is None:
        return f"{advice.study.devices} devices: no prediction, {advice.devices_problem}."
    seconds = f", about {p.seconds:.3g} s to target" if math.isfinite(p.seconds) else ""
    return (
        f"Prediction, not measured: {p.devices} devices at batch {p.batch_size} each (global batch "
        f"{p.devices * p.batch_size}) need {p.speedup:.1f}x fewer steps to the target [{p.speedup_low:.1f}x, "
        f"{p.speedup_high:.1f}x over B_crit's interval]{seconds} if a step takes as long as one at batch "
        f"{p.batch_size} here (no communication cost), at the lr tuned for batch {p.batch_size} (retune it)."
    )


RECIPE = "experiments/own_model/recompute_batchnorm.py"


def lags(advice: Advice) -> bool:
    """The chosen batch size's raw val_acc, what Keras's `fit` and `evaluate` report, reads below the study's
    recalibrated metric by more than the margin, and its interval says so: the user's own training would not see
    the study's number without recomputing BatchNorm's statistics.
    """
    study, lag = advice.study, advice.chosen.lag
    delta = margin(study.tolerance, study.val_images).value
    return study.metric.endswith("_recal") and lag.n > 1 and lag.low > 0 and lag.mean > delta


def action_words(advice: Advice) -> str:
    """What to do in the user's own training where raw and recalibrated accuracy differ ("" where they agree)."""
    if not lags(advice):
        return ""
    study, chosen = advice.study, advice.chosen
    return (
        f"In your own training, recompute BatchNorm's statistics before you evaluate: Keras's `evaluate` reads raw "
        f"val_acc, {fmt_estimate(chosen.raw)} at batch {chosen.batch_size} (the moving averages lag behind the "
        f"weights), not the {study.metric} {fmt_estimate(chosen.val)} this study read. `recompute_batchnorm(model, "
        f"x_train)` from {RECIPE} (a dozen lines of Keras) gives the study's number; training more steps, or a "
        "BatchNorm momentum below 0.99, narrows the difference without closing it."
    )


def advice_lines(advice: Advice) -> list[str]:
    """The recommendation in a few paragraphs, for the first screen: the pick, the action where one is needed, the
    time to target, B_crit and the device prediction.
    """
    lines = [recommendation(advice), action_words(advice), fastest_words(advice), critical_words(advice.study)]
    return [line for line in [*lines, devices_words(advice)] if line]


# --- the terminal: `sweep advise`, at most six lines of under 100 characters


def terminal_lines(advice: Advice) -> list[str]:
    """The pick, its rule, its numbers, the time to target, B_crit, and where the rest is: six short lines."""
    study, chosen, decision = advice.study, advice.chosen, advice.decision
    assert decision is not None
    if decision.basis is Basis.AT_CHANCE:
        first = f"No recommendation: every batch size reads {study.metric} at chance ({study.chance or 0:.3g})"
    else:
        first = f"Train with batch {chosen.batch_size} at lr {chosen.best_lr:.3g} ({study.optimizer})"
        first += f", tuned by {chosen.trials} trials"
    lines = [first, _rule_line(advice), _reading_line(advice), _time_line(advice) + "; " + _b_crit_line(study)]
    if lags(advice):
        raw = advice.chosen.raw.mean
        lines.append(f"Do: recompute BatchNorm before evaluate (recompute_batchnorm.py), or expect val_acc {raw:.3f}")
    warned = f"{len(advice.warnings)} warning(s); " if advice.warnings else ""
    lines.append(f"{warned}the reasons, intervals and seeds: study.md in the results folder")
    return lines


def _rule_line(advice: Advice) -> str:
    decision = advice.decision
    assert decision is not None
    best, delta = advice.best.batch_size, decision.margin.value
    apart = ", ".join(map(str, advice.unseparated))
    if decision.basis is Basis.NON_INFERIORITY:
        test = decision.of(advice.chosen.batch_size)
        if test is None:
            return f"Rule: the best; no larger batch non-inferior at margin {delta:.3g} (one-sided t, {ALPHA:g})"
        return f"Rule: largest batch non-inferior to batch {best} at margin {delta:.3g}, p = {test.p_within:.2g}"
    if decision.basis is Basis.CEILING:
        return f"Rule: every batch at the ceiling (>= {CEILING:g}), cannot separate them: fastest to target"
    if decision.basis is Basis.AT_CHANCE:
        return "Rule: nothing learned, so the study cannot separate batch sizes; train longer"
    if decision.basis is Basis.TIME_TO_TARGET:
        return f"Rule: seeds cannot separate batch {apart} from batch {best} (best): fastest to target"
    return f"Rule: seeds cannot separate batch {apart} from batch {best}; no time: largest non-inferior"


def _reading_line(advice: Advice) -> str:
    study, chosen, best = advice.study, advice.chosen, advice.best
    said = f"{study.metric} {fmt_estimate(chosen.val)}"
    if chosen is best:
        return f"{said}, the best"
    return f"{said}; batch {best.batch_size} minus it {_short(advice.gap)}"


def _short(e: Estimate) -> str:
    return f"{e.mean:.3f} [{e.low:.3f}, {e.high:.3f}]" if e.n > 1 else f"{e.mean:.3f}"


def _time_line(advice: Advice) -> str:
    study, rung = advice.study, advice.chosen
    if rung.target is None or study.target is None or rung.target.not_reached:
        return "Time to target: not read"
    seconds = seconds_to_target(study, rung)
    return f"To {study.metric} {study.target:g}: {_short(seconds)} s, {rung.target.steps.mean:.0f} steps"


def _b_crit_line(study: Study) -> str:
    """B_crit in a few words, after the time to target on one line (the fuller words are in study.md)."""
    fit = study.fit
    if fit is None or math.isnan(fit.b_crit):
        return "B_crit not fitted"
    if not fit.form_fits and fit.lack_of_fit is not None:
        return f"B_crit not reported: the form does not fit (p = {fit.lack_of_fit.p:.2g})"
    high = "inf" if math.isinf(fit.b_crit_high) else f"{fit.b_crit_high:.0f}"
    return f"B_crit {fit.b_crit:.0f} [{fit.b_crit_low:.0f}, {high}]" + ("" if fit.identified else " (not identified)")
