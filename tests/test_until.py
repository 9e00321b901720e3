"""`sweep run --until-decided --max-seeds N`: which grid points get the next look's seeds (constructed run
summaries, no training), a real sweep that adds seeds only where a check is undecided, resuming after
kill -9 without training anything twice, and bad input refused before anything is written.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import optuna
import pandas as pd
import pytest
from conftest import Lines, run_cli, start_cli, write_grid

from sweep import analysis, claims, cli
from sweep.analysis import decisions, health
from sweep.analysis.estimates import Check, Estimate
from sweep.analysis.outcome import Outcome
from sweep.analysis.sequential import Plan, decide
from sweep.claims import basis, family
from sweep.claims.findings import Finding, Rule
from sweep.claims.registry import by_id
from sweep.claims.verdict import Verdict
from sweep.claims.verdict import sequential_verdict as sequential_of
from sweep.cli.arguments import report_writer
from sweep.config import load_grid
from sweep.config.plan import plan
from sweep.report.document import Doc
from sweep.report.sections import until as until_section
from sweep.report.sections.assemble import verdict_where
from sweep.run import orchestrate, until
from sweep.store import Store
from sweep.store.queue import spec_of

FIXTURES = Path(__file__).resolve().parent / "fixtures"

GRID = """\
    name: until
    seeds: [{seeds}]
    base:
      data: {{dataset: glyphs120, classes: 4, samples_per_class: 20, image_size: 12}}
      train: {{epochs: 2, batch_size: 8}}
    variants:
      - {{}}
      - {{data.imbalance: 0.95}}
      - {{data.shuffle: false}}
