"""What a batch-size study recommends, and why; the warnings that say where its reading would mislead.

Every number a sentence quotes is a field of `sweep.analysis.study.Study` or of the `Advice` here, with its
interval, reading, optimizer, tuned lr and seeds (docs/study.md). No TensorFlow, numpy and scipy only.

- *The pick*: by the decision rule on intervals of `sweep.analysis.study_decision` (the largest batch size
  non-inferior to the best at the stated margin by a one-sided t-test over seeds; where the seeds cannot
  separate the candidates, the fastest of them to the target).
- *Fastest to target*: the batch size whose every run reached the target in the fewest seconds, quiet
  seconds per step (`sweep time`) x steps where measured, else the runs' own wall time; on this machine.
- *G devices at the same per-device batch*: a prediction, not a measurement. Steps at the global batch
  G x B from the fitted S = S_min (1 + B_crit / B); a step assumed to take as long as one measured step at
  B (no communication cost); the speed-up S(B) / S(G B) over B_crit's interval.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from sweep.analysis import study_decision
from sweep.analysis.estimates import ALPHA, Estimate, estimate, fmt_estimate
from sweep.analysis.power import seeds_for_power
from sweep.analysis.study import Rung, Study
from sweep.analysis.study_decision import Basis, Decision
from sweep.vocab import RECAL


@dataclass(frozen=True)
class DevicePrediction:
    """The predicted effect of G devices at per-device batch B: steps and seconds to the target."""

    devices: int
    batch_size: int  # per device
    speedup: float  # S(B) / S(G B) at the fitted B_crit
    speedup_low: float  # over B_crit's 95% interval
    speedup_high: float
    seconds: float  # predicted seconds to target at the fitted B_crit (NaN without a step time)


@dataclass(frozen=True)
class Advice:
    """The recommendation and its reasons."""

    study: Study
    best: Rung
    chosen: Rung  # by the decision rule (`decision.basis` says which part of it)
    gap: Estimate  # best - chosen, paired by seed
    fastest: Rung | None
    devices: DevicePrediction | None
    devices_problem: str  # why there is no prediction ("" when there is)
    warnings: tuple[str, ...]
    unseparated: tuple[int, ...] = ()  # batch sizes the seeds cannot place against the best
    decision: Decision | None = None

    def shown(self) -> bool:
        """The pick is the largest batch size shown non-inferior (the tests decided, not time to target)."""
        return self.decision is not None and self.decision.basis is Basis.NON_INFERIORITY


def trained(study: Study) -> list[Rung]:
    return [r for r in study.rungs if r.val.n > 0]


def paired_gap(better: Rung, other: Rung) -> Estimate:
    """better - other over the seeds both have (the seed pairs the data order and the initial weights' draw)."""
    a, b = better.seeds(), other.seeds()
    return estimate([a[s] - b[s] for s in sorted(a.keys() & b.keys())])


def advise(study: Study) -> Advice | None:
    """None when no batch size has a run that trained."""
    rungs = trained(study)
    if not rungs:
        return None
    delta = study_decision.margin(study.tolerance, study.val_images)
    decision = study_decision.decide(rungs, delta, lambda some: _fastest_of(study, some), study.chance)
    best, chosen = decision.best, decision.chosen
    devices, problem = predict_devices(study, chosen)
    return Advice(
        study=study,
        best=best,
        chosen=chosen,
        gap=paired_gap(best, chosen),
        fastest=fastest(study),
        devices=devices,
        devices_problem=problem,
        warnings=tuple(warnings(study, decision)),
        unseparated=decision.with_verdict(study_decision.Verdict.UNSEPARATED),
        decision=decision,
    )


def _fastest_of(study: Study, some: list[Rung]) -> Rung | None:
    ranked = [r for r in by_seconds(study) if r in some]
    return ranked[0] if ranked else None


def fastest(study: Study) -> Rung | None:
    """The batch size whose every run reached the target in the fewest seconds (by its mean)."""
    ranked = by_seconds(study)
    return ranked[0] if ranked else None


def by_seconds(study: Study) -> list[Rung]:
    """The batch sizes whose every run reached the target, fastest first (by their mean seconds)."""
    done = [r for r in trained(study) if r.target is not None and not r.target.not_reached]
    timed = [r for r in done if math.isfinite(seconds_to_target(study, r).mean)]
    return sorted(timed, key=lambda r: seconds_to_target(study, r).mean)


def seconds_to_target(study: Study, rung: Rung) -> Estimate:
    """Quiet seconds where every batch size has them, else the runs' own wall time (one kind for all)."""
    if rung.target is None:
        return estimate([])
    return rung.target.quiet_seconds if study.quiet() else rung.target.seconds


def seconds_kind(study: Study) -> str:
    if study.quiet():
        return "quiet training seconds (steps x the best quiet seconds per step of `sweep time`)"
    return "the runs' own wall time (training and the evaluations at records; no quiet timing)"


def predict_devices(study: Study, rung: Rung) -> tuple[DevicePrediction | None, str]:
    fit = study.fit
    if fit is None or math.isnan(fit.b_crit) or not fit.form_fits:
        return None, f"no fit of the critical batch size ({fit.problem if fit else study.target_rule})"
    g, b = study.devices, rung.batch_size
    if study.train_images is not None and g * b > study.train_images:
        return None, (
            f"the global batch {g * b} ({g} x {b}) is larger than the {study.train_images} training images: each "
            "step would be the whole set"
        )

    def speedup(b_crit: float) -> float:
        if math.isinf(b_crit):
            return float(g)  # perfect scaling
        return (1 + b_crit / b) / (1 + b_crit / (g * b))

    steps = fit.predict(g * b)
    return DevicePrediction(
        devices=g,
        batch_size=b,
        speedup=speedup(fit.b_crit),
        speedup_low=speedup(fit.b_crit_low),
        speedup_high=speedup(fit.b_crit_high),
        seconds=steps * rung.step_seconds,
    ), ""


# --- warnings


def warnings(study: Study, decision: Decision) -> list[str]:
    found = [w for r in study.rungs for w in _rung_warnings(study, r)]
    found += _separation(study, decision)
    found += _beyond_perfect(study)
    found += _stopping(study)
    delta = study_decision.margin(study.tolerance, study.val_images)
    if delta.widened:
        found.append(
            f"The tolerance {delta.asked:g} is finer than one validation image of {delta.images} "
            f"({delta.value:.3g}), which no run can measure: the margin is widened to {delta.value:.3g}."
        )
    if study.fit is not None and study.fit.problem:
        found.append(
            f"The critical batch size is not to be relied on at {study.metric} {study.fit.target:g}: "
            f"{study.fit.problem}."
        )
    return found


def _rung_warnings(study: Study, rung: Rung) -> list[str]:
    said = []
    if rung.failed:
        said.append(
            f"Batch {rung.batch_size}: {len(rung.failed)} tuned run(s) left out of every number, they decide "
            f"nothing: {'; '.join(rung.failed)}."
        )
    tie = rung.tie
    if tie is not None and tie.misbroken:
        said.append(
            f"Batch {rung.batch_size}: its search's best score {tie.score:.3f} was a tie between lrs "
            f"{', '.join(f'{lr:.3g}' for lr in tie.lrs)}; broken by {tie.loss_metric} the best is {tie.by_loss:.3g}, "
            f"but the tuned runs used {tie.used:.3g} (a tie broken by trial order): its numbers may not be its best."
        )
    if rung.edge:
        said.append(f"Batch {rung.batch_size}: its best lr {rung.best_lr:.3g} is {rung.edge}.")
    said += _tuning(study, rung)
    lag = rung.lag
    if lag.n > 1 and lag.low > 0 and lag.mean > study.tolerance:
        said.append(
            f"BatchNorm lag at batch {rung.batch_size}: raw val_acc reads {lag.mean:.3f} below {study.metric} "
            f"(lag {fmt_estimate(lag)}); raw readings understate this batch size, so this study reads "
            f"{study.metric}."
        )
    return said


def _tuning(study: Study, rung: Rung) -> list[str]:
    """Where the runner-up lr at the same seeds may score more than the margin apart from the best lr: the lr
    chosen on one held-out search is itself uncertain there (its interval reaches past the margin).
    """
    other = rung.runner_up
    if other is None or other.gap.n < 2:
        return []
    delta = study_decision.margin(study.tolerance, study.val_images).value
    if max(abs(other.gap.low), abs(other.gap.high)) <= delta:
        return []
    return [
        f"Batch {rung.batch_size}: its runner-up lr {other.lr:.3g} scores {fmt_estimate(other.val)} at the same "
        f"seeds; best minus runner-up is {fmt_estimate(other.gap)} on {study.metric}, an interval reaching past "
        f"the margin {delta:.3g}: the lr one search chose is itself uncertain at this batch size."
    ]


def _beyond_perfect(study: Study) -> list[str]:
    """A larger batch size whose steps to the target fell by more than its batch grew, the whole interval past
    it: S = S_min (1 + B_crit / B) lets steps fall by at most the batch's factor (perfect scaling, B_crit
    infinite), so no batch-size effect produces it: a tie in a search, lrs far apart, or a target at one batch
    size's plateau can.
    """
    reached = [r for r in study.rungs if r.target is not None and not r.target.not_reached and r.target.steps.n > 1]
    said = []
    for small, large in itertools.pairwise(reached):
        assert small.target is not None and large.target is not None
        factor = large.batch_size / small.batch_size
        if large.target.steps.high * factor < small.target.steps.low:
            said.append(
                f"Batch {large.batch_size} needs {fmt_estimate(large.target.steps)} steps to {study.metric} "
                f"{study.target:g} against batch {small.batch_size}'s {fmt_estimate(small.target.steps)}: fewer than "
                f"perfect scaling allows ({small.target.steps.low:.0f} / {factor:g} at most), which no batch-size "
                "effect produces (S = S_min (1 + B_crit / B)); a search that tied, lrs far apart, or a target at one "
                "batch size's plateau would: read these two batch sizes with care."
            )
    return said


def _stopping(study: Study) -> list[str]:
    """Stopping that depends on the batch size: a rule on a raw metric where the study reads recalibrated ones
    (raw numbers lag behind a large batch's weights and stop it early for that lag), or rules that differ.
    """
    said = []
    raw = [r for r in study.stop_rules if r is not None and not r.metric.endswith(RECAL)]
    if raw and study.metric.endswith(RECAL):
        said.append(
            f"Runs stopped on raw {raw[0].metric}, which lags behind the weights of a batch size that took few "
            "steps: stopping is biased against large batches. `sweep study` stops on the recalibrated metric; "
            "train the study again."
        )
    if len(study.stop_rules) > 1:
        said.append("The runs do not share one stopping rule: stopping differs between runs; train the study again.")
    return said


def _separation(study: Study, decision: Decision) -> list[str]:
    """Batch sizes the seeds cannot place: neither non-inferior to the best at the margin nor worse by more than
    it (one-sided tests at ALPHA); with the seeds that would show the difference at 80% power.
    """
    said = []
    best = decision.best
    for batch in decision.with_verdict(study_decision.Verdict.UNSEPARATED):
        rung, gap = study.rung(batch), paired_gap(best, study.rung(batch))
        need = seeds_for_power((abs(gap.mean),), gap.sd, ALPHA) if gap.mean and gap.n > 1 else None
        more = f"; about {need} seeds would at 80% power if the difference is {gap.mean:.3f}" if need else ""
        said.append(
            f"Too few seeds to separate batch {rung.batch_size} from batch {best.batch_size}: {best.batch_size} "
            f"minus {rung.batch_size} is {fmt_estimate(gap)} on {study.metric}, neither within the margin "
            f"{decision.margin.value:.3g} nor worse by more than it (one-sided t-tests at {ALPHA:g}){more}."
        )
    return said
