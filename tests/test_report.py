"""The claims report on committed fixtures: verdicts, flips when the data changes, files, HTML in Chromium."""

from __future__ import annotations

import contextlib
import io
import math
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import services
from conftest import REPO, TINY_GRID, Built, run_cli, write_grid

from sweep import analysis as an
from sweep import report, vocab
from sweep.analysis import selection
from sweep.analysis.outcome import Outcome
from sweep.claims.registry import by_id
from sweep.cli import main
from sweep.report import stamp

FIXTURES = REPO / "tests" / "fixtures"
FOLDERS = [FIXTURES / "fx_bs", FIXTURES / "fx_causes", FIXTURES / "fx_gpus"]
T_975_2DF = 4.302652729911275


def cli_report(*args: str | Path) -> tuple[int, str, str]:
    """`python -m sweep report ARGS` in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["report", *map(str, args)])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def combined(fixtures_report: Built) -> Path:
    """The combined report of the three fixtures (conftest builds it once per session)."""
    first = (
        "C1 (batch 64: train_acc far above val_acc at epoch 2; batch 8: both close): direction shown, size undecided"
    )
    assert fixtures_report.stdout.splitlines()[0].startswith(first)
    return fixtures_report.out


@pytest.fixture(scope="module")
def summary() -> pd.DataFrame:
    return an.run_summary(an.load(FOLDERS).epochs)


def verdicts(out: Path) -> dict[str, str]:
    claims = pd.read_csv(out / "tables" / "claims.csv")
    return claims.groupby("claim")["verdict"].first().to_dict()


@pytest.mark.integration
def test_known_verdicts_on_the_fixtures(combined: Path, summary: pd.DataFrame) -> None:
    """Each claim on its own decides as its intervals do; in the report each claim keeps its own levels: C7's
    failing check needs 0.05 / 2 there, and its recalibrated train_eval_acc does not fail at all. C3's unshuffled
    runs sit near chance and stay in its numbers: their gap is far below the shuffled one's.
    """
    alone = {c.id: f.verdict if (f := c.evaluate(summary)) else "not tested" for c in report.CLAIMS}
    assert alone == {
        # batch 64's gap above batch 8's on every seed; 0.44 [0.23, 0.65] against the post's 0.5 is open
        "C1": "direction shown, size undecided",
        "C2": "supported",
        "C3": "contradicted",  # unshuffled, the running train_acc is low: the gap falls
        "C4": "inconclusive",
        "C5": "inconclusive",
        "C6": "inconclusive",
        "C7": "contradicted",  # batch 64's inference-mode train_eval_acc is lower, not higher (BatchNorm's lag)
        "C8": "supported",  # batch 8 beats batch 64 on every held-out seed
        "C9": "inconclusive",
    }
    assert verdicts(combined) == {
        **{c.id: "inconclusive" for c in report.CLAIMS},
        "C1": "direction shown, size undecided",
        "C2": "supported",
        "C3": "contradicted",
        "C8": "supported",
    }


@pytest.mark.integration
def test_every_decided_or_undecided_check_has_a_real_interval(combined: Path) -> None:
    """A verdict other than "not tested" rests on estimates over at least 2 seeds with finite ends:
    an interval with a NaN end is undecided too, so a broken estimate must not pass as "inconclusive".
    """
    claims = pd.read_csv(combined / "tables" / "claims.csv")
    checks = claims.dropna(subset=["check"])
    assert set(checks["claim"]) == {c.id for c in report.CLAIMS}  # C3's runs near chance are read too
    assert (checks["n"] >= 2).all(), checks.loc[checks["n"] < 2, ["claim", "check", "n"]]
    assert checks[["mean", "ci_low", "ci_high"]].map(math.isfinite).all().all()
    assert (checks["ci_low"] <= checks["mean"]).all() and (checks["mean"] <= checks["ci_high"]).all()


@pytest.mark.unit
def test_c2_numbers_match_the_raw_rows(summary: pd.DataFrame) -> None:
    raw = pd.read_csv(FIXTURES / "fx_causes" / vocab.EPOCHS_CSV)
    at2 = raw[raw["epoch"] == 2]
    imbalanced = at2[at2["data.imbalance"] == 0.95].set_index("seed")["gap"]
    default = (
        (at2["data.imbalance"] == 0.0)
        & at2["data.shuffle"]
        & (at2["data.preprocess_mismatch"] == "none")
        & (at2["model.width"] == 1.0)
        & (at2["data.samples_per_class"] == 240)
    )
    base = at2[default].set_index("seed")["gap"]
    diffs = (imbalanced - base).to_numpy()
    finding = by_id("C2").evaluate(summary)
    assert finding is not None and finding.verdict == "supported"
    (increase,), (level,) = finding.checks, finding.size
    assert level.estimate.mean == pytest.approx(imbalanced.mean())
    assert increase.estimate.mean == pytest.approx(diffs.mean())
    assert increase.estimate.low == pytest.approx(diffs.mean() - T_975_2DF * diffs.std(ddof=1) / math.sqrt(3))


@pytest.mark.unit
def test_c1_flips_to_supported_when_batch_8_closes_its_gap(summary: pd.DataFrame) -> None:
    gap2 = an.column("gap", "epoch2")
    # the direction holds (batch 64's gap above batch 8's); batch 64's (0.44 [0.22, 0.66]) straddles the post's
    # 0.5 and batch 8's (0.139, 0.071, 0.114) the 0.1 band's edge, so the post's size is undecided
    finding = by_id("C1").evaluate(summary)
    assert finding.verdict == "direction shown, size undecided"
    assert [c.outcome() for c in finding.checks] == [Outcome.HOLDS]
    assert [c.outcome() for c in finding.size] == [Outcome.UNDECIDED, Outcome.UNDECIDED]
    edited = summary.copy()
    small, large = edited[an.BATCH_SIZE] == 8, edited[an.BATCH_SIZE] == 64
    edited.loc[small, gap2] = [0.01, -0.02, 0.03]
    edited.loc[large, gap2] = [0.72, 0.70, 0.74]  # the post's 0.74
    assert by_id("C1").evaluate(edited).verdict == "supported"
    edited.loc[large, gap2] = [0.35, 0.75, 0.55]  # mean 0.55, sd 0.2: the interval straddles 0.5
    finding = by_id("C1").evaluate(edited)
    assert finding.verdict == "direction shown, size undecided"
    # 80% power for a mean 0.05 from the threshold with sd 0.2 (d = 0.25), two-sided 0.05: 128 (G*Power)
    from sweep.analysis.power import seeds_needed

    assert seeds_needed(finding.size[0]).n == 128
    edited.loc[small, gap2] = [0.6, 0.9, 0.7]  # batch 8's gap above batch 64's on every seed: direction fails
    assert by_id("C1").evaluate(edited).verdict == "contradicted"


@pytest.mark.unit
def test_c2_flips_to_contradicted_when_the_imbalance_gap_vanishes(summary: pd.DataFrame) -> None:
    gap2 = an.column("gap", "epoch2")
    edited = summary.copy()
    imbalanced = selection.matches(edited["data.imbalance"], 0.95)
    edited.loc[imbalanced, gap2] = [0.0, 0.01, -0.01]
    assert by_id("C2").evaluate(edited).verdict == "contradicted"


@pytest.mark.unit
def test_c9_equivalence_needs_a_narrow_interval() -> None:
    metric = an.column("val_acc", "last")
    edited = an.run_summary(an.load([FIXTURES / "fx_gpus"]).epochs)
    one = edited[an.GPUS] == 1
    edited.loc[~one, metric] = edited.loc[~one, "seed"].map(edited[one].set_index("seed")[metric]) + 0.001
    assert by_id("C9").evaluate(edited).verdict == "supported"
    edited.loc[~one, metric] += 0.3
    assert by_id("C9").evaluate(edited).verdict == "contradicted"
    # a mean difference inside +-0.02 is not enough: seeds that disagree (+0.05, -0.04) give an interval
    # far wider than the band, so equivalence is undecided, not supported
    base = edited.loc[~one, "seed"].map(edited[one].set_index("seed")[metric])
    edited.loc[~one, metric] = base + edited.loc[~one, "seed"].map({0: 0.05, 1: -0.04})
    finding = by_id("C9").evaluate(edited)
    estimate = finding.checks[0].estimate
    assert estimate.n == 2 and estimate.mean == pytest.approx(0.005) and abs(estimate.mean) < 0.02
    assert estimate.low < -0.02 and estimate.high > 0.02
    assert finding.verdict == "inconclusive"


@pytest.mark.unit
def test_claims_a_folder_cannot_test_name_the_experiments_file() -> None:
    findings = report.evaluate(an.run_summary(an.load([FIXTURES / "fx_bs"]).epochs))
    texts = {claim.id: report.verdict_text(claim, finding) for claim, finding in findings}
    assert texts["C2"] == "not tested by this sweep (see experiments/causes.yaml)"
    assert texts["C9"] == "not tested by this sweep (see experiments/gpus.yaml)"
    assert texts["C1"].startswith("direction shown, size undecided (equal epochs, read at epoch 2)")  # tested
    empty = report.evaluate(pd.DataFrame())
    assert all(finding is None for _, finding in empty)


@pytest.mark.integration
def test_figures_are_redrawn_only_when_their_data_changes(tmp_path: Path) -> None:
    """A second report on the same data reuses the PNGs; changed epochs redraw that folder's figures only."""
    folders = [tmp_path / "fx_bs", tmp_path / "fx_causes"]
    for folder in folders:
        shutil.copytree(FIXTURES / folder.name, folder)
    out = tmp_path / "out"
    assert cli_report(*folders, "--out", out)[0] == 0
    pngs = sorted((out / "figures").glob("*.png"))
    assert "steps_to_target-fx_bs_fixed_0_001.png" in {p.name for p in pngs}
    first = {p.name: p.stat().st_mtime_ns for p in pngs}
    report_before = (out / "report.md").read_text()
    assert cli_report(*folders, "--out", out)[0] == 0
    assert {p.name: p.stat().st_mtime_ns for p in pngs} == first  # nothing redrawn
    assert (out / "report.md").read_text() == report_before  # titles and captions as before
    epochs = pd.read_csv(folders[0] / "epochs.csv")
    epochs[["val_acc", "val_acc_recal"]] += 0.01  # every record: the curves and every step to a target move
    epochs.to_csv(folders[0] / "epochs.csv", index=False)
    assert cli_report(*folders, "--out", out)[0] == 0
    redrawn = {p.name for p in pngs if p.stat().st_mtime_ns != first[p.name]}
    # the seeds-to-decide figure reads every folder's checks, fx_bs's among them; the post's picture, C1's runs
    assert redrawn - {"claims-seeds_to_decide.png"} == {
        n for n in first if n.startswith(("fx_bs-", "steps_to_target-fx_bs", "the_post_picture"))
    }
    code, _, stderr = cli_report(*folders, "--out", out, "--svg")
    assert code == 0, stderr
    assert sorted(p.stem for p in (out / "figures").glob("*.svg")) == sorted(p.stem for p in pngs)