"""
BASE, IMBALANCED, UNSHUFFLED = 0, 1, 2  # the grid's points, in file order
# The grid the trained tests use: on these tiny runs C2's balanced control does not learn (it cannot answer and
# adds no seeds), while C5's check of half the images per class stays open at 4 seeds: its two points grow.
TRAINED_GRID = GRID.replace("{{data.shuffle: false}}", "{{data.samples_per_class: 10}}")
GAP2 = analysis.column("gap", "epoch2")
FILLER = {analysis.column(m, w): 0.0 for m in analysis.SNAPSHOT_METRICS for w in ("epoch2", "last")}


def summary(layout: until.Layout, seeds: int, gaps: dict[int, list[float]]) -> pd.DataFrame:
    """A claims run summary: every point at the first `seeds` seeds of the layout, epoch-2 gap per seed."""
    rows = []
    for point, values in gaps.items():
        for spec, gap in zip(layout.runs[point][:seeds], values, strict=True):
            settings = {k: spec.flat()[k] for k in ("data.imbalance", "data.shuffle")}
            rows.append({"run_id": spec.run_id, "seed": spec.seed, **settings, **FILLER, GAP2: gap})
    return pd.DataFrame(rows)


@pytest.mark.unit
def test_only_the_points_of_undecided_claims_get_the_next_seeds_and_they_are_new_values(tmp_path: Path) -> None:
    grid = load_grid(write_grid(tmp_path, GRID.format(seeds="5, 0, 2")))
    layout = until.Layout.of(grid, 5)
    assert layout.plan.looks == (3, 5) and layout.order == (0, 2, 5, 6, 7)
    clear = [0.70, 0.71, 0.69]  # C2: imbalanced gap far above 0.20 and above the balanced one: decided at once
    table = summary(layout, 3, {BASE: [0.0, 0.01, -0.01], IMBALANCED: clear, UNSHUFFLED: [0.1, 0.9, 0.4]})

    read = {claim: run_ids for claim, (_, run_ids) in until.evaluate_at(table, layout, 0).items()}
    assert set(read) == {"C2", "C3"}  # each finding names the runs its selection read
    assert set(read["C2"]) == {s.run_id for p in (BASE, IMBALANCED) for s in layout.runs[p][:3]}
    assert set(read["C3"]) == {s.run_id for p in (BASE, UNSHUFFLED) for s in layout.runs[p][:3]}
    now = until.look(table, layout, 0)
    open_claims = {claim for claim, _ in now.open}
    assert open_claims == {"C3"} and all(s.decided for c, s in zip(now.claims, now.statuses, strict=True) if c == "C2")
    assert now.grow == (BASE, UNSHUFFLED)  # C3 read these; the imbalanced point (C2 only) gets nothing
    added = layout.new_runs(now.grow, 1)
    assert [(s.seed, s.point) for s in added] == [
        (seed, layout.runs[p][0].point) for p in (BASE, UNSHUFFLED) for seed in (6, 7)
    ]
    as_grid = {s.run_id for s in plan(replace(grid, seeds=(6, 7)))}  # the ids a grid with those seeds gives
    assert {s.run_id for s in added} <= as_grid
    assert not {s.seed for s in added} & set(grid.seeds)

    decided = summary(layout, 3, {BASE: [0.0, 0.01, -0.01], IMBALANCED: clear, UNSHUFFLED: clear})
    assert until.look(decided, layout, 0).grow == ()  # every check decided: no seeds anywhere


@pytest.mark.unit
def test_a_check_missing_at_a_later_look_counts_as_one_without_a_p_value() -> None:
    first = Check("gap", Estimate(0.5, 0.1, 3, 0.25, 0.75), low=0.2)
    missing = until._same_check({}, "C1", first)  # the claim has no finding at this look
    assert (missing.label, missing.low, missing.high, missing.estimate.n) == ("gap", 0.2, math.inf, 0)
    (status,) = decide(Plan.between(3, 5), [[first], [missing]])
    assert not status.decided and status.n == 0 and status.p_seq == pytest.approx(min(1.0, first.p_value()[0] / 0.6))


def _runs_per_point(results: Path, layout: until.Layout) -> dict[int, int]:
    runs = pd.read_csv(results / "runs.csv")
    point_of = layout.point_of()
    done = runs[runs["status"] == "done"]
    return dict(Counter(point_of[h] for h in analysis.spec_hash(done["run_id"])))


@pytest.mark.integration
def test_until_decided_adds_seeds_only_where_a_check_is_undecided(tmp_path: Path) -> None:
    grid = load_grid(write_grid(tmp_path, TRAINED_GRID.format(seeds="0, 1, 2, 3")))
    results = tmp_path / "results"
    lines = Lines()
    console = orchestrate.Console(say=lines.out.append, warn=lines.err.append)
    options = orchestrate.Options(results=results, in_process=True, report=report_writer)
    outcome = until.run_until_decided(grid, options, max_seeds=5, console=console)
    assert outcome.exit_code == 0, lines.text
    layout = until.Layout.of(grid, 5)
    got = decisions.read(results)
    assert got is not None
    table, looks = got
    first = until.look(health.claims_summary(analysis.load([results])), layout, 0)
    # the points read by claims with an open check after look 1 got look 2's seed (4); the others none
    assert first.grow and len(first.grow) < len(layout.runs), lines.text
    per_point = _runs_per_point(results, layout)
    assert per_point == {p: 5 if p in first.grow else 4 for p in range(len(layout.runs))}
    assert list(looks["seeds"]) == [4, 5] and list(looks["runs"]) == [12, len(first.grow)]
    assert any(line.startswith("look 1 of 2 (4 seeds): ") and "check(s) open: C5" in line for line in lines.out)
    # stopped at the cap: every check decided, or undecided at the 5-seed cap, and said so
    assert set(table["words"].str.replace(r"\d+ seeds\)", "", regex=True)) <= {
        "holds (decided at ",
        "fails (decided at ",
        "undecided at the 5-seed cap",
    }
    assert all(f"  {r.claim} {r.check}: {r.words}" in lines.out for r in table.itertuples())
    report = (results / "report.md").read_text()  # the report lists the plan and every check's status
    section = report[report.index("## Seeds until decided") :]
    assert "| 1 | 4 | 0.800 | 0 1 2 3 | 3 | 12 |" in section
    assert all(f"| {r.claim} | {r.check} | {r.words} |" in section for r in table.itertuples())
    for claim in table["claim"].unique():  # the verdict table reads the sequential statuses, not fixed-n p-values
        row = next(line for line in report.splitlines() if line.startswith(f"| {claim} |"))
        assert "(sequential, decided by " in row or "undecided at the 5-seed cap" in row, row

    lines.out.clear()
    again = until.run_until_decided(grid, options, max_seeds=5, console=console)  # resumable: nothing to train
    assert again.exit_code == 0 and again.trained == 0
    assert decisions.read(results)[0].equals(table)
    assert not [line for line in lines.out if "not in this grid file" in line]  # its added seeds are its own


@pytest.mark.unit
def test_runs_at_an_added_seed_are_planned_and_runs_at_other_settings_are_not(tmp_path: Path) -> None:
    grid = load_grid(write_grid(tmp_path, GRID.format(seeds="0, 1")))
    store = Store.open(tmp_path / "j.log", "until")
    runs = plan(grid)
    added = until.Layout.of(grid, 3).new_runs((BASE,), 1)  # seed 2 of the first point, as a look adds it
    other = plan(load_grid(write_grid(tmp_path, GRID.format(seeds="0").replace("epochs: 2", "epochs: 3"))))[0]
    store.enqueue([*runs, *added, other])
    assert store.unplanned(runs) == [other.run_id]


def _wait_for_added_seed_running(journal: Path, seed: int, timeout: float = 600) -> optuna.trial.FrozenTrial:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            running = Store.open(journal, "until", create=False).sweep.get_trials(
                deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)
            )
        except KeyError:
            running = []
        for trial in running:
            if spec_of(trial).seed == seed and "worker_pid" in trial.user_attrs:
                return trial
        time.sleep(0.3)
    raise AssertionError(f"no run at seed {seed} started in time")


@pytest.mark.system
def test_kill_9_during_an_added_seed_then_the_same_command_finishes_without_training_twice(
    tmp_path: Path, started: list[subprocess.Popen]
) -> None:
    write_grid(tmp_path, TRAINED_GRID.format(seeds="0, 1, 2, 3"))
    journal = tmp_path / "results" / "until" / "journal.log"
    command = ("run", "grid.yaml", "--until-decided", "--max-seeds", "5")
    coordinator = start_cli(started, *command, cwd=tmp_path)
    victim = _wait_for_added_seed_running(journal, seed=4)
    os.kill(victim.user_attrs["worker_pid"], signal.SIGKILL)
    coordinator.kill()
    coordinator.wait()

    again = run_cli(*command, cwd=tmp_path, timeout=900)
    assert again.returncode == 0, again.stdout + again.stderr
    study = Store.open(journal, "until", create=False).sweep
    complete = Counter(
        t.user_attrs["run_id"] for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE
    )
    assert set(complete.values()) == {1}, complete  # no run trained twice
    assert victim.user_attrs["run_id"] in complete
    results = tmp_path / "results" / "until"
    grid = load_grid(tmp_path / "grid.yaml")
    layout = until.Layout.of(grid, 5)
    table = health.claims_summary(analysis.load([results]))
    first, last = until.look(table, layout, 0), until.look(table, layout, 1)
    assert _runs_per_point(results, layout) == {p: 5 if p in first.grow else 4 for p in range(len(layout.runs))}
    assert len(complete) == 12 + len(first.grow)
    got = decisions.read(results)
    assert got is not None
    assert list(got[0]["words"]) == [s.words() for s in last.statuses]  # the same decisions, recomputed from the store


def _statuses(*rows: tuple[str, int, bool]) -> pd.DataFrame:
    """decisions.csv rows of one claim: (side, n, more_seeds) per check, cap 30."""
    return pd.DataFrame(
        [
            {"claim": "C3", "check": f"k{i}", "side": side, "n": n, "more_seeds": more, "cap": 30}
            for i, (side, n, more) in enumerate(rows)
        ]
    )


def sequential_verdict(finding: Finding, decided: pd.DataFrame) -> str:
    verdict: Verdict = sequential_of(by_id("C7"), finding, decided)
    return verdict.long.replace("; equal epochs, read at the last epoch)", ")")  # C7's budget, named in every verdict


def _sequential(finding: Finding, sides: tuple[bool | None, ...]) -> Finding:
    """The finding with each check's sequential p-value: 0.001 where the side is given (decided at any level
    here), 0.9 where it is not.
    """
    side = {True: Outcome.HOLDS, False: Outcome.FAILS, None: Outcome.UNDECIDED}
    checks = tuple(
        replace(c, p_sequential=0.9 if s is None else 0.001, side_sequential=side[s])
        for c, s in zip(finding.checks, sides, strict=True)
    )
    return family.controlled(replace(finding, checks=checks))


@pytest.mark.unit
def test_the_verdict_after_until_decided_is_the_sequential_one() -> None:
    """Checks decided in the report's family give the claim's verdict by its rule, at the seeds that decided
    it; an undecided check at the cap says so, with the seeds 80% power would need; one with looks to come
    says to rerun.
    """
    noisy = Estimate(mean=0.3, sd=0.2, n=3, low=-0.2, high=0.8)
    finding = Finding((Check("k0", noisy, low=0.2), Check("k1", noisy, low=0.05)), "runs")
    both = _statuses(("holds", 8, False), ("holds", 12, False))
    assert sequential_verdict(_sequential(finding, (True, True)), both) == (
        "supported (sequential, decided by 12 seeds)"
    )
    one = _statuses(("fails", 5, False), ("", 30, False))
    assert sequential_verdict(_sequential(finding, (False, None)), one) == (
        "contradicted (sequential, decided by 5 seeds)"  # one failing check settles an all-of claim
    )
    either = Finding(finding.checks, "runs", rule=Rule.ANY)  # C4: one kind of mismatch is enough
    rule = "(any-of rule: supported when 1 of its 2 checks holds, contradicted when all fail)"
    first = _statuses(("holds", 5, False), ("", 12, False))
    assert sequential_verdict(_sequential(either, (True, None)), first) == (
        f"supported {rule} (sequential, decided by 5 seeds)"
    )
    assert sequential_verdict(
        _sequential(either, (False, False)), _statuses(("fails", 5, False), ("fails", 8, False))
    ) == (f"contradicted {rule} (sequential, decided by 8 seeds)")
    capped = sequential_verdict(_sequential(finding, (True, None)), _statuses(("holds", 8, False), ("", 30, False)))
    assert capped.startswith("undecided at the 30-seed cap; ")
    assert sequential_verdict(
        _sequential(finding, (True, None)), _statuses(("holds", 8, False), ("", 12, True))
    ).startswith("undecided after 12 seeds, with looks still to come")
    # the verdict follows the checks' own sequential p-values at the claim's levels: one at 0.9 is undecided
    assert sequential_verdict(_sequential(finding, (True, None)), both).startswith("undecided at the 30-seed cap")
    assert (
        "equal epochs, read at the last epoch"
        in sequential_of(by_id("C7"), _sequential(finding, (True, True)), both).long
    )


@pytest.mark.unit
def test_sequential_p_values_enter_only_the_checks_they_decided() -> None:
    """A combined report can answer a claim from another folder's runs (C5 from the map grids' data sizes), or
    on other numbers (recalibrated where the looks read raw): then that folder's decisions are about other
    numbers, and the check keeps its fixed-n p-value in the family.
    """
    noisy = Estimate(mean=0.3, sd=0.2, n=3, low=-0.2, high=0.8)
    finding = Finding((Check("k0", noisy, low=0.2), Check("k1", noisy, low=0.05)), "runs")
    decided = _statuses(("holds", 3, False), ("holds", 3, False)).assign(p_seq=[0.001, 0.002])
    joined = basis.with_sequential(finding, decided)
    assert joined is not None and [(c.p_value()) for c in joined.checks] == [
        (0.001, Outcome.HOLDS),
        (0.002, Outcome.HOLDS),
    ]
    other = decided.assign(check=["k0", "spc 50 -> 25"])
    assert basis.with_sequential(finding, other) == finding
    fewer = decided.assign(n=[3, 4])  # a run left out since the look (it diverged): other numbers
    assert basis.with_sequential(finding, fewer) == finding
    corrected = family.controlled(joined)
    assert verdict_where(by_id("C3"), corrected, None, decided).startswith("supported (sequential, decided by 3 seeds")
    assert verdict_where(by_id("C3"), finding, None, other).startswith("undecided at 3 seeds (equal epochs")


@pytest.mark.unit
def test_a_claim_continued_in_one_folder_is_read_from_that_folders_runs() -> None:
    """A combined report reads a claim from the folder that ran it --until-decided, even where another folder's
    group would win the usual choice (here by command-line order), so the sequential verdict is about the
    numbers shown.
    """
    first = analysis.run_summary(analysis.load([FIXTURES / "fx_bs"]).epochs)
    continued = first.assign(
        run_id=first["run_id"] + "-b", source="b", source_rank=1, **{"train.lr": 0.003, "val_acc_last": 0.5}
    )
    table = pd.concat([first, continued], ignore_index=True)
    by_default = dict(claims.evaluate(table))[by_id("C7")]
    assert by_default is not None and not any(r.endswith("-b") for r in by_default.run_ids)
    read_there = dict(claims.evaluate(table, {"C7": "b"}))[by_id("C7")]
    assert read_there is not None and read_there.run_ids and all(r.endswith("-b") for r in read_there.run_ids)
    assert "lr=0.003" in read_there.tested_at
    # a folder that cannot answer the claim leaves it to every folder's runs
    assert dict(claims.evaluate(table, {"C7": "elsewhere"}))[by_id("C7")].run_ids == by_default.run_ids


@pytest.mark.unit
def test_a_report_without_decisions_has_no_until_section(tmp_path: Path) -> None:
    doc = Doc()
    until_section.section(doc, until_section.read([tmp_path]))
    assert doc.blocks == []


@pytest.mark.unit
@pytest.mark.parametrize(
    ("seeds", "extra", "args", "says"),
    [
        ("0, 1, 2", "", ["--until-decided", "--max-seeds", "2"], "--max-seeds 2: must be at least the grid's 3 seeds"),
        ("0, 1, 2", "", ["--max-seeds", "5"], "--max-seeds is the cap of --until-decided"),
        (
            "0",
            "",
            ["--until-decided", "--max-seeds", "1"],
            "--max-seeds 1: must be at least the grid's 2 seeds ([0, 1])",
        ),
        (
            "0, 1",
            "    search: {lr: {low: 1e-4, high: 1e-2}, trials: 2}\n",
            ["--until-decided"],
            "learning-rate search (search:) is not supported yet",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, seeds, extra, args, says
) -> None:
    write_grid(tmp_path, GRID.format(seeds=seeds) + extra)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "grid.yaml", "--in-process", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.yaml"]


@pytest.mark.unit
def test_a_sweep_started_with_another_cap_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_grid(tmp_path, GRID.format(seeds="0, 1, 2"))
    journal = tmp_path / "results" / "until" / "journal.log"
    journal.parent.mkdir(parents=True)
    Store.open(journal, "until", create=True).sweep.set_user_attr(until.PLAN_ATTR, [3, 5])
    before = journal.read_bytes()
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "grid.yaml", "--in-process", "--until-decided", "--max-seeds", "8"]) == 2
    err = capsys.readouterr().err
    assert "rerun with --max-seeds 5" in err and err.count("\n") == 1
    assert journal.read_bytes() == before and sorted(p.name for p in journal.parent.iterdir()) == ["journal.log"]


@pytest.mark.integration
def test_report_prints_the_verdicts_its_table_gives(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`sweep report` on a folder continued with --until-decided says on the terminal what the report says:
    the committed causes reference decided C2 at its first look (3 seeds).
    """
    causes = FIXTURES.parent.parent / "results" / "causes"
    for name in ("runs.csv", "epochs.csv", "decisions.csv", "looks.csv"):
        (tmp_path / name).write_bytes((causes / name).read_bytes())
    assert cli.main(["report", str(tmp_path)]) == 0
    c2 = by_id("C2")
    printed = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(f"C2 ({c2.brief}): "))
    verdict = printed.split("): ", 1)[1]
    assert verdict == "supported (sequential, decided by 3 seeds)"
    row = next(line for line in (tmp_path / "report.md").read_text().splitlines() if line.startswith("| C2 |"))
    long = "supported (sequential, decided by 3 seeds; equal epochs, read at epoch 2)"
    assert row.startswith(f"| C2 | {c2.quote} | ") and f" | {long}; " in row  # estimate, verdict with its budget
