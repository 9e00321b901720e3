"""The report's parts on their own: claims and attribution arms as data, grid files without the disk,
the document renderers, and runs kept from an older results folder.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO

from sweep import analysis as an
from sweep import vocab
from sweep.claims import attribution, comparable, maps
from sweep.claims.findings import Part
from sweep.claims.registry import CLAIMS, STEPS_DIFFER, TUNED_FIRST, by_id, causes, the, thresholds
from sweep.report.background import background
from sweep.report.document import Doc, Marked, to_html, to_markdown
from sweep.report.sections import assemble as sections
from sweep.report.sections import steps

pytestmark = pytest.mark.unit

FIXTURES = REPO / "tests" / "fixtures"
PARTS = tuple(Part)


def test_claims_are_data_with_their_thresholds_in_their_words() -> None:
    assert [c.id for c in CLAIMS] == [f"C{i}" for i in range(1, len(CLAIMS) + 1)]  # numbered in order, none twice
    for claim in CLAIMS:
        assert claim.quote and claim.experiments.startswith("experiments/") and claim.needs.axes
        for threshold in claim.thresholds:  # a threshold the check uses is the one the report states
            shown = f"{threshold.value:.0%}" if "{:.0%}" in threshold.wording else f"{threshold.value:g}"
            assert shown in claim.test and shown in threshold.words(), (claim.id, threshold)
    assert [t.words() for t in thresholds()][:2] == [
        "the post's size at batch 64 = gap > 0.5 (its 80% - 6% = 0.74)",
        "close = |gap| < 0.1",
    ]


def test_the_answer_finds_claims_by_their_part_not_their_id() -> None:
    """Every claim has a part in the answer; the answer's one-claim parts are one claim each; every cause
    is named; the claims read at tuned lrs and at equal steps come from the claims' data.
    """
    assert all(claim.part in PARTS for claim in CLAIMS)
    for part in (Part.PICTURE, Part.ADVICE, Part.SCALING, Part.SPEED, Part.REPLICAS):
        assert sum(claim.part == part for claim in CLAIMS) == 1, part
    assert [(c.id, c.cause) for c in causes()] == [
        ("C2", "class imbalance"),
        ("C3", "unshuffled data"),
        ("C4", "mismatched preprocessing"),
        ("C5", "a model too large"),
    ]
    assert (the(Part.PICTURE).id, the(Part.ADVICE).id, the(Part.SCALING).id) == ("C1", "C8", "C7")
    assert TUNED_FIRST == ("C6", "C7", "C8") and STEPS_DIFFER == ("C1", "C5", "C7", "C8")


def test_a_claims_named_values_come_from_its_data() -> None:
    summary = an.run_summary(an.load([FIXTURES / "fx_bs"]).epochs)
    c1 = by_id("C1")
    assert [c.label for c in c1.evaluate(summary).size] == ["gap at batch 64, epoch 2", "gap at batch 8, epoch 2"]
    assert [c.label for c in c1.evaluate(summary).checks] == ["gap, batch 64 - 8, epoch 2 (paired)"]
    moved = dataclasses.replace(c1, needs=dataclasses.replace(c1.needs, values=(16, 64)))
    assert [c.label for c in moved.evaluate(summary).size] == ["gap at batch 64, epoch 2", "gap at batch 16, epoch 2"]


@pytest.mark.parametrize("recorded", ["no column", "empty cells"])
def test_the_batchnorm_momentum_of_runs_without_one_is_the_control_default(recorded: str) -> None:
    summary = an.run_summary(an.load([FIXTURES / "fx_bs"]).epochs)
    summary = (
        summary.drop(columns="model.bn_momentum")
        if recorded == "no column"
        else summary.assign(**{"model.bn_momentum": float("nan")})
    )
    (note,) = by_id("C1").evaluate(summary).notes
    # batch 64 has taken 2 x 24 = 48 steps by epoch 2
    assert f"with momentum {an.CONTROL_DEFAULTS['model.bn_momentum']:g} " in note and "0.99^48 = 0.62" in note


def test_the_shipped_grid_files_are_named_without_reading_the_disk() -> None:
    shipped = {f"experiments/{p.name}" for p in (REPO / "experiments").glob("*.yaml")}
    assert shipped == sections.SHIPPED_GRIDS
    assert sections.grid_file("article") == "experiments/article.yaml"
    assert sections.grid_file("lr_search") == "experiments/lr_search.yaml"
    assert sections.grid_file("fx_bs") == "grid file not in experiments/"


def test_an_arm_is_read_by_its_fields_not_its_label(monkeypatch: pytest.MonkeyPatch) -> None:
    """Renamed, the equal-steps arm is still read at batch 8's epoch-2 step count (2 x 192 = 384 steps)."""
    renamed = tuple(dataclasses.replace(m, label=f"(x) arm {i}") for i, m in enumerate(attribution.CONTROLS))
    monkeypatch.setattr(attribution, "CONTROLS", renamed)
    att = attribution.attribution(an.load([FIXTURES / "fx_controls"]).epochs)
    assert att is not None
    steps = next(a for a in att.arms if a.mechanism.at_equal_steps)
    assert steps.label.startswith("(x) arm 3: train.budget=steps") and steps.read_at.startswith("step 384")
    assert all(a.read_at == "epoch 2" for a in att.arms if not a.mechanism.at_equal_steps)
    assert att.arms[1].mechanism.gap == vocab.EVAL_GAP and att.arms[1].val_last.n == 0  # (a): the default runs


