"""p-values, Holm's correction and the verdict rule after it, and seeds for 80% power (issue 13, statistics)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import Built
from scipy import stats

from sweep import analysis as an
from sweep.analysis import power
from sweep.analysis.estimates import Check, Estimate, estimate, holm
from sweep.analysis.outcome import Outcome
from sweep.claims import family
from sweep.claims.findings import Finding, Rule
from sweep.claims.registry import by_id
from sweep.claims.verdict import verdict_text

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"


def interval_rule(check: Check) -> Outcome:
    """The rule before p-values: the whole 95% interval inside (holds) or outside (fails) the region."""
    e, low, high = check.estimate, check.low, check.high
    if e.low > low and e.high < high:
        return Outcome.HOLDS
    if e.high <= low or e.low >= high:
        return Outcome.FAILS
    return Outcome.UNDECIDED


@pytest.mark.unit
def test_p_value_is_the_t_test_of_the_interval_and_decides_as_the_interval_does() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        values = rng.normal(rng.uniform(-0.3, 0.3), rng.uniform(0.01, 0.2), size=int(rng.integers(2, 8)))
        e = estimate(values)
        for low, high in ((0.05, math.inf), (-math.inf, -0.05), (-0.1, 0.1)):
            check = Check("x", e, low, high)
            p, side = check.p_value()
            assert check.outcome() == interval_rule(check), (values, low, high, p)
            if math.isinf(high):  # one bound: scipy's two-sided one-sample (= paired) t-test at the bound
                assert p == pytest.approx(stats.ttest_1samp(values, low).pvalue)
                assert side is (Outcome.HOLDS if e.mean > low else Outcome.FAILS)


@pytest.mark.unit
def test_a_band_holds_by_tost() -> None:
    values = [0.004, -0.006, 0.001, 0.003]
    check = Check("x", estimate(values), -0.02, 0.02)
    above = stats.ttest_1samp(values, -0.02, alternative="greater").pvalue
    below = stats.ttest_1samp(values, 0.02, alternative="less").pvalue
    p, side = check.p_value()
    assert side is Outcome.HOLDS and p == pytest.approx(2 * max(above, below))


@pytest.mark.unit
def test_holm_by_hand() -> None:
    # sorted 0.01, 0.03, 0.04 times 3, 2, 1 -> 0.03, 0.06, 0.04, made monotone -> 0.06
    assert holm([0.01, 0.04, 0.03, math.nan])[:3] == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(holm([0.01, math.nan])[1]) and holm([0.01, math.nan])[0] == pytest.approx(0.01)
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])


def _finding(*means: float, rule: str = "all") -> Finding:
    """Checks "> 0" on 3 seeds with sd 0.01: means far from 0 are decided alone."""
    checks = tuple(Check(f"c{i}", estimate([m - 0.01, m, m + 0.01]), low=0.0) for i, m in enumerate(means))
    return Finding(checks, "constructed", rule=rule)


@pytest.mark.unit
def test_a_check_decided_alone_is_undecided_after_holm() -> None:
    """p = 0.049 holds on its own; 13 checks in the family make it undecided, and the claim inconclusive."""
    claim = by_id("C1")
    decided = _finding(0.025)  # t = 4.33 at 2 df: p = 0.049
    assert decided.checks[0].p_value()[0] < 0.05 and decided.verdict == "supported"
    others = [(claim, _finding(0.001, 0.002)) for _ in range(6)]  # 12 more checks, none near deciding
    after = family.corrected([(claim, decided), *others])
    (_, fixed), *_ = after
    assert fixed is not None and fixed.checks[0].family == 13
    assert fixed.checks[0].p_holm == pytest.approx(13 * decided.checks[0].p_value()[0])
    assert fixed.verdict == "inconclusive" and fixed.checks[0].uncorrected() is Outcome.HOLDS
    # one strongly failing check contradicts a claim after correction, a weakly failing one does not
    strong = family.corrected([(claim, _finding(-1.0, 0.5)), *others])[0][1]
    weak = family.corrected([(claim, _finding(-0.025, 0.5)), *others])[0][1]
    assert strong is not None and strong.verdict == "contradicted"
    assert weak is not None and weak.checks[0].uncorrected() is Outcome.FAILS and weak.verdict == "inconclusive"


@pytest.mark.unit
def test_c4_says_its_any_of_rule_in_the_verdict() -> None:
    c4 = by_id("C4")
    one_holds = Finding(
        (
            Check("a", estimate([-0.5, -0.51, -0.49]), high=-0.1),
            Check("b", estimate([0.0, 0.1, -0.1]), high=-0.1),
        ),
        "constructed",
        rule=Rule.ANY,
    )
    assert one_holds.verdict == "supported"
    assert verdict_text(c4, one_holds).startswith("supported (any-of rule: supported when 1 of its 2 checks holds")


@pytest.mark.unit
def test_power_matches_the_textbook_sample_sizes() -> None:
    # one-sample / paired t-test, two-sided 0.05, 80% power: d = 0.5 -> 34, d = 1 -> 10 (G*Power)
    assert power.seeds_for_power((0.5,), 1.0, 0.05) == 34
    assert power.seeds_for_power((1.0,), 1.0, 0.05) == 10
    # chi-square 95% interval of an sd from 3 values: sqrt(2 / 7.378), sqrt(2 / 0.0506)
    assert power.sd_interval(1.0, 3) == pytest.approx((0.52066, 6.28473), rel=1e-4)


@pytest.mark.unit
def test_seeds_needed_plans_at_the_family_level_with_the_sds_range() -> None:
    check = Check("x", Estimate(0.25, 0.1, 3, 0.0, 0.5), low=0.2)  # d = 0.5
    alone = power.seeds_needed(check)
    assert (alone.n, alone.alpha) == (34, 0.05)
    assert alone.low is not None and alone.low < alone.n and alone.high is None  # sd x 6.3 -> > 1000 seeds
    in_family = power.seeds_needed(Check("x", Estimate(0.25, 0.1, 3, 0.0, 0.5), low=0.2, family=10))
    assert in_family.alpha == pytest.approx(0.005) and in_family.n == power.seeds_for_power((0.05,), 0.1, 0.005)
    assert in_family.n is not None and in_family.n > 34
    # a band with the mean inside must pass both sides (TOST): more seeds than the nearer side alone
    band = Check("x", Estimate(0.005, 0.02, 3, -0.05, 0.06), low=-0.02, high=0.02)
    assert power.distances(band) == pytest.approx((0.025, 0.015))
    assert power.seeds_needed(band).n > power.seeds_for_power((0.015,), 0.02, 0.05)


@pytest.fixture(scope="module")
def claims_csv(fixtures_report: Built) -> pd.DataFrame:
    return pd.read_csv(fixtures_report.out / "tables" / "claims.csv")


def holm_by_hand(raw: np.ndarray) -> np.ndarray:
    """Holm's adjustment written out, not sweep.analysis.estimates.holm: the i-th smallest of m raw p-values
    times m - i, capped at 1, then made monotone (a running maximum in rank order).
    """
    order = np.argsort(raw, kind="stable")
    adjusted = np.empty(len(raw))
    adjusted[order] = np.maximum.accumulate(np.minimum(1.0, (len(raw) - np.arange(len(raw))) * raw[order]))
    return adjusted


@pytest.mark.integration
def test_claims_csv_holds_raw_and_holm_p_values(claims_csv: pd.DataFrame) -> None:
    checks = claims_csv.dropna(subset=["check"])
    assert len(checks) == 14 and (checks["family"] == 14).all()  # C3's runs near chance are read: 2 checks
    raw = checks["p_value"].to_numpy()
    assert checks["p_holm"].to_numpy() == pytest.approx(holm_by_hand(raw))
    assert checks["p_holm"].min() == pytest.approx(14 * raw.min())  # the smallest is multiplied by the family size
    decided = checks["p_holm"] < 0.05
    assert (checks.loc[~decided, "outcome"] == "undecided").all()
    assert (checks.loc[decided, "outcome"] == checks.loc[decided, "p_side"]).all()
    # uncorrected, p < 0.05 is the interval rule
    raw_decided = checks["p_value"] < 0.05
    assert (checks.loc[raw_decided, "outcome_uncorrected"] == checks.loc[raw_decided, "p_side"]).all()
    undecided = checks[checks["outcome"] == "undecided"]
    assert (undecided["seeds_needed_low"] <= undecided["seeds_needed"]).all()


@pytest.mark.unit
def test_c2_p_value_is_the_paired_t_test_on_the_raw_rows() -> None:
    summary = an.run_summary(an.load([FIXTURES / "fx_causes"]).epochs)
    finding = by_id("C2").evaluate(summary)
    assert finding is not None
    increase = finding.checks[1]
    raw = pd.read_csv(FIXTURES / "fx_causes" / "epochs.csv")
    at2 = raw[(raw["epoch"] == 2) & raw["data.shuffle"] & (raw["data.preprocess_mismatch"] == "none")]
    at2 = at2[(at2["model.width"] == 1.0) & (at2["data.samples_per_class"] == 240)]
    by_seed = at2.pivot_table(index="seed", columns="data.imbalance", values="gap")
    expected = stats.ttest_rel(by_seed[0.95], by_seed[0.0] + 0.05).pvalue
    assert increase.p_value()[0] == pytest.approx(expected)


@pytest.mark.unit
def test_seeds_figure_has_a_row_per_undecided_check_and_is_not_redrawn(tmp_path: Path) -> None:
    from sweep import claims
    from sweep.report.figures import seeds as seeds_figure

    summary = an.run_summary(an.load([FIXTURES / "fx_bs", FIXTURES / "fx_causes"]).epochs)
    findings = claims.evaluate(summary)
    undecided = [c for _, f in findings if f for c in f.undecided()]
    rows = seeds_figure.rows(findings)
    assert len(rows) == len(undecided) > 0
    assert [r[2] for r in rows] == [power.seeds_needed(c) for c in undecided]
    # independently with scipy.stats: the smallest n whose one-sided t-test at (0.05 / 13) / 2 has 80% power
    # when the true mean lies where the observed one does (13 checks in the family: Bonferroni's level)
    n = np.arange(2, 1001)

    def by_scipy(check: Check, alpha: float) -> int | None:
        e = check.estimate
        distance = min(abs(e.mean - b) for b in (check.low, check.high) if math.isfinite(b))
        reached = 1 - stats.nct.cdf(stats.t.ppf(1 - alpha / 2, n - 1), n - 1, distance * np.sqrt(n) / e.sd) >= 0.8
        return int(n[reached][0]) if reached.any() else None

    assert {c.family for c in undecided} == {13}
    assert [(r[2].n, r[2].alpha) for r in rows] == [
        (by_scipy(c, 0.05 / 13), pytest.approx(0.05 / 13)) for c in undecided
    ]
    assert (rows[0][2].n, by_scipy(undecided[0], 0.05)) == (6, 4)  # C1 at batch 64: 6 seeds in the family, 4 alone
    drawn = seeds_figure.draw(findings, tmp_path)
    assert drawn is not None and drawn.png.is_file() and drawn.title.startswith("Seeds to decide at 80% power: ")
    before = drawn.png.stat().st_mtime_ns
    assert seeds_figure.draw(findings, tmp_path) is not None and drawn.png.stat().st_mtime_ns == before
    decided = [(c, Finding(f.checks[:0], "none")) for c, f in findings if f]
    assert seeds_figure.draw(decided, tmp_path / "none") is None


@pytest.mark.unit
def test_c8_chooses_on_the_other_seeds_and_tests_on_the_held_out_one() -> None:
    """fx_bs (batch 8, 16, 64) with final val_acc set by hand. Batch 8 wins on average only through seed 0;
    each held-out seed is tested with the winner of the other two, so 8's lucky seed never picks itself.
    """
    summary = an.run_summary(an.load([FIXTURES / "fx_bs"]).epochs)
    metric = an.column("val_acc", "last")
    values = {8: [0.91, 0.2, 0.2], 16: [0.3, 0.5, 0.5], 64: [0.4, 0.4, 0.4]}
    for bs, per_seed in values.items():
        rows = summary[an.BATCH_SIZE] == bs
        summary.loc[rows, metric] = summary.loc[rows, "seed"].map(dict(enumerate(per_seed)))
    finding = by_id("C8").evaluate(summary)
    assert finding is not None
    # held out 0: 16 wins on seeds 1, 2 -> 0.3 - 0.4; held out 1 or 2: 8 wins on (0.91 + 0.2) / 2 -> 0.2 - 0.4
    (check,) = finding.checks
    assert check.estimate.n == 3 and check.estimate.mean == pytest.approx((-0.1 - 0.2 - 0.2) / 3)
    assert "leave one seed out" in check.label
    assert "seed 0: 16 vs 64; seed 1: 8 vs 64; seed 2: 8 vs 64" in finding.notes[0]
    # chosen on the same seeds, batch 8 (mean 0.437) would look better than it tests
    in_sample = {e.label: e.estimate for e in finding.evidence}[
        "chosen and tested on the same seeds (8 - 64; favours the winner)"
    ]
    assert in_sample.mean == pytest.approx((0.51 - 0.2 - 0.2) / 3)


@pytest.mark.unit
def test_epoch_time_spread_leaves_out_epoch_one() -> None:
    """...and the records inside epochs (every 36 steps in fx_bs), which time only part of one."""
    raw = pd.read_csv(FIXTURES / "fx_bs" / "epochs.csv")
    summary = an.run_summary(an.load([FIXTURES / "fx_bs"]).epochs).set_index("run_id")
    for run_id, rows in raw.groupby("run_id"):
        later = rows[(rows["epoch"] > 1) & (rows["epoch"] % 1 == 0)]["epoch_seconds"]
        assert len(later) == 2  # epochs 2 and 3
        spread = summary.loc[run_id, ["epoch_seconds_min", "epoch_seconds_median", "epoch_seconds_max"]]
        assert spread.tolist() == pytest.approx([later.min(), later.median(), later.max()])


@pytest.mark.integration
def test_a_run_timed_in_two_folders_names_both_timings(tmp_path: Path) -> None:
    """The same runs in two folders, the second timed 3x slower: C6 reads the first folder's and names both."""
    from sweep import report

    first, second = tmp_path / "first", tmp_path / "second"
    for folder, factor in ((first, 1.0), (second, 3.0)):
        folder.mkdir()
        pd.read_csv(FIXTURES / "fx_bs" / "runs.csv").to_csv(folder / "runs.csv", index=False)
        epochs = pd.read_csv(FIXTURES / "fx_bs" / "epochs.csv")
        epochs["epoch_seconds"] *= factor
        epochs.to_csv(folder / "epochs.csv", index=False)
    written = report.build([first, second], tmp_path / "out")
    c6 = dict((c.id, f) for c, f in written.findings)["C6"]
    assert c6 is not None
    raw = pd.read_csv(FIXTURES / "fx_bs" / "epochs.csv")
    raw = raw[(raw["epoch"] > 1) & (raw["epoch"] % 1 == 0)]  # whole epochs after the first
    medians = raw.groupby(["train.batch_size", "seed"])["epoch_seconds"].median()
    expected = (medians[64] / medians[8] - 1).mean()
    assert c6.checks[0].estimate.mean == pytest.approx(expected)
    (copies,) = [n for n in c6.notes if "timed more than once" in n]
    assert copies.startswith("9 of these runs were timed more than once")
    run = raw.groupby("run_id")["epoch_seconds"].median()
    one = "bs64-s0-39e1fd3c"
    assert f"{one}: {run[one]:.2f} s ({first}, used); {3 * run[one]:.2f} s ({second})" in copies
    spread = [n for n in c6.notes if "epoch 1 includes graph tracing and is left out" in n]
    assert spread and "fastest / median of the runs' medians / slowest" in spread[0]


