"""Condition maps (sweep.claims.maps): a claim's checks at every setting, each described by its own
interval (no decision), the settings whose compared runs stay at chance (prevents learning) or whose
reference did not learn (cannot answer), and the words that say where it shows;
the reproduction ranking of the post's numbers; the generated answer; the settings a verdict names.
On constructed run summary tables, then a report built from a fixture.
"""

from __future__ import annotations

from itertools import product
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pytest

from sweep import analysis as an
from sweep import report
from sweep.analysis.chance import Answer
from sweep.analysis.estimates import fmt_estimate
from sweep.analysis.outcome import Outcome
from sweep.claims import maps, reproduction
from sweep.claims.registry import by_id, evaluate
from sweep.report.sections import answer
from sweep.report.sections import maps as map_section

if TYPE_CHECKING:
    from sweep.report import Written

GAP2 = an.column("gap", "epoch2")
TRAIN2, VAL2 = an.column("train_acc", "epoch2"), an.column("val_acc", "epoch2")
FILLER = {an.column(m, w): 0.0 for m in an.SNAPSHOT_METRICS for w in ("epoch2", "last")}
FILLER |= {"epoch_seconds": 1.0, "epoch_seconds_median": 1.0, "samples_per_second": 1.0}
FIXTURES = Path(__file__).parent / "fixtures"

TIGHT_HIGH, TIGHT_LOW, NOISY = [0.60, 0.61, 0.62], [0.10, 0.11, 0.12], [0.05, 0.60, 0.30]
FLAT = [0.00, 0.01, 0.02]


def table(
    cells: dict[tuple[Any, ...], dict[Any, list[float]]], keys: tuple[str, ...], axis: str, **fixed: Any
) -> pd.DataFrame:
    """One run per seed for every cell (values of `keys`) and value of `axis`, with its epoch-2 gap."""
    rows = []
    for cell, by_value in cells.items():
        for value, gaps in by_value.items():
            for seed, gap in enumerate(gaps):
                settings = dict(zip(keys, cell, strict=True)) | {axis: value} | fixed
                rows.append({"run_id": f"{settings}-s{seed}", "seed": seed, **settings, **FILLER, GAP2: gap})
    return pd.DataFrame(rows).sample(frac=1, random_state=1).reset_index(drop=True)


C3_KEYS = ("train.batch_size", "model.batchnorm")


def c3_map_table() -> pd.DataFrame:
    """BatchNorm off: the cause raises the gap clearly (holds); batch 8 with BatchNorm: no gap at all
    (fails); batch 32 with BatchNorm: too noisy to say (undecided).
    """
    return table(
        {
            (8, False): {True: TIGHT_LOW, False: TIGHT_HIGH},
            (32, False): {True: TIGHT_LOW, False: [0.70, 0.71, 0.72]},
            (8, True): {True: FLAT, False: FLAT},
            (32, True): {True: TIGHT_LOW, False: NOISY},
        },
        C3_KEYS,
        "data.shuffle",
    )


@pytest.mark.unit
def test_c3_map_says_where_the_claim_holds_fails_and_is_undecided() -> None:
    (found,) = maps.maps(c3_map_table())
    assert found.claim.id == "C3" and found.keys == C3_KEYS
    outcomes = {c.label(): c.outcome for c in found.cells}
    assert outcomes == {
        "batch_size=8, batchnorm=False": Outcome.HOLDS,
        "batch_size=32, batchnorm=False": Outcome.HOLDS,
        "batch_size=8, batchnorm=True": Outcome.FAILS,
        "batch_size=32, batchnorm=True": Outcome.UNDECIDED,
    }
    assert found.summary() == (
        "the post's pattern shows at batchnorm=False; it does not at batch_size=8, batchnorm=True; "
        "it is unclear at batch_size=32, batchnorm=True"
    )
    assert found.counts() == "2 show it, 1 do not, 1 unclear of 4 settings"


