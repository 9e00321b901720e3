"""Which numbers decide each claim (sweep.claims.basis.read): the symptom from the post's raw
reading, generalisation from recalibrated numbers where every chosen run recorded them (raw, and
said so, where not), the optimizer and learning rate named; runs at chance
(sweep.analysis.health.run_health) noted and kept in every number. On constructed tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sweep import analysis as an
from sweep import claims, vocab
from sweep.analysis import health as health_of
from sweep.analysis.chance import chance_limit
from sweep.analysis.estimates import Check, Estimate
from sweep.claims import basis
from sweep.claims.findings import READ_TUNED, Finding, ReadFrom, claims_table
from sweep.config import timing_schema
from sweep.vocab import RunStatus

pytestmark = pytest.mark.unit

BS = "train.batch_size"
FILLER = {an.column(m, w): 0.0 for m in an.SNAPSHOT_METRICS for w in ("epoch2", "last")}
FILLER |= {"epoch_seconds": 1.0, "epoch_seconds_median": 1.0, "samples_per_second": 1.0}
FILLER |= {f"{kind}_to_target{recal}": 1.0 for kind in ("steps", "seconds") for recal in ("", "_recal")}
FILLER |= {"trained_steps": 1.0, "trained_seconds": 1.0}
VAL, VAL_RECAL = an.column(vocab.VAL_ACC, "last"), an.column(vocab.VAL_ACC_RECAL, "last")
TRAIN_EVAL, TRAIN_EVAL_RECAL = an.column(vocab.TRAIN_EVAL_ACC, "last"), an.column(vocab.TRAIN_EVAL_ACC_RECAL, "last")

# BatchNorm's lag: raw, batch 256 looks far worse; recalibrated, it is slightly better.
RAW_VAL = {8: [0.60, 0.62, 0.61], 256: [0.10, 0.12, 0.11]}
RECAL_VAL = {8: [0.60, 0.62, 0.61], 256: [0.65, 0.66, 0.68]}


def batch_table(recalibrated: bool = True, **fixed: Any) -> pd.DataFrame:
    rows = []
    for bs in (8, 256):
        for seed in range(3):
            row = {"run_id": f"bs{bs}-s{seed}", "seed": seed, BS: bs, **fixed, **FILLER}
            row |= {VAL: RAW_VAL[bs][seed], TRAIN_EVAL: RAW_VAL[bs][seed] + 0.1}
            if recalibrated:
                row |= {VAL_RECAL: RECAL_VAL[bs][seed], TRAIN_EVAL_RECAL: RECAL_VAL[bs][seed] + 0.1}
            rows.append(row)
    return pd.DataFrame(rows)


def test_c7_reads_the_recalibrated_numbers_and_says_so() -> None:
    finding = basis.read(claims.by_id("C7"), batch_table(**{"train.optimizer": "momentum", "train.lr": 0.1}))
    assert finding is not None and finding.reading == ReadFrom.RECAL.value
    val = next(c for c in finding.checks if c.label.startswith("val_acc_recal, batch 256 - batch 8"))
    assert val.estimate.mean == pytest.approx(0.0533, abs=1e-3)  # recalibrated: +0.053, raw would be -0.50
    assert (finding.optimizer, finding.lr) == ("momentum", "0.1")
    assert finding.tested_at.startswith("optimizer=momentum, lr=0.1")


def test_without_recalibrated_numbers_c7_reads_raw_and_says_so() -> None:
    finding = basis.read(claims.by_id("C7"), batch_table(recalibrated=False))
    assert finding is not None and finding.reading == ReadFrom.RAW.value
    val = next(c for c in finding.checks if c.label.startswith("val_acc, batch 256 - batch 8"))
    assert val.estimate.mean == pytest.approx(-0.50)
    assert finding.optimizer == "adam"  # the rows lack the column: the default, named all the same
    assert finding.tested_at == "optimizer=adam; 3 seeds"


def test_c8_picks_the_best_batch_size_on_recalibrated_val_acc() -> None:
    finding = basis.read(claims.by_id("C8"), batch_table())
    assert finding is not None and finding.reading == ReadFrom.RECAL.value
    (check,) = finding.checks
    assert check.estimate.mean == pytest.approx(-0.0533, abs=1e-3)  # batch 8 minus batch 256: the large one wins


def test_the_symptom_is_read_as_the_post_read_it() -> None:
    gap2 = an.column(vocab.GAP, "epoch2")
    table = batch_table().assign(**{BS: lambda t: t[BS].map({8: 8, 256: 64})})
    table[gap2] = [0.05, 0.04, 0.06, 0.5, 0.55, 0.6]
    finding = basis.read(claims.by_id("C1"), table)
    assert finding is not None and finding.reading == ReadFrom.SYMPTOM.value
    assert finding.size[0].estimate.mean == pytest.approx(0.55)
    assert finding.checks[0].estimate.mean == pytest.approx(0.50)  # batch 64 minus batch 8, paired by seed


def test_claims_csv_names_optimizer_lr_and_reading_on_every_row() -> None:
    found = claims.evaluate(batch_table(**{"train.lr": 0.001}))
    rows = claims_table(found)
    tested = rows[rows["verdict"] != "not tested by this sweep"]
    assert set(tested["claim"]) >= {"C7", "C8"}
    assert (tested["optimizer"] == "adam").all() and (tested["lr"] == "0.001").all()
    assert set(tested.loc[tested["claim"].isin(["C7", "C8"]), "reading"]) == {ReadFrom.RECAL.value}


# --- did it learn?


def epochs_of(run_id: str, train: float, val: float, train_eval: float | None = None) -> pd.DataFrame:
    return pd.DataFrame(
        {
            vocab.RUN_ID: [run_id] * 2,
            vocab.EPOCH: [1, 2],
            vocab.TRAIN_ACC: [train, train],
            vocab.TRAIN_EVAL_ACC: [train if train_eval is None else train_eval] * 2,
            vocab.VAL_ACC: [val, val],
            vocab.VAL_ACC_RECAL: [val, val],
        }
    )


def health(*runs: pd.DataFrame) -> pd.DataFrame:
    epochs = pd.concat(runs, ignore_index=True)
    ids = epochs[vocab.RUN_ID].unique()
    table = pd.DataFrame({vocab.RUN_ID: ids, vocab.STATUS: RunStatus.DONE, "num_classes": 120})
    return health_of.run_health(an.Results(folders=(), runs=table, epochs=epochs))


def test_a_run_at_chance_is_a_note_and_stays_in_the_claims() -> None:
    found = health(epochs_of("flat", 0.008, 0.009), epochs_of("learning", 0.30, 0.02))
    assert list(found[vocab.RUN_ID]) == ["flat"]
    (problem,) = found["problem"]
    assert problem.startswith("at chance: at its last record train_acc 0.008")
    assert "none above 0.017 (chance 0.008, 120 classes)" in problem
    assert found[health_of.KIND].iloc[0] is health_of.Problem.AT_CHANCE
    assert found[health_of.IN_CLAIMS].iloc[0]


def test_a_majority_class_predictor_learned_the_prior_and_stays_in() -> None:
    """C2's imbalanced runs: train accuracy 0.95 from always answering class 0, val at chance."""
    assert health(epochs_of("prior", 0.95, 0.008, train_eval=0.95)).empty