@pytest.mark.integration
def test_c6_says_which_runs_trained_packed(tmp_path: Path) -> None:
    """A packed run's epoch time is its share of its pack's: C6 names those runs, per batch size and pack size."""
    from sweep import report

    alone, packed = tmp_path / "alone", tmp_path / "packed"
    for folder in (alone, packed):
        folder.mkdir()
        runs = pd.read_csv(FIXTURES / "fx_bs" / "runs.csv")
        if folder == packed:  # batch 8 in a pack of 3, batch 16 two in a pack of 2 and one alone, batch 64 alone
            runs["pack_size"] = runs["train.batch_size"].map({8: 3, 16: 2, 64: 1})
            runs.loc[runs["run_id"] == "bs16-s2-23c59deb", "pack_size"] = 1
        runs.to_csv(folder / "runs.csv", index=False)
        pd.read_csv(FIXTURES / "fx_bs" / "epochs.csv").to_csv(folder / "epochs.csv", index=False)
    notes = {}
    for folder in (alone, packed):
        written = report.build([folder], tmp_path / f"out-{folder.name}")
        c6 = dict((c.id, f) for c, f in written.findings)["C6"]
        assert c6 is not None
        notes[folder.name] = [n for n in c6.notes if "trained packed" in n]
    assert notes["alone"] == []  # results without pack_size (written before packing existed) ran alone
    (note,) = notes["packed"]
    assert note.startswith(
        "5 of the 9 runs compared trained packed (batch 8: 3 of 3 run(s), pack size 3; "
        "batch 16: 2 of 3 run(s), pack size 2): each one's epoch time is its share"
    )
    assert note in (tmp_path / "out-packed" / "report.md").read_text(encoding="utf-8")