@pytest.mark.unit
def test_each_cell_runs_the_claims_own_checks_on_its_runs_alone() -> None:
    (found,) = maps.maps(c3_map_table())
    cell = next(c for c in found.cells if c.label() == "batch_size=32, batchnorm=False")
    unshuffled, shuffled = [0.70, 0.71, 0.72], TIGHT_LOW
    means = [c.estimate.mean for c in cell.checks]
    assert means == pytest.approx([0.71, 0.71 - 0.11])
    assert [c.estimate.n for c in cell.checks] == [3, 3]
    assert len(cell.rows) == len(unshuffled) + len(shuffled)


@pytest.mark.unit
def test_a_map_corrects_nothing_and_decides_nothing() -> None:
    """Every cell is its checks' own 95% intervals: no correction over the map, every level 0.05."""
    (found,) = maps.maps(c3_map_table())
    checks = [k for c in found.cells for k in c.checks]
    assert len(checks) == 8 and all((k.level_holds, k.level_fails) == (0.05, 0.05) for k in checks)
    assert [c.outcome for c in found.cells] == [all_or_none([k.alone() for k in c.checks]) for c in found.cells]


def all_or_none(outcomes: list[Outcome]) -> Outcome:
    """A claim holds where every check holds and fails where one fails (written out, not `outcome.all_of`)."""
    if Outcome.FAILS in outcomes:
        return Outcome.FAILS
    return Outcome.HOLDS if all(o is Outcome.HOLDS for o in outcomes) else Outcome.UNDECIDED


@pytest.mark.unit
def test_a_cell_is_described_by_its_own_intervals_whatever_the_maps_size() -> None:
    """Two cells whose intervals lie beyond the threshold (p 0.02-0.04) show the pattern among 4 checks:
    corrected over the map's checks they would be undecided.
    """
    borderline = {True: [0.10, 0.10, 0.10], False: [0.295, 0.345, 0.395]}  # t = 5.0 and 6.7, 2 df
    found = maps.maps(table({(8, True): borderline, (32, True): borderline}, C3_KEYS, "data.shuffle"))[0]
    assert [c.outcome for c in found.cells] == [Outcome.HOLDS, Outcome.HOLDS]


LEARNED, CHANCE = 0.5, 1 / 120  # val_acc_last and train_eval_acc_last of a run that learned, and of one at chance


def with_accuracies(rows: pd.DataFrame, at_chance: pd.Series) -> pd.DataFrame:
    """runs.csv's counts (120 classes, 1200 validation images) and each run's last accuracies: at chance where
    `at_chance`, else learned.
    """
    accuracy = at_chance.map({True: CHANCE, False: LEARNED})
    counts = {"num_classes": 120, "val_samples": 1200, "train_samples": 4800}
    return rows.assign(
        **counts, **{an.column("val_acc", "last"): accuracy, an.column("train_eval_acc", "last"): accuracy}
    )


@pytest.mark.unit
def test_a_map_keeps_runs_at_chance_and_names_the_cells_they_make() -> None:
    """Runs at chance are in their cell's numbers. Where every unshuffled run sits at chance and the shuffled
    ones learned, the cell "prevents learning"; where the shuffled ones (the reference) sit at chance, it cannot
    answer; neither counts as showing the pattern or not.
    """
    rows = c3_map_table().assign(source="results/m", source_rank=0)
    small, bn = rows["train.batch_size"] == 8, rows["model.batchnorm"]
    (found,) = maps.maps(with_accuracies(rows, (small & bn & ~rows["data.shuffle"]) | (~small & bn)))
    cells = {c.label(): c for c in found.cells}
    prevents, blind = cells["batch_size=8, batchnorm=True"], cells["batch_size=32, batchnorm=True"]
    assert prevents.answer is Answer.PREVENTS_LEARNING and blind.answer is Answer.CANNOT_ANSWER
    assert [k.estimate.n for k in prevents.checks] == [3, 3]  # every seed at chance is in the numbers
    assert blind.outcome is Outcome.UNDECIDED
    assert found.summary() == (
        "the post's pattern shows at batchnorm=False; shuffle=False prevents learning at batch_size=8, "
        "batchnorm=True; the control did not learn (cannot answer) at batch_size=32, batchnorm=True"
    )
    assert found.counts() == (
        "2 show it, 0 do not, 0 unclear, 1 prevent learning, 1 cannot answer (control did not learn) of 4 settings"
    )
    words = maps.table([found]).groupby(["batch_size", "batchnorm"])["cell"].first().to_dict()
    assert words[(8, True)] == "prevents learning" and words[(32, True)] == "control did not learn: cannot answer"


