"""The commands a user types, against a real journal and real TensorFlow, in this process:
`orchestrate.run_sweep` (what `sweep run` calls) and `cli.main([...])`.
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pandas as pd
import pytest
from conftest import REPO, TINY_GRID, sweep_here, write_grid

from sweep import cli, vocab
from sweep.store import Store
from sweep.vocab import RunStatus


@pytest.mark.integration
def test_run_status_and_rerun(tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    grid = write_grid(tmp_path, TINY_GRID + "      train.lr: [0.001, 1.0e+12]\n")
    # 2 batch sizes x 2 learning rates x 1 seed -> 4 runs; lr 1e12 diverges
    first, lines = sweep_here(grid)
    assert first.exit_code == 0, lines.text
    epoch_lines = [line for line in lines.out if " epoch " in line and "val_acc" in line]
    assert len(epoch_lines) == 4  # 2 finished runs x 2 epochs, one line each
    assert "ETA" in epoch_lines[0] and "runs 0/4" in epoch_lines[0]
    assert lines.text.count("DIVERGED") == 2
    assert "status: 2 done, 0 running, 0 failed, 2 diverged, 0 pending" in lines.out
    assert first.counts[RunStatus.DONE] == 2 and first.trained == 4

    runs = pd.read_csv(first.runs_csv)
    epochs = pd.read_csv(first.epochs_csv)
    assert sorted(runs.status) == ["diverged", "diverged", "done", "done"]
    assert runs[runs.status == "diverged"]["error"].str.contains("training loss became").all()
    assert (runs[runs.status == "done"]["parameters"] > 0).all()
    assert len(epochs[epochs.status == "done"]) == 4 and set(epochs.epoch) == {1, 2}
    assert epochs[vocab.GAP].round(6).equals((epochs[vocab.TRAIN_ACC] - epochs[vocab.VAL_ACC]).round(6))

    monkeypatch.chdir(tmp_path)
    capsys.readouterr()  # Keras's own lines while training
    assert cli.main(["status", "grid.yaml"]) == 0
    assert capsys.readouterr().out.strip() == "tiny: 4 runs: 2 done, 0 running, 0 failed, 2 diverged, 0 pending"

    again, lines = sweep_here(grid, report=True)
    assert again.exit_code == 0 and again.trained == 0
    assert "all 4 runs of tiny are already finished; nothing to train." in lines.out
    assert again.report_md.is_file() and again.report_html.is_file()  # run ends with the report
    assert f"report: {again.report_html} (and report.md beside it)" in lines.out
    backend = optuna.storages.journal.JournalFileBackend(str(first.runs_csv.parent / vocab.JOURNAL_FILE))
    assert len(optuna.load_study(study_name="tiny", storage=optuna.storages.JournalStorage(backend)).trials) == 4


@pytest.mark.unit
def test_bad_input_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken.npz").write_bytes(b"not an npz archive")
    write_grid(
        tmp_path,
        TINY_GRID.replace("train.batch_size: [4, 8]", "data.dataset: [glyphs120, npz]").replace(
            "data: {dataset: glyphs120,", "data: {"
        )
        + "      data.path: [null, broken.npz]\n",
    )
    monkeypatch.chdir(tmp_path)
    # glyphs120+broken.npz and npz+null are invalid combinations -> the file is rejected first
    assert cli.main(["run", "grid.yaml", "--in-process"]) == 2
    err = capsys.readouterr().err
    assert "data.path" in err and err.count("\n") == 1
    assert not (tmp_path / "results").exists()


@pytest.mark.integration
def test_a_failing_run_is_recorded_retried_and_the_sweep_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok = write_grid(
        tmp_path,
        """\
        name: mixed
        base:
          data: {classes: 4, samples_per_class: 10, image_size: 12}
          train: {epochs: 1, batch_size: 8}
        grid:
          data.seed: [0, 1]
    """,
        name="ok.yaml",
    )
    bad = write_grid(
        tmp_path,
        """\
        name: mixed
        base:
          data: {classes: 4, samples_per_class: 10, image_size: 16}
          train: {epochs: 1, batch_size: 8}
    """,
        name="bad.yaml",
    )
    assert sweep_here(ok)[0].exit_code == 0
    # A fault of the machine, not of the run: the dataset cache cannot be written (a file is in the way).
    (tmp_path / "in_the_way").write_bytes(b"")
    monkeypatch.setenv("BATCHSWEEP_CACHE", str(tmp_path / "in_the_way"))
    failed, lines = sweep_here(bad)
    assert failed.exit_code == 1
    assert any(line.startswith("FAILED") for line in lines.err)
    assert "status: 0 done, 0 running, 1 failed, 0 diverged, 0 pending" in lines.out
    assert any("failed; retrying it" in line for line in lines.out)
    runs = pd.read_csv(failed.runs_csv)
    assert sorted(runs.status) == ["done", "done", "failed"]
    failed_row = runs.set_index("status").loc["failed"]
    assert "Traceback" in failed_row["error"]
    assert failed_row["attempt"] == 2  # --retries 1 (the default): tried twice, then left failed


@pytest.mark.integration
@pytest.mark.parametrize("retries, attempts", [(0, 1), (2, 3)])
def test_retries_give_that_many_more_attempts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, retries: int, attempts: int
) -> None:
    grid = write_grid(
        tmp_path,
        """\
        name: flaky
        base:
          data: {classes: 4, samples_per_class: 10, image_size: 12}
          train: {epochs: 1, batch_size: 8}
    """,
    )
    (tmp_path / "in_the_way").write_bytes(b"")
    monkeypatch.setenv("BATCHSWEEP_CACHE", str(tmp_path / "in_the_way"))
    outcome, _ = sweep_here(grid, retries=retries)
    assert outcome.exit_code == 1
    assert pd.read_csv(outcome.runs_csv)["attempt"].tolist() == [attempts]


@pytest.mark.unit
def test_worker_command_needs_an_existing_store(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["worker", "--storage", str(tmp_path / "none.log"), "--study", "x"]) == 2
    assert "no such journal file" in capsys.readouterr().err
    assert not (tmp_path / "none.log").exists()


@pytest.mark.integration
def test_a_worker_joins_a_queued_sweep_and_trains_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`sweep worker` on a sweep queued elsewhere: this process trains every queued run."""
    from sweep.config import load_grid
    from sweep.config.plan import plan

    journal = tmp_path / vocab.JOURNAL_FILE
    store = Store.open(journal, "tiny")
    store.enqueue(plan(load_grid(write_grid(tmp_path, TINY_GRID)))[:1])
    assert cli.main(["worker", "--storage", str(journal), "--study", "tiny"]) == 0
    assert capsys.readouterr().out.count('"event": "end"') == 1  # event lines, for a coordinator
    assert store.counts()[RunStatus.DONE] == 1


