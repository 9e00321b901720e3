"""Files written only where they belong: no path built from a hostile run id, no write through a symbolic
link at a destination, no two writers sharing a temporary name (concurrent exports).
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, TINY_GRID, write_grid

from sweep import cli, vocab
from sweep.base import atomic
from sweep.config import load_grid
from sweep.config.plan import plan
from sweep.exits import UsageError
from sweep.store import Store

ARTICLE = REPO / "results" / "article"


@pytest.mark.integration  # the TensorBoard export imports TensorBoard
@pytest.mark.parametrize("run_id", ["../../escaped", "{tmp}/absolute", ".."])
def test_a_run_id_that_is_not_a_folder_name_stops_the_tensorboard_export_before_anything_is_written(
    tmp_path: Path, run_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "results"
    shutil.copytree(ARTICLE, folder, ignore=shutil.ignore_patterns("figures", "tables", "*.html", "journal.log"))
    runs = pd.read_csv(folder / vocab.RUNS_CSV)
    runs.loc[0, vocab.RUN_ID] = run_id.format(tmp=tmp_path)  # an absolute path: outside the export too
    runs.to_csv(folder / vocab.RUNS_CSV, index=False)
    out = tmp_path / "a" / "b" / "tb"
    before = sorted(p for p in tmp_path.rglob("*"))
    assert cli.main(["export", str(folder), "--tensorboard", str(out)]) == 2
    err = capsys.readouterr().err
    assert "runs.csv has a run_id that is not a plain folder name" in err and err.count("\n") == 1
    assert sorted(p for p in tmp_path.rglob("*")) == before  # nothing written, inside or outside the export


@pytest.mark.integration  # a report: its figures are drawn in a forked child
def test_a_report_replaces_a_symbolic_link_at_its_destination_and_never_writes_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    (out / "tables").mkdir(parents=True)
    for name in ("report.md", "report.html", "tables/claims.csv", "tables/run_summary.csv"):
        (out / name).symlink_to(victim)
    assert cli.main(["report", str(REPO / "tests" / "fixtures" / "fx_bs"), "--out", str(out)]) == 0
    assert victim.read_text() == "precious\n"
    for name in ("report.md", "report.html", "tables/claims.csv", "tables/run_summary.csv"):
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 100


@pytest.mark.unit
@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_a_written_file_gets_the_mode_a_plain_open_would_give(tmp_path: Path, umask: int) -> None:
    """A report or table readable by the user's group where their umask lets it be (not mkstemp's 0600)."""
    import os

    previous = os.umask(umask)
    try:
        atomic.write_text(tmp_path / "report.md", "text")
        atomic.write_csv(pd.DataFrame({"a": [1]}), tmp_path / "t.csv")
        with open(tmp_path / "plain", "w") as handle:  # the oracle: what open() gives under this umask
            handle.write("x")
    finally:
        os.umask(previous)
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == dict.fromkeys(["report.md", "t.csv", "plain"], 0o666 & ~umask)


@pytest.mark.unit
def test_two_exports_of_one_store_at_once_never_collide(tmp_path: Path) -> None:
    """Two processes exporting the same sweep (a `run` and a `status`/`export` beside it) once shared the
    temporary name .runs.csv.tmp: one renamed the other's file away (FileNotFoundError).
    """
    store = Store.open(tmp_path / "j.log", "tiny")
    store.enqueue(plan(load_grid(write_grid(tmp_path, TINY_GRID))))
    errors: list[BaseException] = []

    def export() -> None:
        try:
            for _ in range(30):
                store.export_csv(tmp_path / "out")
        except BaseException as err:  # noqa: BLE001 - any failure of a writer fails the test
            errors.append(err)

    writers = [threading.Thread(target=export) for _ in range(2)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert errors == []
    assert len(pd.read_csv(tmp_path / "out" / vocab.RUNS_CSV)) == 2
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [vocab.EPOCHS_CSV, vocab.RUNS_CSV]  # no leftovers


@pytest.mark.unit
def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("old\n")
    with pytest.raises(RuntimeError), atomic.replacing(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    assert path.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["x.csv"]


@pytest.mark.unit
def test_a_worker_log_that_is_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    from sweep.run.coordinator import _open_log

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "worker-0.log").symlink_to(victim)
    with pytest.raises(UsageError, match="worker-0.log is a symbolic link; remove it"):
        _open_log(tmp_path / "worker-0.log")
    assert victim.read_text() == "precious\n"


@pytest.mark.integration  # a report: its figures are drawn in a forked child
@pytest.mark.parametrize("linked", ["figures", "tables"])
def test_a_report_refuses_a_folder_of_its_own_that_is_a_symbolic_link(
    tmp_path: Path, linked: str, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / linked).symlink_to(elsewhere)
    assert cli.main(["report", str(REPO / "tests" / "fixtures" / "fx_bs"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out / linked} is a symbolic link; remove it" in err and err.count("\n") == 1
    assert list(elsewhere.iterdir()) == [] and list(out.iterdir()) == [out / linked]  # nothing written


@pytest.mark.system  # `run` starts workers: refused before any
@pytest.mark.parametrize("linked", ["logs", "checkpoints"])
def test_run_refuses_a_logs_or_checkpoints_folder_that_is_a_symbolic_link(tmp_path: Path, linked: str) -> None:
    from conftest import run_cli

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    results = tmp_path / "results" / "tiny"
    results.mkdir(parents=True)
    (results / linked).symlink_to(elsewhere)
    write_grid(tmp_path, TINY_GRID)
    done = run_cli("run", "grid.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{Path('results') / 'tiny' / linked} is a symbolic link; remove it" in done.stderr
    assert "Traceback" not in done.stderr and list(elsewhere.iterdir()) == []


@pytest.mark.integration  # MLflow
def test_the_mlflow_export_refuses_a_report_that_is_a_symbolic_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the tracking server\n")
    folder = tmp_path / "results"
    shutil.copytree(ARTICLE, folder, ignore=shutil.ignore_patterns("figures", "tables", "*.html", "report.md"))
    (folder / "report.md").symlink_to(secret)
    db = tmp_path / "mlflow.db"
    assert cli.main(["export", str(folder), "--mlflow", f"sqlite:///{db}"]) == 2
    err = capsys.readouterr().err
    assert "report.md is a symbolic link; remove it" in err and err.count("\n") == 1
    assert not db.exists() and not (tmp_path / "mlartifacts").exists()


@pytest.mark.integration  # the TensorBoard export imports TensorBoard
def test_the_tensorboard_export_refuses_a_run_folder_that_is_a_symbolic_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run's folder linked elsewhere: refused before its old event files would be deleted there."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    keep = elsewhere / "events.out.tfevents.1.batchsweep"
    keep.write_text("someone else's\n")
    out = tmp_path / "tb"
    out.mkdir()
    first = str(pd.read_csv(ARTICLE / vocab.RUNS_CSV)[vocab.RUN_ID].iloc[0])
    (out / first).symlink_to(elsewhere)
    assert cli.main(["export", str(ARTICLE), "--tensorboard", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out / first} is a symbolic link; remove it" in err and err.count("\n") == 1
    assert keep.read_text() == "someone else's\n" and list(out.iterdir()) == [out / first]  # nothing written
