"""`sweep export` (sweep/export/): the committed results/article written for TensorBoard and MLflow,
read back with TensorBoard's and MLflow's own readers.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweep import cli, vocab
from sweep.export import targets
from sweep.vocab import RunStatus
from tests.conftest import REPO

ARTICLE = REPO / "results" / "article"
RUNS = pd.read_csv(ARTICLE / vocab.RUNS_CSV)
EPOCHS = pd.read_csv(ARTICLE / vocab.EPOCHS_CSV)


@pytest.fixture(scope="module")
def tensorboard_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tb")
    assert cli.main(["export", str(ARTICLE), "--tensorboard", str(out)]) == 0
    return out


def _accumulator(folder: Path):
    from tensorboard.backend.event_processing import event_accumulator

    acc = event_accumulator.EventAccumulator(str(folder), size_guidance={event_accumulator.TENSORS: 0})
    acc.Reload()
    return acc


def _scalars(acc, tag: str) -> list[tuple[int, float]]:
    from tensorboard.util import tensor_util

    return [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)]


def _records(run_id: str) -> pd.DataFrame:
    return EPOCHS[EPOCHS[vocab.RUN_ID] == run_id].sort_values(vocab.STEP)


@pytest.mark.integration
def test_tensorboard_has_one_run_per_run_and_its_final_val_acc(tensorboard_out: Path) -> None:
    folders = sorted(p.name for p in tensorboard_out.iterdir() if p.is_dir())
    assert folders == sorted(RUNS[vocab.RUN_ID])  # 2 batch sizes x 8 seeds -> 16 runs
    for _, run in RUNS.iterrows():
        acc = _accumulator(tensorboard_out / run[vocab.RUN_ID])
        val_acc = _scalars(acc, vocab.VAL_ACC)
        records = _records(run[vocab.RUN_ID])
        assert [step for step, _ in val_acc] == list(records[vocab.STEP])  # bs8 has records inside epochs
        assert val_acc[-1][1] == np.float32(run["final_val_acc"])  # TensorBoard keeps float32
        for metric in (vocab.EPOCH, vocab.TRAIN_ACC, vocab.VAL_LOSS, vocab.GAP, vocab.VAL_ACC_RECAL):
            assert [v for _, v in _scalars(acc, metric)] == list(records[metric].astype(np.float32))


@pytest.mark.unit
def test_tensorboard_has_the_hparams_session_of_each_run(tensorboard_out: Path) -> None:
    from tensorboard.plugins.hparams import metadata

    experiment = metadata.parse_experiment_plugin_data(
        _accumulator(tensorboard_out).SummaryMetadata(metadata.EXPERIMENT_TAG).plugin_data.content
    )
    # the settings that differ between the folder's runs, and the status
    assert {h.name for h in experiment.hparam_infos} == {"train.batch_size", "seed", "status"}
    assert vocab.VAL_ACC in {m.name.tag for m in experiment.metric_infos}
    for _, run in RUNS.iterrows():
        acc = _accumulator(tensorboard_out / run[vocab.RUN_ID])
        content = acc.SummaryMetadata(metadata.SESSION_START_INFO_TAG).plugin_data.content
        session = metadata.parse_session_start_info_plugin_data(content)
        assert session.hparams["train.batch_size"].number_value == run["train.batch_size"]
        assert session.hparams["seed"].number_value == run["seed"]
        assert session.hparams[vocab.STATUS].string_value == RunStatus.DONE


@pytest.mark.unit
def test_exporting_again_replaces_the_event_files(tensorboard_out: Path) -> None:
    assert cli.main(["export", str(ARTICLE), "--tensorboard", str(tensorboard_out)]) == 0
    run = tensorboard_out / RUNS[vocab.RUN_ID][0]
    assert len(list(run.glob("events.out.tfevents.*"))) == 1
    assert len(_scalars(_accumulator(run), vocab.VAL_ACC)) == len(_records(RUNS[vocab.RUN_ID][0]))


@pytest.mark.integration
def test_mlflow_has_one_run_per_run_with_params_metrics_and_the_report(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert cli.main(["export", str(ARTICLE), "--mlflow", uri]) == 0
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("article")
    assert experiment is not None
    logged = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert sorted(logged) == sorted(RUNS[vocab.RUN_ID])
    for _, run in RUNS.iterrows():
        found = logged[run[vocab.RUN_ID]]
        history = client.get_metric_history(found.info.run_id, vocab.VAL_ACC)
        assert [m.step for m in sorted(history, key=lambda m: m.step)] == list(_records(run[vocab.RUN_ID])[vocab.STEP])
        assert found.data.metrics[vocab.VAL_ACC] == run["final_val_acc"]
        assert found.data.params["train.batch_size"] == str(run["train.batch_size"])
        assert found.data.params["seed"] == str(run["seed"]) and found.info.status == "FINISHED"
        assert {a.path for a in client.list_artifacts(found.info.run_id)} == {"report.md", "report.html"}
    assert (tmp_path / "mlartifacts").is_dir()  # beside the database, not in the working folder
    assert cli.main(["export", str(ARTICLE), "--mlflow", uri]) == 0  # again: adds nothing
    assert len(client.search_runs([experiment.experiment_id])) == len(RUNS)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["export", "{tmp}", "--tensorboard", "{tmp}/tb", "--study", "x"], "--study read a store"),
        (["export", "{tmp}", "--tensorboard", "{tmp}/tb"], "no runs.csv"),
        (["export", "{tmp}/missing", "--mlflow", "sqlite:///{tmp}/m.db"], "no such folder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([a.format(tmp=tmp_path) for a in args]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err
    assert not (tmp_path / "tb").exists() and not (tmp_path / "m.db").exists()


@pytest.mark.system  # MLflow starts a process (uname) as it loads
def test_an_mlflow_uri_with_a_password_is_masked_in_its_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["export", str(ARTICLE), "--mlflow", "bogus://u:Zq9secret@127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --mlflow bogus://u:***@127.0.0.1:1: ") and "Zq9secret" not in err


@pytest.mark.unit
@pytest.mark.parametrize("extra", ["tensorboard", "mlflow"])
def test_a_missing_extra_names_its_install_command(
    extra: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, extra, None)  # the package is not installed: `import` raises ImportError
    assert cli.main(["export", str(ARTICLE), f"--{extra}", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --{extra} needs the {extra} extra: pip install 'batchsweep[{extra}]' " + (
        f"(in a checkout: pip install -e '.[{extra}]')\n"
    )


LINES_TARGET = targets.Target(
    name="lines",
    module="to_lines",
    metavar="FILE",
    help="a text file holding the number of runs",
    tool="a text file",
    writes="a text file: the number of runs",
    needs=("json",),
    examples=("sweep export results/article --lines runs.txt",),
)
TO_LINES = """\
def write(results, where):
    with open(where, "w") as out:
        out.write(str(len(results.runs)))
    return f"lines: {len(results.runs)} runs in {where}"