@pytest.mark.unit
def test_the_map_reads_the_folder_with_the_most_settings() -> None:
    one = table({(16, True): {True: TIGHT_LOW, False: TIGHT_HIGH}}, C3_KEYS, "data.shuffle")
    two = c3_map_table()
    both = pd.concat([one.assign(source="results/a", source_rank=0), two.assign(source="results/b", source_rank=1)])
    (found,) = maps.maps(both)
    assert found.source == "results/b" and len(found.cells) == 4


@pytest.mark.unit
def test_cells_are_in_numeric_order_whatever_the_column_type() -> None:
    """Images per class 40, 80, 400 (numpy integers from a CSV), not 40, 400, 80."""
    rows = table(
        {(n,): {True: TIGHT_LOW, False: TIGHT_HIGH} for n in (400, 40, 80)}, ("data.samples_per_class",), "data.shuffle"
    )
    rows["data.samples_per_class"] = rows["data.samples_per_class"].astype("int64")
    (found,) = maps.maps(rows)
    assert [c.label() for c in found.cells] == ["samples_per_class=40", "samples_per_class=80", "samples_per_class=400"]


@pytest.mark.unit
def test_a_cell_whose_reference_runs_were_kept_from_another_folder_stays_in_its_map() -> None:
    """A run stored in two folders is read once, from the first: the map of the second keeps the cell
    whose shuffled runs now come from the first folder, because its unshuffled runs are its own.
    """
    two = c3_map_table().assign(source="results/map", source_rank=1)
    shared = (two["train.batch_size"] == 8) & (two["model.batchnorm"]) & (two["data.shuffle"])
    two.loc[shared, ["source", "source_rank"]] = ["results/other", 0]
    (found,) = maps.maps(two)
    assert found.source == "results/map" and len(found.cells) == 4


@pytest.mark.unit
def test_one_setting_is_no_map() -> None:
    assert maps.maps(table({(8, True): {True: TIGHT_LOW, False: TIGHT_HIGH}}, C3_KEYS, "data.shuffle")) == []


@pytest.mark.unit
def test_a_key_that_moves_with_another_is_not_named() -> None:
    """train.steps is set exactly where train.budget is steps: naming both says nothing more."""
    rows = table(
        {("epochs", None): {True: TIGHT_LOW, False: TIGHT_HIGH}, ("steps", 1440): {True: TIGHT_LOW, False: FLAT}},
        ("train.budget", "train.steps"),
        "data.shuffle",
    )
    (found,) = maps.maps(rows)
    assert found.keys == ("train.budget",)
    assert found.summary() == "the post's pattern shows at budget=epochs; it does not at budget=steps"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("chosen", "words"),
    [
        ({(8, "a"), (8, "b"), (32, "a"), (32, "b")}, "every setting mapped (x 8 or 32; y a or b)"),
        ({(8, "a"), (8, "b")}, "x=8"),
        ({(8, "a"), (32, "a"), (32, "b")}, "y=a or x=32"),
        ({(8, "b"), (32, "a")}, "(x=8, y=b) or (x=32, y=a)"),
    ],
)
def test_where_names_a_set_of_cells_by_the_fewest_settings(chosen: set, words: str) -> None:
    cells = [maps.Cell((("k.x", x), ("k.y", y)), None, None, None, pd.DataFrame()) for x, y in product([8, 32], "ab")]
    picked = [c for c in cells if tuple(v for _, v in c.conditions) in chosen]
    named = maps.where(cells, picked)
    assert named == words or set(named.split(" or ")) == set(words.split(" or "))


# --- the post's numbers


