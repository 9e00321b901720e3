"""`sweep export GRID|DIR` without a target (sweep/run/snapshot.py): the CSVs and the report of a partly finished
sweep, from its real Optuna store, with what is missing said; bad input refused before anything is written.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import cli_env, write_grid

from sweep import cli, vocab
from sweep.config import load_grid
from sweep.config.plan import plan
from sweep.run import orchestrate
from sweep.store import Store
from sweep.vocab import RunStatus

GRID = """\
    name: partly
    seeds: [{seeds}]
    base:
      data: {{dataset: glyphs120, classes: 4, samples_per_class: 12, image_size: 12}}
      train: {{epochs: 1, batch_size: 8}}
"""


@pytest.fixture(scope="module")
def partly(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A sweep of 3 runs: seed 0 trained, seed 1 claimed by a worker (running), seed 2 queued (pending);
    the grid file of all three and its results folder, whose CSVs still show only the trained run.
    """
    folder = tmp_path_factory.mktemp("partly")
    first = write_grid(folder, GRID.format(seeds="0"), "first.yaml")
    results = folder / "results"
    options = orchestrate.Options(results=results, in_process=True)
    assert orchestrate.run_sweep(load_grid(str(first)), options).exit_code == 0
    grid = write_grid(folder, GRID.format(seeds="0, 1, 2"))
    store = Store.open(str(results / vocab.JOURNAL_FILE), "partly", create=False)
    store.enqueue(plan(load_grid(str(grid))))
    lease = store.claim_next()
    assert lease is not None and lease.spec.seed == 1
    store.start(lease)
    return grid, results


def _statuses(results: Path) -> dict[int, str]:
    runs = pd.read_csv(results / vocab.RUNS_CSV)
    return dict(zip(runs[vocab.SEED], runs[vocab.STATUS], strict=True))


@pytest.mark.integration
def test_export_of_a_grid_writes_every_run_and_the_report_of_the_finished_ones(
    partly: tuple[Path, Path], capsys: pytest.CaptureFixture
) -> None:
    grid, results = partly
    assert _statuses(results) == {0: RunStatus.DONE}  # what `run` exported before the other seeds were queued
    (results / "report.md").unlink(missing_ok=True)
    assert cli.main(["export", str(grid), "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert _statuses(results) == {0: RunStatus.DONE, 1: RunStatus.RUNNING, 2: RunStatus.PENDING}
    assert "partly: 3 runs: 1 done, 1 running, 0 failed, 0 diverged, 1 pending" in out
    assert "missing: 2 of 3 runs have no final records (1 pending, 1 running)" in out
    report = (results / "report.md").read_text()
    assert "| runs | 3 (1 done, 1 pending, 1 running) |" in report
    epochs = pd.read_csv(results / vocab.EPOCHS_CSV)
    assert list(epochs[vocab.SEED]) == [0]  # the running run has no record yet; nothing invented
    # the store was only read: the run stays claimed, the queue unchanged
    store = Store.open(str(results / vocab.JOURNAL_FILE), "partly", create=False)
    assert store.counts() == {
        **{s: 0 for s in vocab.STATUSES},
        RunStatus.DONE: 1,
        RunStatus.RUNNING: 1,
        RunStatus.PENDING: 1,
    }


@pytest.mark.integration
def test_export_of_a_results_folder_reads_its_journal(partly: tuple[Path, Path], capsys) -> None:
    _, results = partly
    (results / vocab.RUNS_CSV).unlink()
    assert cli.main(["export", str(results), "--study", "partly"]) == 0
    assert _statuses(results) == {0: RunStatus.DONE, 1: RunStatus.RUNNING, 2: RunStatus.PENDING}
    assert "missing: 2 of 3 runs" in capsys.readouterr().out


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["{tmp}/nowhere"], "{tmp}/nowhere: no such folder"),
        (["{tmp}"], "{tmp}/journal.log: no such journal file; give the sweep's store with --storage"),
        (["{tmp}", "--results", "{tmp}/out"], "--results is for a grid file"),
        (["{tmp}/grid.yaml", "--study", "x"], "--study is for a results folder"),
        (["{tmp}/grid.yaml"], "results/partly/journal.log: no such journal file"),
        (["{tmp}", "--tensorboard", "{tmp}/tb", "--storage", "x.log"], "--results, --storage and --study read a store"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, args, says
) -> None:
    monkeypatch.chdir(tmp_path)
    write_grid(tmp_path, GRID.format(seeds="0"))
    assert cli.main(["export", *[a.format(tmp=tmp_path) for a in args]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says.format(tmp=tmp_path) in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.yaml"]


@pytest.mark.system
def test_export_never_loads_tensorflow(partly: tuple[Path, Path]) -> None:
    grid, results = partly
    script = (
        "import sys; from sweep import cli; "
        f"code = cli.main(['export', {str(grid)!r}, '--results', {str(results)!r}]); "
        "print('tensorflow' in sys.modules, code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=grid.parent, env=cli_env(), capture_output=True, text=True, timeout=300
    )
    assert done.stdout.strip().splitlines()[-1] == "False 0", done.stderr