"""


@pytest.mark.unit
def test_a_new_target_is_one_registry_entry_and_the_command_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The flag, its help, the command's description and examples, the extra's message and the checks of
    what a results folder's export may be given all come from the registry (sweep/export/targets.py).
    """
    (tmp_path / "to_lines.py").write_text(TO_LINES, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(targets.TARGETS, "lines", LINES_TARGET)
    with pytest.raises(SystemExit):
        cli.main(["export", "--help"])
    shown = capsys.readouterr().out
    options = shown.split("\noptions:\n")[1].split("\n\n")[0]
    flags = [line.split()[0] for line in options.splitlines() if line.startswith("  --")]
    assert flags == ["--results", "--storage", "--study", *(f"--{name}" for name in targets.TARGETS)]
    assert flags[-3:] == ["--tensorboard", "--mlflow", "--lines"]
    assert "--lines FILE" in shown and "a text file holding the number of runs" in shown
    assert "With --tensorboard, --mlflow or --lines: " in shown and "\n  a text file: the number of runs.\n" in shown
    assert "'batchsweep[mlflow]' or 'batchsweep[lines]'." in shown
    assert shown.endswith("\n  sweep export results/article --lines runs.txt\n")
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "TensorBoard, MLflow or a text file (no TensorFlow)" in " ".join(capsys.readouterr().out.split())

    out = tmp_path / "runs.txt"
    assert cli.main(["export", str(ARTICLE), "--lines", str(out)]) == 0
    assert capsys.readouterr().out == f"lines: {len(RUNS)} runs in {out}\n"
    assert out.read_text(encoding="utf-8") == str(len(RUNS))
    assert cli.main(["export", str(ARTICLE), "--lines", str(out), "--study", "x"]) == 2
    assert "--tensorboard, --mlflow and --lines of a results folder read its CSVs" in capsys.readouterr().err

    missing = dataclasses.replace(LINES_TARGET, needs=("no_such_package_of_lines",))
    monkeypatch.setitem(targets.TARGETS, "lines", missing)
    assert cli.main(["export", str(ARTICLE), "--lines", str(tmp_path / "again.txt")]) == 2
    assert capsys.readouterr().err.startswith("error: --lines needs the lines extra: pip install 'batchsweep[lines]' ")
    assert not (tmp_path / "again.txt").exists()


@pytest.mark.system  # a fresh interpreter: this process has TensorFlow loaded already
def test_export_to_tensorboard_does_not_import_tensorflow(tmp_path: Path) -> None:
    code = (
        "import sys; from sweep.cli import main; "
        f"assert main(['export', {str(ARTICLE)!r}, '--tensorboard', {str(tmp_path)!r}]) == 0; "
        "print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout
