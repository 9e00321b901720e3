"""Runs at chance are evidence (sweep.analysis.chance, sweep.analysis.health): an arm at chance stays in every
number and, where its control learned, the finding names "the cause prevents learning"; a control at chance
cannot answer; the binomial test against chance, checked against scipy.stats; and the stuck-run sensitivity,
computed as the report evaluates. On results built by hand, without TensorFlow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sweep import analysis as an
from sweep import vocab
from sweep.analysis import chance, health
from sweep.claims.findings import claims_table
from sweep.claims.registry import by_id, evaluate
from sweep.claims.verdict import Basis, fixed
from sweep.report.writer import Inputs, stuck_sensitivity

pytestmark = pytest.mark.unit

CLASSES, IMAGES = 120, 1200  # glyphs120: 1200 validation images, and a train_eval subset as large
CHANCE = 1 / CLASSES
SHUFFLE, BATCH, LR = "data.shuffle", "train.batch_size", "train.lr"


def record(run_id: str, seed: int, settings: dict[str, Any], epoch: int, **metrics: float) -> dict[str, Any]:
    """One row of epochs.csv: every snapshot metric (0 unless given), the gaps from the accuracies."""
    row = {m: 0.0 for m in an.SNAPSHOT_METRICS} | {"epoch_seconds": 1.0, "samples_per_second": 100.0}
    row |= {vocab.RUN_ID: run_id, vocab.SEED: seed, an.SOURCE: "results/x", **settings, vocab.EPOCH: epoch}
    row |= {vocab.STEP: 10 * epoch, **metrics}
    row[vocab.GAP] = row[vocab.TRAIN_ACC] - row[vocab.VAL_ACC]
    row[vocab.EVAL_GAP] = row[vocab.TRAIN_EVAL_ACC] - row[vocab.VAL_ACC]
    return row


def run(run_id: str, seed: int, settings: dict[str, Any], accuracies: list[tuple[float, float, float]]) -> list[dict]:
    """A run's records: (train_acc, train_eval_acc, val_acc) per epoch."""
    return [
        record(run_id, seed, settings, epoch, train_acc=t, train_eval_acc=te, val_acc=v)
        for epoch, (t, te, v) in enumerate(accuracies, start=1)
    ]


def results(rows: list[dict], tuned: Sequence[dict] = ()) -> an.Results:
    """Done runs of 120 classes, 1200 validation images, from their records (and tuned re-runs')."""
    epochs, again = pd.DataFrame(rows), pd.DataFrame(list(tuned))
    ids = [*epochs[vocab.RUN_ID].unique(), *(again[vocab.RUN_ID].unique() if len(again) else [])]
    runs = pd.DataFrame(
        {
            vocab.RUN_ID: ids,
            vocab.STATUS: vocab.RunStatus.DONE.value,
            chance.NUM_CLASSES: CLASSES,
            chance.VAL_SAMPLES: IMAGES,
            chance.TRAIN_SAMPLES: 4 * IMAGES,
        }
    )
    return an.Results(folders=(), runs=runs, epochs=epochs, tuned=again, folder_epochs=epochs)


# 8 seeds: shuffled runs learn; unshuffled ones sit at chance (correct answers 7-13 of 1200, around 10)
SEEDS = range(8)
LEARNED_GAP2 = [0.05, 0.08, 0.03, 0.06, 0.04, 0.07, 0.02, 0.05]
AT_CHANCE_VAL = [8, 11, 10, 9, 12, 10, 7, 13]  # correct of 1200
AT_CHANCE_TRAIN = [0.010, 0.007, 0.009, 0.006, 0.008, 0.011, 0.005, 0.009]  # running train_acc at epoch 2


def c3_runs(control_learns: bool = True) -> list[dict]:
    rows = []
    for seed in SEEDS:
        val = 0.5 + 0.01 * seed if control_learns else AT_CHANCE_VAL[seed] / IMAGES
        train = val + (LEARNED_GAP2[seed] if control_learns else 0.0)
        rows += run(f"shuf-s{seed}", seed, {SHUFFLE: True}, [(train / 2, train / 2, val / 2), (train, train, val)])
        wrong = AT_CHANCE_VAL[seed] / IMAGES
        at_chance = [(AT_CHANCE_TRAIN[seed], wrong, wrong)] * 2
        rows += run(f"noshuf-s{seed}", seed, {SHUFFLE: False}, at_chance)
    return rows