# --- C6: the quiet measurement decides where there is one


def test_c6_reads_the_quiet_seconds_and_shows_the_quiet_repeats_paired_by_round() -> None:
    repeats = {8: "10.0 12.0 11.0", 256: "5.0 9.0 4.4"}
    table = batch_table().assign(
        **{timing_schema.QUIET_REPEATS: lambda t: t[BS].map(repeats), timing_schema.QUIET_STEP_SECONDS: 0.01}
    )
    finding = basis.read(claims.by_id("C6"), table)
    assert finding is not None and finding.reading == ReadFrom.QUIET.value
    (check,) = finding.checks
    assert check.label.startswith("quiet seconds to val_acc_recal 0.5 at batch 256 relative to batch 8")
    (quiet,) = [e for e in finding.evidence if e.label.startswith("equal epochs: quiet epoch time")]
    assert quiet.estimate.mean == pytest.approx((5 / 10 + 9 / 12 + 4.4 / 11) / 3 - 1)
    assert quiet.estimate.n == 3


def test_without_a_quiet_measurement_c6_reads_the_runs_own_times_and_says_so() -> None:
    finding = basis.read(claims.by_id("C6"), batch_table())
    assert finding is not None and finding.reading == ReadFrom.TIME.value
    assert finding.checks[0].label.startswith("in-run seconds to val_acc_recal 0.5")


# --- batch-size advice at each batch size's own tuned learning rate