@pytest.mark.unit
def test_c6_reads_the_median_epoch_time_not_the_mean() -> None:
    summary = an.run_summary(an.load([FIXTURES / "fx_bs"]).epochs)
    summary["epoch_seconds"] = 1.0  # a mean that says "no faster": the check must not read it
    by = summary.set_index([an.BATCH_SIZE, "seed"])["epoch_seconds_median"]
    finding = by_id("C6").evaluate(summary)
    assert finding is not None and finding.checks[0].label.startswith("median epoch time")
    assert finding.checks[0].estimate.mean == pytest.approx((by[64] / by[8] - 1).mean())


COMMITTED = [REPO / "results" / n for n in ("article", "batch_sizes", "causes", "controls", "gpus", "lr_search")]


@pytest.mark.integration
@pytest.mark.skipif(not all((f / "epochs.csv").is_file() for f in COMMITTED), reason="committed results missing")
def test_the_committed_results_report(tmp_path: Path) -> None:
    """The combined reference report: every check in the family, verdicts that follow the Holm-adjusted
    p-values, seeds to decide for every undecided check, C8 out of sample, C6's twice-timed runs named.
    """
    from sweep import report

    written = report.build(COMMITTED, tmp_path)
    checks = pd.read_csv(tmp_path / "tables" / "claims.csv").dropna(subset=["check"])
    tested = checks[checks["n"] >= 2]  # a check with fewer seeds has no p-value
    assert (checks["family"] == len(tested)).all() and tested["p_value"].notna().all()
    assert tested["p_holm"].to_numpy() == pytest.approx(holm_by_hand(tested["p_value"].to_numpy()))
    for claim, finding in written.findings:
        assert finding is not None
        rows = checks[checks["claim"] == claim.id]
        holds, fails = rows["outcome"] == "holds", rows["outcome"] == "fails"
        expected = (
            ("supported" if holds.any() else "contradicted" if fails.all() else "inconclusive")
            if claim.id == "C4"
            else ("contradicted" if fails.any() else "supported" if holds.all() else "inconclusive")
        )
        assert finding.verdict == expected, claim.id
    undecided = checks[checks["outcome"] == "undecided"]
    # seeds to decide for every undecided check with an interval: a number, or none where over 1000 seeds
    # (C5's width effect, about 0.001 recalibrated) and the verdict says "> 1000"
    planned = undecided[undecided["n"] >= 2]
    assert (planned["seeds_needed_low"].notna() | planned["seeds_needed"].isna()).all()
    for claim in planned.loc[planned["seeds_needed"].isna(), "claim"]:
        assert "> 1000" in dict(written.verdicts)[claim], claim
    assert (tmp_path / "figures" / "claims-seeds_to_decide.png").is_file() == (len(undecided) > 0)
    md = written.markdown.read_text()
    assert f"Holm's correction runs over a family of {len(tested)} checks" in md
    assert "| C4 | train and validation preprocessed differently give low val_acc | " in md
    # the verdict table: claim, the post, the estimates, then the verdict
    assert re.search(r"\| C4 \| [^|]+ \| [^|]+ \| [\w ]+ \(any-of rule: supported when 1 of its \d checks holds", md)
    assert "leave one seed out" in checks[checks["claim"] == "C8"]["check"].item()
    # C6 names runs timed in two folders exactly when the committed folders share runs (they no longer do
    # since the batch_sizes rerun added records; the twice-timed test above covers the words)
    copies = an.timing_copies(an.load(COMMITTED))
    assert bool(re.search(r"\d+ of these runs were timed more than once", md)) == (len(copies) > 0)