@pytest.mark.integration
def test_a_figure_the_report_no_longer_draws_is_removed_and_other_files_are_left(tmp_path: Path) -> None:
    import json

    out = tmp_path / "out"
    assert cli_report(FIXTURES / "fx_bs", "--out", out)[0] == 0
    figures = out / "figures"
    index = json.loads((figures / "figures.json").read_text())
    index["fx_bs-an_old_figure"] = {"key": "gone", "title": "drawn by an earlier report"}
    (figures / "figures.json").write_text(json.dumps(index))
    for name in ("fx_bs-an_old_figure.png", "fx_bs-an_old_figure.svg", "my_notes.png"):
        (figures / name).write_bytes(b"x")
    assert cli_report(FIXTURES / "fx_bs", "--out", out)[0] == 0
    assert not (figures / "fx_bs-an_old_figure.png").exists() and not (figures / "fx_bs-an_old_figure.svg").exists()
    assert (figures / "my_notes.png").read_bytes() == b"x"  # not the report's: left alone
    assert "fx_bs-an_old_figure" not in json.loads((figures / "figures.json").read_text())


@pytest.mark.integration
def test_report_again_on_unchanged_data_writes_nothing_and_any_change_rebuilds(tmp_path: Path) -> None:
    """`sweep report` keeps the report on disk while its inputs, code and written files are unchanged
    (sweep.report.stamp).
    """
    folder = tmp_path / "fx_bs"
    shutil.copytree(FIXTURES / "fx_bs", folder)
    out = tmp_path / "out"
    first = cli_report(folder, "--out", out)
    assert first[0] == 0
    written = sorted(p for p in out.rglob("*") if p.is_file() and p.name != stamp.STAMP)
    assert {"report.md", "report.html", "claims.csv"} <= {p.name for p in written}
    times = {p: p.stat().st_mtime_ns for p in written}
    assert cli_report(folder, "--out", out) == first  # same verdicts printed
    assert {p: p.stat().st_mtime_ns for p in written} == times  # nothing rewritten
    md = out / "report.md"
    md.write_text("edited by hand\n")  # a changed output is rebuilt
    assert cli_report(folder, "--out", out) == first
    assert md.read_text().startswith("# ")
    times = {p: p.stat().st_mtime_ns for p in written}
    epochs = pd.read_csv(folder / "epochs.csv")
    epochs["val_acc"] += 0.01  # a changed input is rebuilt
    epochs.to_csv(folder / "epochs.csv", index=False)
    assert cli_report(folder, "--out", out)[0] == 0
    assert md.stat().st_mtime_ns != times[md]