def c1_table() -> pd.DataFrame:
    """Two settings (lr) with batch 8 and 64: lr 0.01 near the post's numbers, lr 0.001 far from them."""
    rows = []
    for lr, per_bs in {
        0.01: {64: ([0.78, 0.80, 0.82], [0.05, 0.06, 0.07]), 8: ([0.55, 0.60, 0.65], [0.58, 0.60, 0.62])},
        0.001: {64: ([0.40, 0.45, 0.50], [0.20, 0.25, 0.30]), 8: ([0.50, 0.52, 0.54], [0.60, 0.62, 0.64])},
    }.items():
        for bs, (train, val) in per_bs.items():
            for seed in range(3):
                gap = train[seed] - val[seed]
                rows.append(
                    {"run_id": f"{lr}-{bs}-{seed}", "seed": seed, "train.lr": lr, "train.batch_size": bs, **FILLER}
                    | {TRAIN2: train[seed], VAL2: val[seed], GAP2: gap}
                )
    return pd.DataFrame(rows)


@pytest.mark.unit
def test_settings_are_ranked_by_their_largest_distance_from_the_posts_numbers() -> None:
    found = reproduction.candidates(c1_table())
    assert [c.label.split(";")[0] for c in found] == ["optimizer=adam, lr=0.01", "optimizer=adam, lr=0.001"]
    assert found[0].distance == pytest.approx(0.0)  # seed means 0.80, 0.06, 0.60, 0.60
    assert found[1].distance == pytest.approx(0.80 - 0.45)  # train_acc at batch 64 is the farthest
    assert found[1].farthest() == "train_acc at batch 64"
    assert found[0].covered() == 4


@pytest.mark.unit
def test_the_reproduction_section_says_whether_any_setting_comes_within_a_tenth() -> None:
    doc = report.document.Doc()
    map_section.reproduction_section(doc, reproduction.candidates(c1_table()))
    text = report.document.to_markdown(doc, Path("."))
    assert "1 of the 2 settings tested come within 0.1 of each of the post's numbers" in text
    far = [c for c in reproduction.candidates(c1_table()) if c.distance > 0.1]
    doc = report.document.Doc()
    map_section.reproduction_section(doc, far)
    assert "No setting of the 1 tested comes within 0.1" in report.document.to_markdown(doc, Path("."))


@pytest.mark.unit
def test_the_answer_quotes_the_verdicts_numbers() -> None:
    rows = c1_table()
    findings = evaluate(rows)
    c1 = dict((c.id, f) for c, f in findings)["C1"]
    text = " ".join(answer.sentences(findings, maps.maps(rows), reproduction.candidates(rows)))
    assert fmt_estimate(c1.size[0].estimate) in text and fmt_estimate(c1.size[1].estimate) in text
    assert f"at {c1.tested_at}:" in text
    assert "comes within 0.1 of all four: its largest distance is 0.00" in text


@pytest.mark.unit
def test_a_verdict_names_the_settings_it_was_tested_at() -> None:
    """Batch size, images per class, lr and epochs always; other settings only away from their defaults."""
    rows = table(
        {(50, 16): {True: TIGHT_LOW, False: TIGHT_HIGH}},
        ("data.samples_per_class", "data.image_size"),
        "data.shuffle",
        **{"train.batch_size": 32, "train.lr": 0.001, "train.epochs": 5, "model.width": 1.0},
    )
    finding = by_id("C3").evaluate(rows)
    assert finding.tested_at == (
        "optimizer=adam, lr=0.001, batch_size=32, samples_per_class=50, epochs=5, image_size=16; 3 seeds"
    )


# --- the report


@pytest.mark.integration
def test_the_report_maps_c1_over_the_fixtures_control_arms(controls_report: Written) -> None:
    md = controls_report.markdown.read_text(encoding="utf-8")
    out = controls_report.markdown.parent
    rows = pd.read_csv(out / "tables" / "maps.csv")
    cells = rows.groupby(["bn_momentum", "ghost_batch_size", "budget"], dropna=False).ngroups
    assert cells == 4 and len(rows) == 2 * cells and "family" not in rows and "p_holm" not in rows  # describes
    assert set(rows["interval"]) <= {"beyond the threshold", "short of it", "unclear"}
    assert "## Where each claim holds" in md and "### C1 over 4 settings" in md
    assert (out / "figures" / "map-C1.png").stat().st_size > 0
    verdict_row = next(line for line in md.splitlines() if line.startswith("| C1 |"))
    assert "Over 4 settings of" in verdict_row and "; at optimizer=" in verdict_row
    assert md.index("## The answer in full") < md.index("## Verdicts in full")