def test_an_arm_at_chance_stays_in_every_number_and_the_cause_prevents_learning() -> None:
    """Every unshuffled run sits at chance and is noted so; none is left out: C3's paired gap increase reads all
    8 seeds, as numpy computes it by hand, and the finding, claims.csv and the verdict name the outcome.
    """
    found = results(c3_runs())
    problems = health.run_health(found)
    assert set(problems[vocab.RUN_ID]) == {f"noshuf-s{seed}" for seed in SEEDS}
    assert (problems[health.KIND] == health.Problem.AT_CHANCE).all() and problems[health.IN_CLAIMS].all()
    finding = dict(evaluate(health.claims_summary(found, problems)))[by_id("C3")]
    assert finding is not None
    (increase,) = finding.checks
    by_hand = np.array([AT_CHANCE_TRAIN[s] - AT_CHANCE_VAL[s] / IMAGES - LEARNED_GAP2[s] for s in SEEDS])
    assert increase.estimate.n == 8 and increase.estimate.mean == pytest.approx(by_hand.mean())
    assert finding.prevents_learning()
    named = finding.named_outcome
    assert named.startswith("the cause prevents learning: shuffle=False at chance (val_acc 0.008 over 8 seeds")
    assert "shuffle=True learned (val_acc 0.535 over 8 seeds" in named
    assert named.endswith("low val_acc supported, high train_acc contradicted")
    table = claims_table([(by_id("C3"), finding)])
    assert set(table["named_outcome"]) == {named}
    assert fixed(by_id("C3"), finding).long.endswith(f"; {named}")


def test_a_control_arm_at_chance_cannot_answer() -> None:
    """Both arms at chance: the gaps are near 0, so the checks alone would contradict C3; the comparison has
    nothing to compare, and the verdict says so instead.
    """
    found = results(c3_runs(control_learns=False))
    finding = dict(evaluate(health.claims_summary(found)))[by_id("C3")]
    assert finding is not None and finding.cannot_answer()
    assert finding.size[0].outcome().decided  # the numbers are there: the gap at chance is far below 0.2
    assert finding.outcome.value == "undecided"
    said = fixed(by_id("C3"), finding)
    assert said.basis is Basis.NO_CONTROL and said.short == "cannot answer: its control arm did not learn"
    assert said.long.startswith(
        "cannot answer: its control arm did not learn (binomial test against the did-not-learn limit, p="
    )
    assert said.long.endswith("): nothing to compare")
    table = claims_table([(by_id("C3"), finding)])
    assert set(table["verdict"]) == {"cannot answer: its control arm did not learn"}


@pytest.mark.parametrize(
    ("correct", "trials", "p"), [(0, 10, 0.1), (3, 10, 0.1), (30, 3600, CHANCE), (101, 9600, CHANCE)]
)
def test_the_test_against_chance_is_scipys_one_sided_binomial_test(correct: int, trials: int, p: float) -> None:
    oracle = stats.binomtest(correct, trials, p, alternative="greater").pvalue
    assert chance.p_above_chance(correct, trials, p) == pytest.approx(oracle, rel=1e-9)


def test_the_test_against_chance_by_hand() -> None:
    """Three fair coins: P(at least 2 heads) = 4/8, P(3 heads) = 1/8; correct answers pool over seeds."""
    assert chance.p_above_chance(2, 3, 0.5) == pytest.approx(0.5)
    assert chance.p_above_chance(3, 3, 0.5) == pytest.approx(0.125)
    rows = pd.DataFrame(
        {
            an.column(vocab.VAL_ACC, "last"): [0.0125, 0.0100],  # 15 and 12 of 1200
            chance.NUM_CLASSES: CLASSES,
            chance.VAL_SAMPLES: IMAGES,
        }
    )
    test = chance.chance_test(rows, vocab.VAL_ACC)
    assert test is not None and (test.correct, test.trials, test.seeds) == (27, 2400, 2)
    # learned means above the did-not-learn limit (2 / 120 with 120 classes), not above chance itself: 27 of 2400
    # (0.011) is above chance at p = 0.077 and far from above the limit
    limit = 2 * CHANCE if CHANCE <= 0.2 else CHANCE + (1 - CHANCE) / 4
    assert test.limit == pytest.approx(limit)
    assert test.p == pytest.approx(stats.binomtest(27, 2400, limit, alternative="greater").pvalue)
    assert not test.learned
    above = rows.assign(**{an.column(vocab.VAL_ACC, "last"): [0.03, 0.025]})  # 36 and 30 of 1200
    found = chance.chance_test(above, vocab.VAL_ACC)
    assert found is not None and found.learned
    assert found.p == pytest.approx(stats.binomtest(66, 2400, limit, alternative="greater").pvalue) and found.p < 0.05