@pytest.mark.integration
def test_in_process_ignores_workers_and_devices(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run --in-process --workers 3 --devices 5,6` (docs/commands.md): every run trains in this process, one at
    a time; no worker process starts, and GPUs 5 and 6 are asked of nothing.
    """
    import dataclasses
    import os

    from sweep.run import coordinator, orchestrate

    write_grid(tmp_path, TINY_GRID)
    real_run_sweep, given = orchestrate.run_sweep, []

    def without_report(grid: object, options: orchestrate.Options, *rest: object) -> orchestrate.Ended:
        given.append(options)
        return real_run_sweep(grid, dataclasses.replace(options, report=False), *rest)

    def no_workers(*args: object, **kwargs: object) -> int:
        raise AssertionError("--in-process started worker processes")

    monkeypatch.setattr(orchestrate, "run_sweep", without_report)
    monkeypatch.setattr(coordinator, "run_workers", no_workers)
    monkeypatch.chdir(tmp_path)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    code = cli.main(["run", "grid.yaml", "--in-process", "--workers", "3", "--devices", "5,6"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert [(o.in_process, o.workers, o.devices) for o in given] == [(True, 3, "5,6")]  # taken, then ignored
    assert "worker(s)" not in out and "trained 2 run(s)" in out  # not "starting 3 worker(s) ... GPUs"
    runs = pd.read_csv(tmp_path / "results" / "tiny" / "runs.csv")
    assert runs["status"].tolist() == ["done", "done"]
    assert set(runs["worker_pid"]) == {os.getpid()}  # both trained here
    assert not runs["visible_devices"].astype(str).str.contains("5").any()
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == visible


@pytest.mark.system
def test_worker_coordinating_a_sweep_writes_its_logs_under_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Bug: `sweep worker --workers N` wrote under results/<study> whatever --results said."""
    from sweep.config import load_grid
    from sweep.config.plan import plan

    journal = tmp_path / "elsewhere" / vocab.JOURNAL_FILE
    store = Store.open(journal, "tiny")
    store.enqueue(plan(load_grid(write_grid(tmp_path, TINY_GRID)))[:1])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the worker processes import this checkout
    out = tmp_path / "mine"
    assert (
        cli.main(["worker", "--storage", str(journal), "--study", "tiny", "--workers", "1", "--results", str(out)]) == 0
    ), capsys.readouterr()
    assert (out / vocab.LOG_DIR / "worker-0.log").is_file()
    assert not (tmp_path / "results").exists()
    assert store.counts()[RunStatus.DONE] == 1


@pytest.mark.system  # a signal to this process, two fresh models (about 10 s)
def test_ctrl_c_in_process_queues_the_run_again_and_the_next_run_finishes(tmp_path: Path) -> None:
    from sweep.config import load_grid
    from sweep.run import orchestrate

    grid = write_grid(tmp_path, TINY_GRID.replace("train.batch_size: [4, 8]", "train.batch_size: [8]"))

    def ctrl_c_at_the_first_epoch(line: str) -> None:
        if " epoch 1/2 " in line:
            raise KeyboardInterrupt

    options = orchestrate.Options(results=tmp_path / "out", in_process=True)
    with pytest.raises(KeyboardInterrupt):
        orchestrate.run_sweep(load_grid(grid), options, orchestrate.Console(say=ctrl_c_at_the_first_epoch))
    store = Store.open(tmp_path / "out" / vocab.JOURNAL_FILE, "tiny")
    interrupted = store.sweep.get_trials()[0]
    assert interrupted.user_attrs[vocab.STATUS] == RunStatus.INTERRUPTED and len(store.queued()) == 1
    outcome, _ = sweep_here(grid, results=tmp_path / "out")
    assert outcome.exit_code == 0 and outcome.counts[RunStatus.DONE] == 1


@pytest.mark.unit
def test_version_is_the_installed_packages(capsys: pytest.CaptureFixture) -> None:
    import importlib.metadata

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"sweep (batchsweep) {importlib.metadata.version('batchsweep')}\n"


@pytest.mark.unit
def test_a_bare_sweep_prints_its_help_and_exits_0(capsys: pytest.CaptureFixture) -> None:
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: sweep") and all(f"\n    {c}" in out for c in ("plan", "run", "status", "export"))


@pytest.mark.unit
def test_status_and_export_read_a_results_folder_named_unlike_its_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder's journal names its sweep: `--results out/q` for a grid named "tiny" needs no --study."""
    monkeypatch.chdir(tmp_path)
    write_grid(tmp_path, TINY_GRID)
    assert cli.main(["run", "grid.yaml", "--results", "out/q", "--no-train"]) == 0
    capsys.readouterr()
    assert cli.main(["status", "out/q"]) == 0
    assert capsys.readouterr().out == "tiny: 2 runs in its store: 0 done, 0 running, 0 failed, 0 diverged, 2 pending\n"
    assert cli.main(["export", "out/q"]) == 0
    assert pd.read_csv(tmp_path / "out" / "q" / vocab.RUNS_CSV)[vocab.STATUS].tolist() == [RunStatus.PENDING] * 2


@pytest.mark.unit
def test_a_store_of_several_sweeps_needs_study(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_grid(tmp_path, TINY_GRID)
    write_grid(tmp_path, TINY_GRID.replace("name: tiny", "name: other"), name="other.yaml")
    for grid in ("grid.yaml", "other.yaml"):
        assert cli.main(["run", grid, "--storage", "out/q/journal.log", "--results", "out/q", "--no-train"]) == 0
    capsys.readouterr()
    assert cli.main(["status", "out/q"]) == 2
    assert (
        capsys.readouterr().err
        == "error: out/q/journal.log holds several sweeps (other, tiny); name one with --study\n"
    )


@pytest.mark.unit
def test_the_defaults_the_help_states_are_the_ones_a_run_gets(tmp_path: Path) -> None:
    """Each `(default N)` in `run --help` is what a run without the flag is given."""
    import argparse
    import re

    from sweep.cli import arguments
    from sweep.train.pack import default_size

    parser = argparse.ArgumentParser()
    arguments.worker_args(parser)
    arguments.results_args(parser)
    options = arguments.options(parser.parse_args([]))
    effective = {
        "retries": options.retries,
        "max_requeues": options.max_requeues,
        "trials_per_gpu": options.trials_per_gpu,
        "pack": options.pack or max(default_size(b) for b in (1, 8, 64, 256, 4096)),
    }
    stated = {}
    for action in parser._actions:
        found = re.search(r"\(default (\d+)", action.help or "")
        if found:
            stated[action.dest] = int(found.group(1))
    assert stated == effective


@pytest.mark.unit
@pytest.mark.parametrize("command", ["plan", "run", "status", "worker", "slurm", "time", "report", "export"])
def test_every_command_has_a_description_and_examples(command: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    description = text.split("\n\n")[1]
    assert len(description.split()) >= 10, description  # a sentence or more on what it does
    assert "\nexample" in text and f"sweep {command} " in text.split("\nexample")[1]