@pytest.mark.unit
def test_c2_maps_every_degree_of_imbalance_against_its_own_balanced_runs() -> None:
    """One cell per imbalance and per what it keeps; the imbalance is then a condition of its own."""
    rows = table(
        {
            ("total",): {0.0: TIGHT_LOW, 0.5: TIGHT_LOW, 0.95: TIGHT_HIGH},
            ("minority",): {0.0: TIGHT_LOW, 0.5: FLAT, 0.95: TIGHT_HIGH},
        },
        ("data.imbalance_keeps",),
        "data.imbalance",
    )
    (found,) = maps.maps(rows)
    assert found.claim.id == "C2" and found.keys == ("data.imbalance_keeps", "data.imbalance")
    assert {c.label(): c.outcome for c in found.cells} == {
        "imbalance_keeps=minority, imbalance=0.5": Outcome.FAILS,
        "imbalance_keeps=minority, imbalance=0.95": Outcome.HOLDS,
        "imbalance_keeps=total, imbalance=0.5": Outcome.FAILS,
        "imbalance_keeps=total, imbalance=0.95": Outcome.HOLDS,
    }
    assert found.summary() == "the post's pattern shows at imbalance=0.95; it does not at imbalance=0.5"


@pytest.mark.unit
def test_a_setting_a_cell_does_not_use_is_shown_as_a_dash() -> None:
    """bn_momentum means nothing without BatchNorm: that cell shows '-', and no words lean on it."""
    rows = table(
        {
            (True, 0.99): {True: TIGHT_LOW, False: FLAT},
            (True, 0.999): {True: TIGHT_LOW, False: FLAT},
            (False, 0.99): {True: TIGHT_LOW, False: TIGHT_HIGH},
        },
        ("model.batchnorm", "model.bn_momentum"),
        "data.shuffle",
    )
    (found,) = maps.maps(rows)
    assert [c.label() for c in found.cells] == [
        "batchnorm=False, bn_momentum=-",
        "batchnorm=True, bn_momentum=0.99",
        "batchnorm=True, bn_momentum=0.999",
    ]
    assert found.summary() == "the post's pattern shows at batchnorm=False; it does not at batchnorm=True"


@pytest.mark.unit
def test_runs_from_before_a_toggle_existed_count_at_its_default() -> None:
    """Results written before data.imbalance_keeps existed have no such column; read beside results
    that have it, their empty cells are the default (total, the post's), so their claims are still tested.
    """
    old = table(
        {(32,): {True: TIGHT_LOW, False: TIGHT_HIGH}}, ("train.batch_size",), "data.shuffle", **{"data.imbalance": 0.0}
    )
    new = table(
        {("minority",): {0.0: TIGHT_LOW, 0.95: TIGHT_HIGH}},
        ("data.imbalance_keeps",),
        "data.imbalance",
        **{"data.shuffle": True, "train.batch_size": 32},
    )
    both = pd.concat([old, new], ignore_index=True)
    assert both["data.imbalance_keeps"].isna().sum() == len(old)
    finding = by_id("C3").evaluate(both)
    assert finding is not None and finding.checks[0].estimate.n == 3


@pytest.mark.unit
def test_every_setting_mapped_names_what_it_spans() -> None:
    """map_c3's finding: unshuffled runs stay at chance everywhere; "every setting" says over which values."""
    rows = c3_map_table().assign(source="results/m", source_rank=0)
    (found,) = maps.maps(with_accuracies(rows, ~rows["data.shuffle"]))
    assert found.summary() == (
        "shuffle=False prevents learning at every setting mapped (batch_size 8 or 32; batchnorm False or True)"
    )