@pytest.mark.integration
def test_report_again_after_a_change_to_the_package_source_rebuilds(tmp_path: Path, monkeypatch) -> None:
    """The stamp's code part reads the package's source: an edited check (sweep/claims, outside the report package)
    rebuilds the report.
    """
    package = tmp_path / "copy" / "sweep"  # the stamp reads a copy of the package, which the test then edits
    shutil.copytree(Path(stamp.__file__).parents[1], package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(stamp, "__file__", str(package / "report" / "stamp.py"))
    out = tmp_path / "out"
    first = cli_report(FIXTURES / "fx_bs", "--out", out)
    assert first[0] == 0
    md = out / "report.md"
    before = md.stat().st_mtime_ns
    assert cli_report(FIXTURES / "fx_bs", "--out", out) == first
    assert md.stat().st_mtime_ns == before  # same source: kept
    checks = package / "claims" / "checks.py"
    checks.write_text(checks.read_text() + "\n# an edited check\n")
    assert cli_report(FIXTURES / "fx_bs", "--out", out) == first
    assert md.stat().st_mtime_ns != before  # edited source: rebuilt


@pytest.mark.integration
def test_report_files(combined: Path) -> None:
    for name in (
        "report.md",
        "report.html",
        "tables/curves.csv",
        "tables/gaps.csv",
        "tables/run_summary.csv",
        "tables/claims.csv",
    ):
        assert (combined / name).is_file(), name
    figures = sorted(p.name for p in (combined / "figures").glob("*.png"))
    assert figures == [
        "claims-seeds_to_decide.png",
        "fx_bs-accuracy_curves.png",
        "fx_bs-final_val_acc.png",
        "fx_bs-gap_curves.png",
        "fx_bs-speed.png",
        "fx_causes-toggles.png",
        "fx_gpus-gpus_curves.png",
        "steps_to_target-fx_bs_fixed_0_001.png",
        "the_post_picture.png",
    ]
    assert not list((combined / "figures").glob("*.svg"))  # SVG on request only (--svg)
    md = (combined / "report.md").read_text()
    assert "| C2 | imbalanced training classes" in md and "| undecided at 3 seeds (equal epochs, read at " in md
    assert re.search(r"\| git commit \| ([0-9a-f]{40}|unknown) \|", md)
    # 31 rows, but fx_causes' s0-5b7c0a32 and s1-3934565c are fx_gpus' g1-s0-5b7c0a32 and g1-s1-3934565c
    assert "| runs | 29 (29 done) |" in md
    # the C1 nuance: BatchNorm lag at batch 64, 2 x 24 steps by epoch 2
    assert "eval_gap" in md and "0.99^48 = 0.62" in md


@pytest.mark.integration
def test_html_is_self_contained(combined: Path) -> None:
    page = (combined / "report.html").read_text()
    assert "<script" not in page and "<link" not in page
    sources = re.findall(r'src="([^"]*)"', page)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    links = re.findall(r'href="([^"]*)"', page)  # the contents and the verdict table: within the page only
    ids = set(re.findall(r' id="([^"]+)"', page))
    assert links and all(link.startswith("#") and link[1:] in ids for link in links)


IMAGE_PROBE = """<script>
window.addEventListener('load', () => {
  const images = [...document.images];
  const probe = document.createElement('div');
  probe.id = 'probe';
  probe.dataset.total = images.length;
  probe.dataset.loaded = images.filter(i => i.complete && i.naturalWidth > 0).length;
  probe.dataset.tables = document.querySelectorAll('table').length;
  document.body.appendChild(probe);
});
</script>"""


@pytest.mark.system  # a browser in a subprocess
def test_html_renders_in_headless_chromium(combined: Path, tmp_path: Path) -> None:
    services.require("chromium")
    chromium = services.chromium_path()
    assert chromium  # require() returned: it is here
    page = tmp_path / "page.html"  # a copy with a probe script; the report itself has no scripts
    page.write_text((combined / "report.html").read_text().replace("</body>", IMAGE_PROBE + "</body>"))
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    probe = re.search(r'<div id="probe" data-total="(\d+)" data-loaded="(\d+)" data-tables="(\d+)"', done.stdout)
    assert probe, done.stderr[-2000:]
    total, loaded, tables = map(int, probe.groups())
    assert total == 9 and loaded == total  # the 9 figures of test_report_files
    assert tables >= 10
    assert "<h1>Does the post's advice hold? Keep batch_size &lt;= 32, and its other claims" in done.stdout


FIRST_SCREEN_PROBE = """<script>
window.addEventListener('load', () => {
  const inside = (el) => { const r = el.getBoundingClientRect(); return r.height > 0 && r.bottom <= innerHeight; };
  const rows = [...document.querySelectorAll('.row table tr')];
  const figure = document.querySelector('.row img');
  const probe = document.createElement('div');
  probe.id = 'probe';
  probe.dataset.viewport = innerWidth + 'x' + innerHeight;
  probe.dataset.rows = rows.length;
  probe.dataset.rowsInside = rows.filter(inside).length;
  probe.dataset.figureInside = figure ? inside(figure) : 'none';
  probe.dataset.contents = document.querySelectorAll('nav.contents a').length;
  probe.dataset.folded = document.querySelectorAll('details:not([open])').length;
  document.body.appendChild(probe);
});
</script>"""


@pytest.mark.system  # a browser in a subprocess
def test_the_committed_reference_report_shows_its_verdicts_and_main_figure_on_the_first_screen(
    tmp_path: Path,
) -> None:
    """results/reference/report.html at 1400x900, as a reader opens it: every verdict row and the post's
    picture lie inside the first viewport, and the sections after it are folded under a table of contents.
    """
    services.require("chromium")
    chromium = services.chromium_path()
    assert chromium
    page = tmp_path / "page.html"
    reference = (REPO / "results" / "reference" / "report.html").read_text()
    page.write_text(reference.replace("</body>", FIRST_SCREEN_PROBE + "</body>"))
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1400,900",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r'<div id="probe"([^>]*)>', done.stdout)
    assert found, done.stderr[-2000:]
    probe = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', found.group(1)))
    assert probe["viewport"].startswith("1400x")  # a 1400x900 window; its page area is smaller
    claims = pd.read_csv(REPO / "results" / "reference" / "tables" / "claims.csv")
    tested = claims[~claims["verdict"].str.startswith("not tested")]["claim"].nunique()
    assert int(probe["rows"]) == tested + 1  # the head and one row per tested claim
    assert probe["rows-inside"] == probe["rows"] and probe["figure-inside"] == "true", probe
    assert int(probe["contents"]) >= 10 and int(probe["folded"]) == int(probe["contents"])


@pytest.mark.unit
def test_cli_report_errors(tmp_path: Path) -> None:
    code, _, stderr = cli_report(tmp_path / "nowhere")
    assert code == 2
    assert stderr.strip().count("\n") == 0 and "no runs.csv or epochs.csv here" in stderr
    code, _, stderr = cli_report(*FOLDERS[:2])
    assert code == 2 and "--out" in stderr


@pytest.mark.system  # a real sweep in a subprocess
def test_the_smoke_run_ends_with_its_verdicts_in_words_and_its_report_says_only_what_one_seed_can(
    tmp_path: Path,
) -> None:
    """`sweep run experiments/smoke.yaml`: the terminal ends with each tested claim's words, verdict, effect
    and what it was read from, the untested claims in one line, why one seed decides nothing and what to
    run, and the report's path; no warning reaches the terminal. The report has a row per tested claim only.
    """
    done = run_cli("run", str(REPO / "experiments" / "smoke.yaml"), "--results", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    tail = done.stdout.splitlines()[-9:]
    c1 = "C1 (batch 64: train_acc far above val_acc at epoch 2; batch 8: both close)"
    # 8 classes, 1 seed, 2 epochs: batch 8 (C1's control) does not get above the did-not-learn limit (0.25)
    assert tail[0] == f"{c1}: cannot answer: its control arm did not learn"
    assert re.fullmatch(
        r"    gap, batch 64 - 8, epoch 2: -?\d\.\d{3} \(1 seed, no interval\); "
        r"adam, lr 0\.001; raw, as the post read it",
        tail[1],
    )
    assert [line.split(" (")[0] for line in tail[0:6:2]] == ["C1", "C6", "C7"]
    assert tail[6].startswith("Not tested by these results: C2, C3, C4, C5 (`experiments/causes.yaml` tests them)")
    assert tail[7].startswith("With 1 seed per setting no check can be decided (C6, C7): give the grid 3")
    assert tail[8] == f"report: {Path('out/report.html')} (and report.md beside it)"
    assert "Warning" not in done.stdout + done.stderr and "All-NaN" not in done.stderr
    md = (tmp_path / "out" / "report.md").read_text()
    assert not re.search(r"\b1 seeds\b|family of 0|> 1000 \(range > 1000 to > 1000\)", md)
    assert not re.search(r"^\| \[?C[2-5]\b", md, re.MULTILINE)  # no row for a claim the smoke grid does not test


@pytest.mark.system  # a real sweep in a subprocess
def test_a_one_epoch_grid_runs_and_reports_without_a_warning(tmp_path: Path) -> None:
    """One epoch: no epoch 2 for the post's reading, so every epoch-2 column is empty; nothing may warn."""
    write_grid(tmp_path, TINY_GRID.replace("epochs: 2", "epochs: 1"))
    done = run_cli("run", "grid.yaml", cwd=tmp_path)
    again = run_cli("report", "results/tiny", cwd=tmp_path)
    assert done.returncode == 0 and again.returncode == 0, done.stdout + done.stderr + again.stderr
    printed = done.stdout + done.stderr + again.stdout + again.stderr
    assert "Warning" not in printed and "All-NaN" not in printed, printed
    assert again.stdout.splitlines()[-1] == f"report: {Path('results/tiny/report.html')} (and report.md beside it)"


@pytest.mark.system  # a real sweep in a subprocess
def test_run_ends_by_writing_the_report(tmp_path: Path) -> None:
    write_grid(tmp_path, TINY_GRID)
    done = run_cli("run", "grid.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    results = tmp_path / "results" / "tiny"
    assert done.stdout.splitlines()[-1] == f"report: {Path('results/tiny/report.html')} (and report.md beside it)"
    md = (results / "report.md").read_text()
    assert "| runs | 2 (2 done) |" in md
    assert (results / "figures" / "tiny-accuracy_curves.png").is_file()


@pytest.mark.integration
def test_a_sweep_with_only_non_default_controls_still_gets_a_report(tmp_path: Path) -> None:
    import pandas as pd

    from sweep import report

    source = Path(__file__).parent / "fixtures" / "fx_controls"
    for name in ("runs.csv", "epochs.csv"):
        table = pd.read_csv(source / name)
        table = table[table["model.bn_momentum"] == 0.9] if "model.bn_momentum" in table else table
        table.to_csv(tmp_path / name, index=False)
    written = report.build([tmp_path])
    found = {claim.id: finding for claim, finding in written.findings}
    # no group sits at the controls' defaults, so the group that compares each claim's values answers it, and says
    # at which settings (momentum 0.9); the claims these runs cannot compare are not tested
    tested = {claim_id for claim_id, finding in found.items() if finding is not None}
    assert tested == {"C1", "C6", "C7", "C8"}
    assert all("bn_momentum=0.9" in found[claim_id].tested_at for claim_id in tested)  # type: ignore[union-attr]
    # What these 4 runs (batch 8 and 64 x seeds 0 and 1, bn_momentum 0.9) do say: their epoch-2 means
    # against the post's (train_acc 0.80 and val_acc 0.06 at batch 64; 0.60 and 0.60 at batch 8)
    epochs = pd.read_csv(tmp_path / "epochs.csv")
    at2 = epochs[epochs["epoch"] == 2].groupby("train.batch_size")[["train_acc", "val_acc"]].mean()
    post = {(64, "train_acc"): 0.80, (64, "val_acc"): 0.06, (8, "train_acc"): 0.60, (8, "val_acc"): 0.60}
    distance = {key: abs(at2.loc[key] - value) for key, value in post.items()}
    farthest = max(distance, key=distance.get)
    assert farthest == (64, "val_acc") and distance[farthest] > 0.1  # (0.625 + 0.701) / 2 - 0.06
    md = written.markdown.read_text()
    assert "| runs | 4 (4 done) |" in md
    assert (
        "Of 1 setting with batch 8 and 64, the one closest to the post's numbers (optimizer=adam, lr=0.001, "
        "samples_per_class=240, epochs=2, classes=8, image_size=16, bn_momentum=0.9; 2 seeds) does not come "
        f"within 0.1 of all four: its largest distance is {distance[farthest]:.2f}, in val_acc at batch 64." in md
    )


@pytest.mark.integration
def test_stuck_runs_stay_in_the_verdicts_and_diverged_ones_are_named_and_counted(tmp_path: Path) -> None:
    """fx_bs (real runs, 8 classes, 3 epochs) with one run made stuck at chance and one diverged."""
    import pandas as pd

    from sweep import analysis, report
    from sweep.analysis import health as problems

    source = Path(__file__).parent / "fixtures" / "fx_bs"
    runs, epochs = pd.read_csv(source / "runs.csv"), pd.read_csv(source / "epochs.csv")
    stuck, lost = "bs64-s0-39e1fd3c", "bs64-s1-3e11d352"
    chance = epochs["run_id"] == stuck
    epochs.loc[chance, ["val_acc", "train_eval_acc"]] = [0.125, 0.125]  # one class of 8, every epoch
    epochs.loc[chance, ["val_acc_recal", "train_eval_acc_recal"]] = [0.125, 0.125]  # recalibrated too
    epochs.loc[chance, ["eval_gap", "eval_gap_recal"]] = 0.0
    epochs.loc[chance, "gap"] = epochs.loc[chance, "train_acc"] - 0.125
    runs["error"] = runs["error"].astype(object)
    runs.loc[runs["run_id"] == lost, ["status", "error"]] = ["diverged", "training loss became nan in epoch 2"]
    epochs.loc[epochs["run_id"] == lost, "status"] = "diverged"
    runs.to_csv(tmp_path / "runs.csv", index=False)
    epochs.to_csv(tmp_path / "epochs.csv", index=False)

    health = problems.run_health(analysis.load([tmp_path]))
    assert dict(zip(health.run_id, health.status, strict=True)) == {lost: "diverged", stuck: "done"}
    written = report.build([tmp_path])
    md = written.markdown.read_text()
    assert "## Runs with problems" in md
    # recalibrated numbers recorded: the stuck test reads them
    assert f"| {stuck} | done | stuck: val_acc_recal 0.125 and train_eval_acc_recal unchanged over 4 records" in md
    assert f"| {lost} | diverged | diverged: training loss became nan in epoch 2 | no |" in md
    # C8 reads recalibrated val_acc, where batch 64's other seeds sit close to batch 8's: with or without the
    # stuck run (at chance) the seeds cannot decide it. C1's direction (batch 64's gap above batch 8's, paired)
    # holds on 3 seeds, the stuck one among them, and not on the other 2.
    assert [line for line in md.splitlines() if line.startswith("Sensitivity:")] == [
        "Sensitivity: without the 1 stuck run(s), C1 would be inconclusive instead of direction shown, size undecided."
    ]
    assert dict((c.id, f.verdict) for c, f in written.findings if f)["C8"] == "inconclusive"
    # batch 64 has seeds 0 (stuck, counted) and 2; seed 1 diverged and has no numbers
    checks = pd.read_csv(tmp_path / "tables" / "claims.csv").set_index("check")
    assert checks.loc["gap at batch 64, epoch 2", "n"] == 2
    stuck_gap = epochs.loc[chance & (epochs["epoch"] == 2), "gap"].item()
    assert checks.loc["val_acc_recal, batch 64 - batch 8, last epoch (paired)", "n"] == 2
    gap64 = epochs[(epochs["train.batch_size"] == 64) & (epochs["epoch"] == 2) & (epochs["status"] == "done")]
    assert checks.loc["gap at batch 64, epoch 2", "mean"] == pytest.approx(gap64["gap"].mean())
    assert stuck_gap in set(gap64["gap"])


@pytest.mark.integration
def test_the_sensitivity_line_names_a_verdict_that_rests_on_a_stuck_run(tmp_path: Path) -> None:
    """C1 on fx_bs with batch 64's seed 0 stuck: with it, 3 close gaps above the post's 0.5 support C1; without
    it, 2 seeds still show the direction but cannot show the size (0.80 +- 0.64). The verdict keeps the stuck run
    and the line says so. (C8 reads recalibrated val_acc, undecided either way.)
    """
    source = FIXTURES / "fx_bs"
    runs, epochs = pd.read_csv(source / "runs.csv"), pd.read_csv(source / "epochs.csv")
    stuck = epochs["run_id"] == "bs64-s0-39e1fd3c"
    epochs.loc[stuck, ["val_acc", "train_eval_acc", "eval_gap"]] = [0.125, 0.125, 0.0]
    epochs.loc[stuck, ["val_acc_recal", "train_eval_acc_recal", "eval_gap_recal"]] = [0.125, 0.125, 0.0]
    epochs.loc[stuck, "train_acc"] = 0.925  # the running mean can be high while the model predicts one class
    epochs.loc[stuck, "gap"] = gap = 0.925 - 0.125
    at2 = epochs["epoch"] == 2
    for seed, shift in ((1, 0.05), (2, -0.05)):
        epochs.loc[at2 & (epochs["train.batch_size"] == 64) & (epochs["seed"] == seed), "gap"] = gap + shift
    small = at2 & (epochs["train.batch_size"] == 8)
    epochs.loc[small, "gap"] = epochs.loc[small, "seed"].map({0: 0.0, 1: 0.001, 2: -0.001})
    runs.to_csv(tmp_path / "runs.csv", index=False)
    epochs.to_csv(tmp_path / "epochs.csv", index=False)
    written = report.build([tmp_path])
    assert dict((c.id, f.verdict) for c, f in written.findings if f)["C1"] == "supported"
    md = written.markdown.read_text()
    assert (
        "Sensitivity: without the 1 stuck run(s), C1 would be direction shown, size undecided instead of supported."
        in md
    )


@pytest.mark.unit
def test_every_figure_caption_states_its_seeds(tmp_path: Path) -> None:
    """Each per-folder figure names the seeds behind it: '3 seeds' from its run selection, or 'seeds 0, 1, 2'."""
    from sweep import analysis as an
    from sweep.report.figures import curves as plots

    results = an.load([FIXTURES / "fx_bs", FIXTURES / "fx_causes"])
    figures = plots.draw_all(results, tmp_path)
    assert {f.name.split("-", 1)[1] for f in figures} >= {"accuracy_curves", "final_val_acc", "toggles"}
    for figure in figures:
        assert "3 seeds" in figure.caption or "seeds 0, 1, 2" in figure.caption, (figure.name, figure.caption)
