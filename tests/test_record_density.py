"""benchmarks/costs/record_density.py: a sweep's readings rebuilt from fewer of its records. Which records it
keeps, that readings read at kept records do not move while interpolated ones do (on the committed
article sweep), and bad input refused with exit 2 before anything is written.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from benchmarks.costs import record_density

REPO = Path(__file__).resolve().parent.parent
ARTICLE = REPO / "results" / "article"


def _records(steps_per_epoch: int, epochs: int, every: int) -> pd.DataFrame:
    steps = [s for s in range(1, steps_per_epoch * epochs + 1) if s % every == 0 or s % steps_per_epoch == 0]
    return pd.DataFrame(
        {
            "step": steps,
            "epoch": [round(s / steps_per_epoch, 6) for s in steps],
            record_density.EVERY_KEY: every,
        }
    )


@pytest.mark.unit
def test_thinning_keeps_epoch_ends_and_the_multiples_of_every() -> None:
    records = _records(steps_per_epoch=1200, epochs=2, every=150)  # article.yaml's batch 8 at 2 epochs
    kept = record_density.thinned(records, 500)  # epoch ends are kept though 1200 is no multiple of 500
    assert kept["step"].tolist() == [1200, 1500, 2400]  # 1500: the only multiple of 500 that is a record
    kept = record_density.thinned(records, 300)
    assert kept["step"].tolist() == [300, 600, 900, 1200, 1500, 1800, 2100, 2400]


@pytest.mark.unit
def test_a_schedule_that_is_not_a_multiple_of_the_records_is_refused() -> None:
    records = _records(steps_per_epoch=1200, epochs=1, every=150)
    assert record_density.problem(records, 300) is None
    assert record_density.problem(records, 200) == "--every 200: must be a multiple of train.eval_every_steps (150)"
    none_inside = records.assign(**{record_density.EVERY_KEY: float("nan")})
    assert "no records inside epochs" in str(record_density.problem(none_inside, 300))


@pytest.mark.unit
def test_a_decision_is_read_without_its_seeds_note() -> None:
    assert record_density.decision("undecided (~10 (range 5 to 275) seeds)") == "undecided"
    assert record_density.decision("holds") == "holds"


@pytest.mark.unit
def test_bad_input_exits_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "density.md"
    assert record_density.main([str(tmp_path / "nowhere"), "--every", "300", "--out", str(out)]) == 2
    assert "no epochs.csv" in capsys.readouterr().err
    assert record_density.main([str(ARTICLE), "--every", "200", "--out", str(out)]) == 2
    assert "must be a multiple of train.eval_every_steps (150)" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.integration
def test_readings_at_kept_records_stay_and_interpolated_ones_move(tmp_path: Path) -> None:
    # results/article records batch 8 every 150 steps; at every 300 the equal-epochs readings (epoch ends)
    # and the equal-steps ones (steps 300 and 900, batch 64's epochs 2 and 6) still have their records.
    epochs = pd.read_csv(ARTICLE / "epochs.csv")
    full = record_density._copy(ARTICLE, tmp_path / "full", None)
    thin = record_density._copy(ARTICLE, tmp_path / "thin", record_density.thinned(epochs, 300))
    inside = epochs["epoch"] % 1 != 0
    assert len(pd.read_csv(thin / "epochs.csv")) == (~inside).sum() + (inside & (epochs["step"] % 300 == 0)).sum()
    from sweep.report import build

    build([full])
    build([thin])
    found = record_density.shifts(full, thin)
    exact = found[found["reading"].isin(["equal epochs", "equal steps"])]
    interpolated = found[found["reading"].isin(["equal fit", "equal time"])]
    assert len(exact) and (exact["shift"] == 0).all() and not exact["decided"].any()
    assert len(interpolated) and (interpolated["shift"] > 0).any() and interpolated["shift"].notna().all()
    moved = record_density.compare(full, thin, 300, 90, len(epochs))
    assert moved.shifted == (found["shift"] > 0).sum() and moved.lost == 0
    assert 0 < moved.target_largest < float("inf")  # batch 8's steps to the higher targets move too
    assert moved.largest == found["shift"].max() and moved.largest_at.split(":")[0].split(" ")[1:3] in (
        ["equal", "fit"],
        ["equal", "time"],
    )


@pytest.mark.unit
def test_a_shift_is_a_share_of_the_half_width_and_a_changed_seeds_note_is_no_changed_decision(tmp_path: Path) -> None:
    keys = {"lr": "0.001", "batchnorm": "raw", "check": "gap at batch 8, epoch 2"}
    full = [
        {"claim": "C1", "reading": "equal fit", "mean": 0.10, "ci_low": 0.0, "ci_high": 0.2, "outcome": "holds"},
        {
            "claim": "C1",
            "reading": "equal time",
            "mean": 0.10,
            "ci_low": 0.0,
            "ci_high": 0.4,
            "outcome": "undecided (~10 seeds)",
        },
        {"claim": "C7", "reading": "equal time", "mean": 0.10, "ci_low": 0.0, "ci_high": 0.4, "outcome": "fails"},
    ]
    thin = [
        {**full[0], "mean": 0.15, "outcome": "undecided (~4 seeds)"},  # moved half its half-width, decision changed
        {**full[1], "mean": 0.05, "outcome": "undecided (~14 seeds)"},  # a quarter; the same decision
    ]  # C7's reading cannot be made from the fewer records
    for folder, rows in (("full", full), ("thin", thin)):
        (tmp_path / folder / "tables").mkdir(parents=True)
        pd.DataFrame([{**keys, **row} for row in rows]).to_csv(tmp_path / folder / "tables" / "readings.csv")
    found = record_density.shifts(tmp_path / "full", tmp_path / "thin")
    assert found["shift"].tolist()[:2] == pytest.approx([0.5, 0.25]) and pd.isna(found["shift"].tolist()[2])
    assert found["decided"].tolist() == [True, False, True]
