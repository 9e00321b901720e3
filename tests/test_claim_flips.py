"""C3-C8 flip between verdicts on constructed run summary tables, alone and under each claim's own error control;
C6's relative change and C8's leave-one-seed-out choice by hand; the verdict texts at the edges
(fewer than 2 seeds, more than 1000 seeds to decide, an interval touching its threshold).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sweep import analysis as an
from sweep import claims
from sweep.analysis.estimates import Check, Estimate, t_multiplier
from sweep.analysis.outcome import Outcome
from sweep.claims import family
from sweep.claims.findings import Finding
from sweep.claims.registry import by_id
from sweep.claims.verdict import verdict_text

pytestmark = pytest.mark.unit

GAP2, VAL, TRAIN_EVAL = an.column("gap", "epoch2"), an.column("val_acc", "last"), an.column("train_eval_acc", "last")
EVAL_GAP, TO_TARGET = an.column("eval_gap", "last"), "seconds_to_target"
FILLER = {an.column(m, w): 0.0 for m in an.SNAPSHOT_METRICS for w in ("epoch2", "last")}
FILLER |= {"epoch_seconds": 1.0, "epoch_seconds_median": 1.0, "samples_per_second": 1.0}
FILLER |= {TO_TARGET: 1.0, "steps_to_target": 1.0, "trained_steps": 1.0, "trained_seconds": 1.0}


def runs(axis: str, by_value: dict[Any, dict[str, list[float]]], fixed: dict[str, Any] | None = None) -> pd.DataFrame:
    """A run summary table: for each value of `axis`, one run per seed 0, 1, ... with the metrics given
    (one number per seed; others 0, epoch times 1 s). Rows shuffled: only pairing by seed matches them.
    """
    rows = [
        {"run_id": f"{axis}={value}-s{seed}", "seed": seed, axis: value, **(fixed or {}), **FILLER}
        | {metric: values[seed] for metric, values in metrics.items()}
        for value, metrics in by_value.items()
        for seed in range(len(next(iter(metrics.values()))))
    ]
    return pd.DataFrame(rows).sample(frac=1, random_state=0).reset_index(drop=True)


def verdicts(claim_id: str, table: pd.DataFrame) -> tuple[Finding, Finding]:
    """The claim's finding on its own (every check at 0.05) and in the report's evaluation (the claim's levels)."""
    alone = by_id(claim_id).evaluate(table)
    corrected = {claim.id: finding for claim, finding in claims.evaluate(table)}[claim_id]
    assert alone is not None and corrected is not None
    own = family.controlled(alone)  # the claim's own checks set its levels, nothing else
    assert [(c.level_holds, c.level_fails) for c in corrected.checks] == [
        (c.level_holds, c.level_fails) for c in own.checks
    ]
    return alone, corrected


def sizes(finding: Finding) -> list[tuple[float, int]]:
    return [(pytest.approx(c.estimate.mean), c.estimate.n) for c in finding.size]


def numbers(finding: Finding) -> list[tuple[float, int]]:
    return [(pytest.approx(c.estimate.mean), c.estimate.n) for c in finding.checks]


def by_hand(*per_check: list[float]) -> list[tuple[float, int]]:
    return [(pytest.approx(float(np.mean(d))), len(d)) for d in per_check]


def diff(a: list[float], b: list[float]) -> list[float]:
    return [x - y for x, y in zip(a, b, strict=True)]


# --- C3: the unshuffled gap above the shuffled one (paired) decides; the unshuffled gap above 0.20 is its size


def c3(shuffled: list[float], unshuffled: list[float]) -> pd.DataFrame:
    return runs("data.shuffle", {True: {GAP2: shuffled}, False: {GAP2: unshuffled}})


@pytest.mark.parametrize(
    ("shuffled", "unshuffled", "expected"),
    [
        ([0.10, 0.12, 0.08], [0.60, 0.65, 0.70], "supported"),
        ([0.10, 0.12, 0.08], [0.05, 0.06, 0.03], "contradicted"),  # the gap falls: the direction fails
        ([0.10, 0.12, 0.08], [0.14, 0.15, 0.13], "direction shown, size not"),  # up by 0.04, to 0.14 < 0.20
        ([0.20, 0.65, 0.35], [0.60, 0.65, 0.70], "inconclusive"),  # the increase's interval spans 0
    ],
)
def test_c3_flips(shuffled: list[float], unshuffled: list[float], expected: str) -> None:
    alone, corrected = verdicts("C3", c3(shuffled, unshuffled))
    assert alone.verdict == corrected.verdict == expected
    assert numbers(alone) == by_hand(diff(unshuffled, shuffled))
    assert sizes(alone) == by_hand(unshuffled)


# --- C4: any-of: at least one kind of mismatch lowers final val_acc (paired); by more than 0.10 is its size

NONE = [0.80, 0.82, 0.78]
DROPS, NO_DROP, UNSURE = [0.20, 0.21, 0.19], [0.79, 0.82, 0.80], [0.80, 0.60, 0.95]
RISES, SMALL_DROP = [0.90, 0.93, 0.88], [0.75, 0.77, 0.73]


@pytest.mark.parametrize(
    ("invert", "scale", "expected"),
    [
        (UNSURE, DROPS, "supported"),  # one kind holds, the other undecided
        (RISES, DROPS, "supported"),  # one kind holds, the other fails
        (RISES, RISES, "contradicted"),  # every kind fails: val_acc rises
        (UNSURE, NO_DROP, "inconclusive"),  # neither kind decided
        (SMALL_DROP, NO_DROP, "direction shown, size not"),  # a drop of 0.05, short of 0.10
    ],
)
def test_c4_any_of_rule(invert: list[float], scale: list[float], expected: str) -> None:
    table = runs("data.preprocess_mismatch", {"none": {VAL: NONE}, "invert": {VAL: invert}, "scale": {VAL: scale}})
    alone, corrected = verdicts("C4", table)
    assert corrected.verdict == expected
    assert ["mismatch invert," in alone.checks[0].label, "mismatch scale," in alone.checks[1].label] == [True, True]
    assert numbers(alone) == by_hand(diff(invert, NONE), diff(scale, NONE))
    assert [c.level_holds for c in corrected.checks] == [0.025, 0.025]  # one of 2 is enough: 0.05 / 2 to hold
    words = "undecided at 3 seeds" if expected == "inconclusive" else expected  # an undecided verdict says its seeds
    assert verdict_text(by_id("C4"), corrected).startswith(f"{words} (any-of rule: supported when 1 of its 2")


# --- C5: eval_gap grows with width (1 -> 2) and with fewer samples per class (20 -> 5), paired


@pytest.mark.parametrize(
    ("wide", "expected"), [([0.15, 0.17, 0.16], "supported"), ([0.01, 0.01, 0.01], "contradicted")]
)
def test_c5_flips(wide: list[float], expected: str) -> None:
    base, few = [0.05, 0.06, 0.04], [0.25, 0.22, 0.27]
    table = pd.concat(
        [
            runs("model.width", {1.0: {EVAL_GAP: base}, 2.0: {EVAL_GAP: wide}}, {"data.samples_per_class": 20}),
            runs("data.samples_per_class", {5: {EVAL_GAP: few}}, {"model.width": 1.0}),
        ]
    )
    alone, corrected = verdicts("C5", table)
    assert alone.verdict == corrected.verdict == expected
    assert [c.label.split()[3:6] for c in alone.checks] == [["1", "->", "2,"], ["20", "->", "5,"]]
    assert numbers(alone) == by_hand(diff(wide, base), diff(few, base))
    assert [c.region() for c in alone.checks] == ["> 0; fails below 0.02", "> 0; fails below 0.02"]


def test_c5_no_effect_within_its_margin_contradicts() -> None:
    """Width 1 -> 2 changes eval_gap by 0.001 [-0.010, 0.012] (the committed causes run's numbers, by seed here):
    wholly within 0.02 of no change, so the wider model does not overfit: contradicted, not undecided.
    """
    base = [0.05, 0.06, 0.04, 0.05, 0.05]
    wide = [0.056, 0.054, 0.047, 0.049, 0.053]  # changes 0.006, -0.006, 0.007, -0.001, 0.003
    table = runs("model.width", {1.0: {EVAL_GAP: base}, 2.0: {EVAL_GAP: wide}}, {"data.samples_per_class": 20})
    alone, corrected = verdicts("C5", table)
    (check,) = alone.checks
    assert check.estimate.low < 0 < check.estimate.high < 0.02
    assert corrected.verdict == "contradicted"


# --- C6: median epoch time at the largest batch at least 10% below the smallest's (paired relative change)

SMALLEST = [10.0, 12.0, 11.0]


def c6(largest: list[float]) -> pd.DataFrame:
    middle = [7.0, 80.0, 0.5]  # never read: only the smallest and the largest batch are compared
    return runs("train.batch_size", {16: {TO_TARGET: SMALLEST}, 32: {TO_TARGET: middle}, 128: {TO_TARGET: largest}})


@pytest.mark.parametrize(
    ("largest", "expected"),
    [
        ([4.0, 6.0, 5.0], "supported"),
        ([10.5, 12.5, 11.5], "contradicted"),  # slower at the largest batch
        ([8.0, 11.5, 10.0], "inconclusive"),  # -0.20, -0.04, -0.09: the interval spans -0.10
    ],
)
def test_c6_relative_paired_change_by_hand(largest: list[float], expected: str) -> None:
    alone, corrected = verdicts("C6", c6(largest))
    assert alone.verdict == corrected.verdict == expected
    change = [large / small - 1 for large, small in zip(largest, SMALLEST, strict=True)]  # per seed, then the mean
    (check,) = alone.checks
    assert (check.estimate.mean, check.estimate.sd, check.estimate.n) == (
        pytest.approx(np.mean(change)),
        pytest.approx(np.std(change, ddof=1)),
        3,
    )
    assert check.region() == "< -0.1" and "batch 128 relative to batch 16" in check.label


def test_c6_verdict_does_not_depend_on_the_other_claims_the_table_answers() -> None:
    """-0.30, -0.20, -0.25: p = 0.035 alone. The table also answers C7 (2 checks) and C8 (1); under a family over
    the report the smallest of 4 p-values would be multiplied by 4 and C6 left undecided. Per claim it stays
    supported.
    """
    table = c6([7.0, 9.6, 8.25])
    alone, corrected = verdicts("C6", table)
    p, side = alone.checks[0].p_value()
    assert alone.verdict == "supported" and side is Outcome.HOLDS and p == pytest.approx(0.035, abs=0.005)
    assert corrected.verdict == "supported" and corrected.checks[0].level_holds == 0.05


# --- C7: at the largest batch train_eval_acc higher and val_acc lower than at the smallest (paired)

SMALL_FIT, SMALL_VAL, LARGE_FIT = [0.80, 0.82, 0.81], [0.70, 0.72, 0.71], [0.95, 0.96, 0.94]


@pytest.mark.parametrize(
    ("large_val", "expected"),
    [
        ([0.60, 0.61, 0.63], "supported"),
        ([0.75, 0.77, 0.74], "contradicted"),  # fits better and generalises better: one check fails
        ([0.60, 0.80, 0.70], "inconclusive"),  # one holds, the other undecided
    ],
)
def test_c7_flips(large_val: list[float], expected: str) -> None:
    table = runs(
        "train.batch_size",
        {
            16: {TRAIN_EVAL: SMALL_FIT, VAL: SMALL_VAL},
            32: {TRAIN_EVAL: [0.1, 0.1, 0.1], VAL: [0.99, 0.99, 0.99]},  # never read
            128: {TRAIN_EVAL: LARGE_FIT, VAL: large_val},
        },
    )
    alone, corrected = verdicts("C7", table)
    assert alone.verdict == corrected.verdict == expected
    assert numbers(alone) == by_hand(diff(LARGE_FIT, SMALL_FIT), diff(large_val, SMALL_VAL))


# --- C8: best batch <= 32 vs best batch > 32, each chosen on the other seeds (leave one seed out)

C8_VAL = {
    16: [0.95, 0.50, 0.50, 0.50],  # best on average only through seed 0
    32: [0.55, 0.55, 0.55, 0.55],
    64: [0.40, 0.40, 0.40, 0.80],  # best on average only through seed 3
    128: [0.45, 0.45, 0.45, 0.45],
}


@pytest.mark.parametrize(("shift", "expected"), [(0.0, "supported"), (0.3, "contradicted")])
def test_c8_chooses_on_the_other_seeds(shift: float, expected: str) -> None:
    """Held out seed 0: 16 averages 0.50 on seeds 1-3, below 32's 0.55, so 32 is chosen; held out 1-3, 16
    (0.65) is. Likewise 128 is chosen above 32 only when seed 3 is held out. Shifting the large batches up
    by 0.3 keeps the choices and turns the held-out differences negative.
    """
    val = {bs: [v + shift * (bs > 32) for v in per_seed] for bs, per_seed in C8_VAL.items()}
    alone, corrected = verdicts("C8", runs("train.batch_size", {bs: {VAL: v} for bs, v in val.items()}))
    assert alone.verdict == corrected.verdict == expected
    chosen = {0: (32, 64), 1: (16, 64), 2: (16, 64), 3: (16, 128)}  # by hand, from the means above
    picks = "; ".join(f"seed {seed}: {small} vs {large}" for seed, (small, large) in chosen.items())
    assert f"per held-out seed: {picks}." in alone.notes[0]
    held_out = [val[small][seed] - val[large][seed] for seed, (small, large) in chosen.items()]
    assert held_out == pytest.approx([0.15 - shift, 0.10 - shift, 0.10 - shift, 0.05 - shift])
    (check,) = alone.checks
    assert (check.estimate.mean, check.estimate.sd, check.estimate.n) == (
        pytest.approx(np.mean(held_out)),
        pytest.approx(np.std(held_out, ddof=1)),
        4,
    )
    # chosen and tested on all four seeds, 16 and 64 are picked and look better than they test (0.1125)
    in_sample = {e.label: e.estimate for e in alone.evidence}[
        "chosen and tested on the same seeds (16 - 64; favours the winner)"
    ]
    assert in_sample.mean == pytest.approx(np.mean(diff(val[16], val[64])))


# --- verdict texts at the edges


def test_one_seed_gives_no_interval_and_says_so() -> None:
    finding = by_id("C3").evaluate(c3([0.10], [0.60]))
    assert finding is not None and [c.estimate.n for c in (*finding.checks, *finding.size)] == [1, 1]
    assert verdict_text(by_id("C3"), finding) == (
        "inconclusive: fewer than 2 seeds (or pairs) give no interval; run 3 or more seeds"
    )


def test_a_mean_a_hair_past_its_threshold_needs_more_than_1000_seeds() -> None:
    """Relative changes -0.201, -0.101, -0.001: mean 0.001 past -0.10 with sd 0.1 (d = 0.01); even at the
    sd's lower 95% limit (x 0.52) 80% power needs tens of thousands of seeds.
    """
    _, corrected = verdicts("C6", c6([7.99, 10.788, 10.989]))
    assert corrected.checks[0].estimate.mean == pytest.approx(-0.101)
    assert verdict_text(by_id("C6"), corrected) == (
        "undecided at 3 seeds (to a target fixed in advance, read at 0.5 validation accuracy (val_acc_recal where "
        "recorded)); > 1000 (range > 1000 to > 1000) seeds per setting for 80% power (`run --until-decided` adds "
        "them)"
    )


def test_an_interval_touching_its_threshold_is_undecided() -> None:
    """A check holds when its number lies in the open region (here gap > 0.2), decided by the t-test at
    p < 0.05, strictly. An interval whose end equals the threshold has p = 0.05 exactly: undecided, on either
    side. With any spread the interval's end is mean -+ t * sd / sqrt(n), t irrational, so floating point
    cannot put it on the threshold exactly; two seeds at exactly 0.2 (sd 0) give the interval [0.2, 0.2],
    which is neither inside nor outside the open region.
    """
    finding = by_id("C3").evaluate(c3([0.0, 0.0], [0.2, 0.2]))
    assert finding is not None
    (increase,), (level,) = finding.checks, finding.size
    assert (level.estimate.low, level.estimate.mean, level.estimate.high, level.low) == (0.2, 0.2, 0.2, 0.2)
    assert level.p_value()[0] == 1.0 and level.outcome() is Outcome.UNDECIDED
    assert increase.outcome() is Outcome.HOLDS and finding.verdict == "direction shown, size undecided"
    assert verdict_text(by_id("C3"), finding).startswith("direction shown, size undecided (equal epochs")


@pytest.mark.parametrize("n", [2, 3, 10])
def test_the_decision_switches_where_the_interval_end_crosses_the_threshold(n: int) -> None:
    """1e-9 either side of touching: inside the region holds, touching from outside fails, else undecided."""
    sd, threshold = 0.05, 0.2
    half = t_multiplier(n) * sd / math.sqrt(n)

    def check(mean: float) -> Check:
        return Check("x", Estimate(mean, sd, n, mean - half, mean + half), low=threshold)

    assert check(threshold + half + 1e-9).outcome() is Outcome.HOLDS
    assert check(threshold + half - 1e-9).outcome() is Outcome.UNDECIDED
    assert check(threshold - half + 1e-9).outcome() is Outcome.UNDECIDED
    assert check(threshold - half - 1e-9).outcome() is Outcome.FAILS