def test_markdown_and_html_render_the_same_blocks(tmp_path: Path) -> None:
    doc = Doc()
    doc.h(2, "C1: supported")
    doc.p("Use `--out` <here>.")
    doc.table(("a|b", "c"), [("1", "x\ny"), (Marked("supported (sequential)", "supported"), "supported")])
    md = to_markdown(doc, tmp_path)
    assert md.splitlines() == [
        "## C1: supported",
        "",
        "Use `--out` <here>.",
        "",
        "| a\\|b | c |",
        "|---|---|",
        "| 1 | x y |",
        "| supported (sequential) | supported |",
    ]
    page = to_html(doc)
    # a verdict is coloured where it is marked as one, never found by its words
    assert '<td><span class="supported">supported</span> (sequential)</td><td>supported</td>' in page
    assert "<h2>C1: supported</h2>" in page
    assert "<p>Use <code>--out</code> &lt;here&gt;.</p>" in page
    assert "<tr><th>a|b</th><th>c</th></tr>" in page and "<script" not in page


def _with_columns(source: Path, folder: Path, keep: str | None = None, **columns: object) -> None:
    """A copy of source (only the runs whose id contains `keep`, when given) with extra setting columns."""
    folder.mkdir()
    for name in (vocab.RUNS_CSV, vocab.EPOCHS_CSV):
        table = pd.read_csv(source / name)
        table = table[table[vocab.RUN_ID].str.contains(keep)] if keep else table
        table.assign(**columns).to_csv(folder / name, index=False)


def test_a_run_kept_from_an_older_folder_pairs_with_newer_runs(tmp_path: Path) -> None:
    """The older folder has no control columns (written before they existed); the newer one has them at
    their defaults. The 1-device runs are kept from the older folder and must still pair with 2 replicas.
    """
    _with_columns(FIXTURES / "fx_gpus", tmp_path / "old", keep="g1-")
    _with_columns(
        FIXTURES / "fx_gpus",
        tmp_path / "new",
        **{"train.lr_scaling": "none", "train.budget": "epochs", "train.warmup_epochs": 0.0},
    )
    results = an.load([tmp_path / "old", tmp_path / "new"])
    ones = results.epochs[results.epochs[an.GPUS] == 1]
    assert set(ones[an.SOURCE]) == {str(tmp_path / "old")}
    finding = by_id("C9").evaluate(an.run_summary(results.epochs))
    assert finding is not None and [c.estimate.n for c in finding.checks] == [2]


def test_background_work_returns_its_value_and_raises_its_error_in_the_caller() -> None:
    """The report draws its figures in a forked child (sweep.report.background): what the child returns or
    raises reaches the parent unchanged.
    """
    with background(lambda: {"figures": [Path("a.png")], "title": "Does it fork?"}) as pending:
        assert pending.result() == {"figures": [Path("a.png")], "title": "Does it fork?"}
    with pytest.raises(ValueError, match="no such batch size: 3"), background(_fails) as pending:
        pending.result()


def _fails() -> None:
    raise ValueError("no such batch size: 3")


@pytest.mark.parametrize(
    "name, written, first",
    [
        ("maps.csv", lambda: maps.table([]), ["claim", "source", "check"]),
        ("readings.csv", lambda: comparable.table([]), ["claim", "lr", "reading"]),
        ("steps_to_target.csv", lambda: steps.steps_table([]), ["results", "lr", "seeds"]),
        ("scaling_fit.csv", lambda: steps.fit_table([]), ["results", "lr", "seeds"]),
    ],
)
def test_a_table_with_no_rows_is_still_a_table(tmp_path: Path, name: str, written, first: list[str]) -> None:
    """A report whose results have no map, reading or curve writes the table's header: pandas reads it as a table
    with no rows (an empty file is an error to pandas.read_csv).
    """
    path = tmp_path / name
    written().to_csv(path, index=False)
    table = pd.read_csv(path)
    assert table.empty and list(table.columns)[:3] == first


def test_a_grid_away_from_the_defaults_still_answers_its_claim_and_says_where() -> None:
    """A user's grid compares batch 8 and 64 at BatchNorm momentum 0.999 and lr 0.003 only: no group sits at the
    controls' defaults, so the group that compares the claim's values answers it, and the verdict names both.
    """
    summary = an.run_summary(an.load([FIXTURES / "fx_bs"]).epochs)
    summary = summary[summary[an.BATCH_SIZE].isin([8, 64])].assign(**{"model.bn_momentum": 0.999, "train.lr": 0.003})
    finding = by_id("C1").evaluate(summary)
    assert finding is not None and finding.checks[0].estimate.n == 3
    assert "bn_momentum=0.999" in finding.tested_at and "lr=0.003" in finding.tested_at
    at_default = summary.assign(**{"model.bn_momentum": 0.99})
    both = pd.concat([summary, at_default.assign(run_id=at_default["run_id"] + "-d")])
    chosen = by_id("C1").evaluate(both)
    assert chosen is not None and "bn_momentum=0.999" not in chosen.tested_at  # the defaults' group first