# --- the stuck-run sensitivity


def batch_runs(val: dict[int, list[float]], lr: float, prefix: str) -> list[dict]:
    rows = []
    for batch, values in val.items():
        for seed, v in enumerate(values):
            settings = {BATCH: batch, LR: lr}
            rows += run(f"{prefix}-bs{batch}-s{seed}", seed, settings, [(v, v, v / 2), (v + 0.1, v + 0.1, v)])
    return rows


def stuck_run(run_id: str, seed: int, settings: dict[str, Any]) -> list[dict]:
    """Predicts one class: val_acc exactly 1 / classes and train_eval_acc unchanged over 3 records, running
    train_acc high (not at chance).
    """
    return run(run_id, seed, settings, [(0.9, 0.3, CHANCE)] * 3)


def sensitivity(found: an.Results) -> str:
    problems = health.run_health(found)
    findings = Inputs.of(found, problems, []).evaluate()
    return stuck_sensitivity(findings, found, problems, [])


def test_without_stuck_runs_no_verdict_changes_when_none_does_with_tuned_readings() -> None:
    """C8 is read at each batch size's tuned lr (batch 8 ahead); at the grid's one lr batch 256 is ahead. A stuck
    run without a pair changes nothing: the sentence must say so, reading C8 at the tuned lrs as the report does.
    """
    grid = batch_runs({8: [0.50, 0.52, 0.51], 256: [0.60, 0.61, 0.63]}, 0.001, "grid")
    stuck = stuck_run("stuck-bs8-s7", 7, {BATCH: 8, LR: 0.001})
    tuned = batch_runs({8: [0.70, 0.72, 0.71], 256: [0.50, 0.53, 0.51]}, 0.002, "tuned")
    found = results(grid + stuck, tuned)
    assert list(health.run_health(found)[health.KIND]) == [health.Problem.STUCK]
    c8 = dict(Inputs.of(found, health.run_health(found), []).evaluate())[by_id("C8")]
    assert c8 is not None and c8.tuned and c8.verdict == "supported"
    assert sensitivity(found) == "Sensitivity: without the 1 stuck run(s), no verdict changes."


def test_without_stuck_runs_the_sentence_names_the_verdict_that_changes() -> None:
    """Every unshuffled run is stuck: C3 reads them (supported); without them C3 has no unshuffled arm."""
    rows = []
    for seed in range(3):
        rows += run(f"shuf-s{seed}", seed, {SHUFFLE: True}, [(0.3, 0.3, 0.25), (0.6 + 0.01 * seed, 0.6, 0.55)])
        rows += stuck_run(f"noshuf-s{seed}", seed, {SHUFFLE: False})
    found = results(rows)
    assert (health.run_health(found)[health.KIND] == health.Problem.STUCK).all()
    assert sensitivity(found) == (
        "Sensitivity: without the 3 stuck run(s), C3 would be not tested by this sweep instead of supported."
    )


def test_the_stuck_test_reads_recalibrated_numbers_where_recorded() -> None:
    """Raw inference-mode numbers move with BatchNorm's lag while the recalibrated ones show one class
    predicted at every record: stuck. Without recalibrated numbers, the raw ones are read.
    """
    rows = stuck_run("lagging", 0, {BATCH: 64})
    for epoch, row in enumerate(rows, start=1):
        row |= {vocab.VAL_ACC_RECAL: CHANCE, vocab.TRAIN_EVAL_ACC_RECAL: 0.3}
        row |= {vocab.VAL_ACC: 0.01 * epoch, vocab.TRAIN_EVAL_ACC: 0.1 * epoch}  # moving: the lag
    found = health.run_health(results(rows))
    assert list(found["problem"]) == [
        "stuck: val_acc_recal 0.008 and train_eval_acc_recal unchanged over 3 records (the model predicts one class)"
    ]
    raw = [{k: v for k, v in row.items() if not k.endswith(vocab.RECAL)} for row in rows]
    assert health.run_health(results(raw)).empty  # raw numbers move: not stuck