def test_batch_size_advice_is_read_at_each_batch_sizes_tuned_lr() -> None:
    grid = batch_table(**{"train.lr": 0.001})
    tuned = batch_table().assign(**{"train.lr": lambda t: t[BS].map({8: 0.002, 256: 0.03})})
    tuned[VAL_RECAL] = tuned[BS].map({8: 0.70, 256: 0.50}) + 0.01 * tuned["seed"]
    searches = pd.DataFrame(
        {vocab.ROLE: vocab.SEARCH, "train.lr": [1e-4, 0.03], vocab.SEARCH_LR_LOW: 1e-4, vocab.SEARCH_LR_HIGH: 0.03}
    )
    found = {c.id: f for c, f in claims.evaluate(grid, None, None, basis.tuned_lr(tuned, searches))}
    c8 = found["C8"]
    assert c8 is not None and c8.lr == "tuned per batch size over [0.0001, 0.03] (8: 0.002, 256: 0.03)"
    assert c8.reading == f"{ReadFrom.RECAL.value}; {READ_TUNED}"
    assert c8.checks[0].estimate.mean == pytest.approx(0.20)  # the tuned runs: batch 8 ahead by 0.2
    assert found["C6"] is not None and found["C6"].lr == c8.lr  # time to a target: each at its own best lr


def test_each_folders_tuned_runs_name_their_own_search() -> None:
    adam = batch_table(**{"source": "results/a", "train.optimizer": "adam"}).assign(
        **{"train.lr": lambda t: t[BS].map({8: 0.002, 256: 0.01})}
    )
    sgd = batch_table(**{"source": "results/m", "train.optimizer": "momentum"}).assign(
        **{"train.lr": lambda t: t[BS].map({8: 0.05, 256: 0.3})}
    )
    searches = pd.DataFrame(
        {
            "source": ["results/a", "results/m"],
            vocab.ROLE: vocab.SEARCH,
            "train.lr": [0.001, 0.1],
            vocab.SEARCH_LR_LOW: [1e-4, 1e-3],
            vocab.SEARCH_LR_HIGH: [0.03, 1.0],
        }
    )
    named = basis.tuned_lr(pd.concat([adam, sgd], ignore_index=True), searches)
    assert set(named["train.lr"]) == {
        "tuned per batch size over [0.0001, 0.03] (8: 0.002, 256: 0.01)",
        "tuned per batch size over [0.001, 1] (8: 0.05, 256: 0.3)",
    }


def test_the_limit_of_learning_nothing_is_twice_chance_but_never_certainty() -> None:
    assert chance_limit(120) == pytest.approx(2 / 120)
    assert chance_limit(10) == pytest.approx(0.2)
    assert chance_limit(2) == pytest.approx(0.625)  # twice chance would put every binary model at chance


def test_the_curves_and_gaps_keep_the_runs_at_chance(tmp_path: Path) -> None:
    """tables/curves.csv and gaps.csv summarise over every seed, one at chance too (it is what its setting
    did); run_summary.csv lists every run.
    """
    learning = [epochs_of(f"s{seed}", 0.30 + 0.01 * seed, 0.2) for seed in range(3)]
    flat = epochs_of("s9", 0.008, 0.008)
    epochs = pd.concat([*learning, flat], ignore_index=True).assign(step=lambda t: t[vocab.EPOCH] * 10)
    epochs[[vocab.EPOCH_SECONDS, vocab.SAMPLES_PER_SECOND]] = 1.0
    epochs["seed"], epochs["source"] = [0, 0, 1, 1, 2, 2, 9, 9], "results/x"
    runs = pd.DataFrame({vocab.RUN_ID: ["s0", "s1", "s2", "s9"], vocab.STATUS: RunStatus.DONE, "num_classes": 120})
    results = an.Results(folders=(), runs=runs, epochs=epochs)
    an.write_tables(results, tmp_path)
    curves = pd.read_csv(tmp_path / "tables" / "curves.csv")
    val = curves[(curves["metric"] == vocab.VAL_ACC) & (curves[vocab.EPOCH] == 2)]
    assert list(val["n"]) == [4] and val["mean"].item() == pytest.approx((3 * 0.2 + 0.008) / 4)
    assert set(pd.read_csv(tmp_path / "tables" / "gaps.csv")["n"]) == {4}
    assert len(pd.read_csv(tmp_path / "tables" / "run_summary.csv")) == 4


def test_a_finding_read_recalibrated_names_the_recalibrated_numbers_in_its_size_and_mechanism_too() -> None:
    e = Estimate(0.1, 0.01, 3, 0.08, 0.12)
    finding = Finding(
        checks=(Check("val_acc change, last epoch", e),),
        selection="",
        size=(Check("val_acc change, last epoch: by more than 0.1", e),),
        mechanism=(Check("eval_gap, batch 64 - 8", e),),
    )
    renamed = basis.relabelled(finding)
    assert [c.label for c in (*renamed.checks, *renamed.size, *renamed.mechanism)] == [
        "val_acc_recal change, last epoch",
        "val_acc_recal change, last epoch: by more than 0.1",
        "eval_gap_recal, batch 64 - 8",
    ]
