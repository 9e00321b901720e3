"""The Keras backend as a fact of every run: the same sweep on JAX, refusals before anything trains,
and runs on different backends never paired by the report (sweep/train/backends.py).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import services
from conftest import REPO, cli_env, write_grid

from sweep import analysis as an
from sweep import vocab
from sweep.analysis import selection
from sweep.cli import main
from sweep.config import load_grid
from sweep.config.plan import plan
from sweep.store import Store
from sweep.train import backends
from sweep.vocab import RunStatus

ARTICLE = REPO / "results" / "article"  # 16 TensorFlow runs (batch 8 and 64, seeds 0-7), no backend column

# 8 classes x 20 images, 1 epoch; gpus 1 and 2 -> 2 runs
TWO_REPLICAS = """
    name: replicas
    seeds: [0]
    base:
      data: {classes: 8, samples_per_class: 20, image_size: 16}
      train: {epochs: 1}
    grid:
      train.gpus: [1, 2]
"""


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run the CLI; assert exit 2, one line on stderr and nothing written; return the line."""
    results = tmp_path / "results"
    assert main([*args, "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert not results.exists()
    return err.strip()


def _on_backend(
    backend: str, *args: str, cwd: Path = REPO, timeout: int = 600, **env: str
) -> subprocess.CompletedProcess:
    """`python ARGS` in a fresh process whose Keras backend is `backend`."""
    if backend == "torch":  # torch is an extra of its own ('.[torch]'), not part of the test extra
        services.require("torch")
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=cli_env(KERAS_BACKEND=backend, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _tests_pass_on(backend: str, *args: str, timeout: int = 1200) -> None:
    """pytest ARGS in a process of this backend, every tier of the files: every chosen test passes, and
    at least one ran (not a count: a test added to those files must not break this one).
    """
    pytest_args = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "unit or integration or system", *args)
    done = _on_backend(backend, *pytest_args, timeout=timeout)
    lines = done.stdout.strip().splitlines()
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", lines[-1] if lines else "")}
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]  # 5: no tests ran
    assert counts.get("passed", 0) >= 1 and not {"failed", "error", "errors"} & counts.keys(), done.stdout[-3000:]


@pytest.mark.unit
def test_what_torch_cannot_do_is_one_line_and_exit_2_before_anything_trains(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    grid = str(write_grid(tmp_path, TWO_REPLICAS))
    assert _refused(tmp_path, capsys, "run", grid) == (
        "error: grid.yaml: train.gpus: 2 is not supported on the torch backend (KERAS_BACKEND=torch); "
        "use gpus: 1, or KERAS_BACKEND=tensorflow or jax"
    )
    assert "train.gpus: 2 is not supported on the torch backend" in _refused(tmp_path, capsys, "time", grid)


@pytest.mark.unit
def test_a_backend_keras_has_but_the_trainer_does_not_is_refused_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERAS_BACKEND", "openvino")
    smoke = str(REPO / "experiments" / "smoke.yaml")
    assert _refused(tmp_path, capsys, "run", smoke) == (
        "error: smoke.yaml: training is not supported on the openvino backend (KERAS_BACKEND=openvino); "
        "use KERAS_BACKEND=tensorflow or jax or torch"
    )


@pytest.mark.unit
def test_jax_accepts_replicas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gpus: 2 trains on JAX (keras.distribution.DataParallel; the system tests below train it)."""
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    backends.check("grid.yaml", [point for point, _ in load_grid(write_grid(tmp_path, TWO_REPLICAS)).points()])


@pytest.mark.unit
def test_a_store_of_runs_trained_on_another_backend_is_refused_before_anything_is_queued(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run id names the settings, not the backend: the jax process would take the tensorflow runs
    for its own finished ones. Runs recorded before the backend was count as tensorflow.
    """
    grid = write_grid(tmp_path, TWO_REPLICAS.replace("[1, 2]", "[1]"))  # 1 run
    results = tmp_path / "results"
    store = Store.open(results / vocab.JOURNAL_FILE, "replicas")
    store.enqueue(plan(load_grid(grid)))
    lease = store.start(store.claim_next())
    store.record_info(lease, {"parameters": 1})  # written before runs.csv had a backend column: tensorflow
    store.finish(lease, RunStatus.DONE, 0.5)
    before = (results / vocab.JOURNAL_FILE).read_bytes()
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert main(["run", str(grid), "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(
        "journal.log: its runs trained on tensorflow and this process trains on jax (KERAS_BACKEND); "
        "give the jax runs a results folder of their own (--results DIR)"
    )
    assert len(err.splitlines()) == 1 and (results / vocab.JOURNAL_FILE).read_bytes() == before
    assert not (results / vocab.RUNS_CSV).exists()


@pytest.mark.unit
def test_the_backend_is_found_as_keras_finds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    assert backends.current() == "tensorflow"  # no keras.json: Keras's default
    (tmp_path / "keras.json").write_text(json.dumps({"backend": "jax"}))
    assert backends.current() == "jax"
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")  # the variable wins over the file, as in Keras
    assert backends.current() == "tensorflow"


@pytest.mark.unit
def test_runs_on_another_backend_are_other_runs_and_never_paired_across(tmp_path: Path) -> None:
    """The same run ids on jax (a copy of the TensorFlow results with a backend column) are kept beside the
    TensorFlow ones, and every pair of a paired comparison holds runs of one backend.
    """
    other = tmp_path / "jax"
    other.mkdir()
    pd.read_csv(ARTICLE / vocab.RUNS_CSV).assign(backend="jax").to_csv(other / vocab.RUNS_CSV, index=False)
    shutil.copy(ARTICLE / vocab.EPOCHS_CSV, other / vocab.EPOCHS_CSV)
    both = an.load([ARTICLE, other])
    assert len(both.runs) == 32  # 16 runs x 2 backends: the same spec on another backend is another run
    last = both.epochs[both.epochs[vocab.EPOCH] == both.epochs[vocab.EPOCH].max()]
    assert last[vocab.BACKEND].fillna("tensorflow").value_counts().to_dict() == {"tensorflow": 16, "jax": 16}
    keys = selection.pair_keys(last, "train.batch_size")
    per_pair = last.assign(_pair=keys, _backend=last[vocab.BACKEND].fillna("tensorflow")).groupby("_pair")
    assert per_pair["_backend"].nunique().max() == 1 and per_pair.size().tolist() == [2] * 16  # bs8 + bs64, 1 backend
    assert selection.paired(last, "train.batch_size", 8, 64, vocab.VAL_ACC).n == 16  # 8 seeds x 2 backends
    chosen = selection.choose_context(last, "train.batch_size")
    assert chosen is not None and chosen.rows[vocab.BACKEND].fillna("tensorflow").nunique() == 1


@pytest.mark.system
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_smoke_grid_runs_on_the_backend_and_gives_the_same_records_twice(tmp_path: Path, backend: str) -> None:
    """Bit for bit at one thread: JAX on the CPU is deterministic; torch with deterministic algorithms
    (train.seed_everything). jit_compile is on on JAX only (torch's would be torch.compile).
    """
    epochs = []
    for name in ("first", "second"):
        results = tmp_path / name
        smoke = ("-m", "sweep", "run", "experiments/smoke.yaml", "--results", str(results))
        done = _on_backend(backend, *smoke, BATCHSWEEP_THREADS="1")
        assert done.returncode == 0, done.stderr[-2000:]
        runs = pd.read_csv(results / vocab.RUNS_CSV)
        assert runs[vocab.STATUS].tolist() == ["done", "done"]  # 2 batch sizes x 1 seed -> 2 runs
        assert runs[vocab.BACKEND].tolist() == [backend, backend]
        if backend == "torch":  # its thread count, from the worker's OMP_NUM_THREADS (JAX's XLA takes a core each)
            assert runs["threads"].tolist() == [1, 1]
        assert runs["jit_compile"].tolist() == [backend == "jax"] * 2
        epochs.append(pd.read_csv(results / vocab.EPOCHS_CSV).drop(columns=["epoch_seconds", "samples_per_second"]))
        assert f"| Keras backend (runs.csv) | {backend} (2 runs) |" in (results / "report.md").read_text()
    assert len(epochs[0]) == 4  # 2 runs x 2 epochs
    pd.testing.assert_frame_equal(epochs[0], epochs[1])


@pytest.mark.system
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_packed_runs_record_what_they_record_alone_on_the_backend(backend: str) -> None:
    """tests/test_pack.py in a process of the backend: every record of a packed run equals, bit for bit,
    the run's alone (each tower's ops are the ops it runs alone; sweep/train/pack.py).
    """
    _tests_pass_on(backend, "tests/test_pack.py", timeout=2400)


@pytest.mark.system
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_recalibrated_statistics_are_the_pooled_moments_on_the_backend(backend: str) -> None:
    """tests/test_recal.py's statistics in a process of the backend: Keras's BatchNorm read from its own
    moments at momentum 0 and ghost batch norm from its inputs give the pooled mean and variance numpy
    computes, and the recalibrated numbers are those of Keras's BatchNorm set to them.
    """
    _tests_pass_on(backend, "tests/test_recal.py", "-k", "pooled_over or keras_batchnorm")


@pytest.mark.system
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_checkpoints_restore_bit_for_bit_on_the_backend(backend: str) -> None:
    """tests/test_checkpoint.py on one device, in a process of the backend: a run restored from its checkpoint
    writes the records of one never stopped (the 2-replica restore on JAX: test_the_replica_tests_pass_on_jax).
    """
    _tests_pass_on(backend, "tests/test_checkpoint.py", "-k", "not mirrored")


@pytest.mark.system
def test_a_jax_run_trains_without_importing_tensorflow() -> None:
    """TensorFlow is installed here; a JAX run seeds itself without it (train.set_random_seed), so it
    trains where TensorFlow is not installed at all.
    """
    script = (
        "import sys\n"
        "from test_train import tiny_spec\n"
        "from sweep.train.trainer import Trainer\n"
        "records = list(Trainer.alone(tiny_spec()).epochs())\n"
        "assert len(records) == 2, records\n"
        "print('tensorflow' in sys.modules)\n"
    )
    done = _on_backend("jax", "-c", script, cwd=REPO / "tests")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


@pytest.mark.system
def test_replicas_train_on_jax_and_give_the_same_records_twice(tmp_path: Path) -> None:
    """gpus: [1, 2] on JAX: the 2-replica run trains under DataParallel on 2 host devices of the CPU,
    the global batch split across them; the grid trained twice gives the same records bit for bit.
    """
    grid = write_grid(tmp_path, TWO_REPLICAS)
    epochs = []
    for name in ("first", "second"):
        results = tmp_path / name
        done = _on_backend("jax", "-m", "sweep", "run", str(grid), "--results", str(results), BATCHSWEEP_THREADS="1")
        assert done.returncode == 0, done.stderr[-2000:]
        runs = pd.read_csv(results / vocab.RUNS_CSV).set_index("train.gpus")
        assert runs[vocab.STATUS].tolist() == ["done", "done"]
        assert runs.replicas.to_dict() == {1: 1, 2: 2} and runs.per_replica_batch.to_dict() == {1: 32, 2: 16}
        assert runs.virtual_devices.to_dict() == {1: False, 2: True} and runs.devices[2] == "cpu:0,cpu:1"
        assert (runs[vocab.BACKEND] == "jax").all() and runs.threads.tolist() == [1, 1]
        epochs.append(pd.read_csv(results / vocab.EPOCHS_CSV).drop(columns=["epoch_seconds", "samples_per_second"]))
    pd.testing.assert_frame_equal(epochs[0], epochs[1])  # bit for bit
    one, two = (epochs[0][epochs[0]["train.gpus"] == g].drop(columns=["run_id", "train.gpus"]) for g in (1, 2))
    # BatchNorm normalises over the global batch under DataParallel, as on one device: equal up to float sums
    pd.testing.assert_frame_equal(one.reset_index(drop=True), two.reset_index(drop=True), rtol=1e-4)


@pytest.mark.system
def test_the_replica_tests_pass_on_jax() -> None:
    """The TensorFlow replica tests that hold on JAX, in a process whose backend is jax: the global batch
    split across 2 replicas, a 2-replica run restored from its checkpoint, the recalibrated evaluation
    on 2 replicas. (tests/test_controls.py's ghost-batch replica test does not hold: under DataParallel
    BatchNorm normalises over the global batch, not over each replica's share.)
    """
    chosen = "two_replicas or mirrored or (recalibration_adds and 2)"
    files = ["tests/test_train.py", "tests/test_checkpoint.py", "tests/test_recal.py"]
    _tests_pass_on("jax", *files, "-k", chosen)


@pytest.mark.unit
def test_a_short_last_batch_jax_cannot_split_evenly_fails_its_run_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from sweep.train import devices
    from sweep.train.data import DataError

    two = devices.Replicas(("cpu:0", "cpu:1"), virtual=True)
    devices.check_even_split(two, 27, 8)  # TensorFlow splits the last batch of 3 unevenly
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    devices.check_even_split(two, 26, 8)  # a last batch of 2: one image per replica
    with pytest.raises(DataError, match="27 training images in batches of 8 end with a batch of 3, which the jax"):
        devices.check_even_split(two, 27, 8)


GRADIENT = """
import sys
import keras
import numpy as np
from sweep.train import noise
from sweep.config import ModelConfig
from sweep.train.model import build_model

# The same weights every run. Unseeded, now and then a tie in the first block's ReLU or max-pool took
# TensorFlow's subgradient one way and JAX's and torch's another: conv1 and bn0 1.2-1.6% apart (seed 0
# does; JAX agrees to 2e-6 at seeds 1-5, torch at 1). What is checked is the plumbing, not kink conventions.
keras.utils.set_random_seed(1)
model = build_model(ModelConfig(), 12, 4)  # the built-in CNN, BatchNorm in training mode
gradient = noise.keras_gradient(model, keras.losses.SparseCategoricalCrossentropy())
if keras.backend.backend() == "tensorflow":
    rng = np.random.default_rng(0)
    x, y = rng.random((16, 12, 12, 1), dtype=np.float32), rng.integers(0, 4, 16).astype(np.int32)
    np.savez(sys.argv[1], *model.get_weights(), x=x, y=y, gradient=gradient(x, y))
else:
    saved = np.load(sys.argv[1])
    model.set_weights([saved[f"arr_{i}"] for i in range(len(model.weights))])
    found, expected = gradient(saved["x"], saved["y"]), saved["gradient"]
    print(np.abs(found - expected).max() / np.abs(expected).max())
"""


@pytest.mark.system
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_noise_scale_gradient_is_tensorflows_on_the_same_weights(tmp_path: Path, backend: str) -> None:
    """noise.keras_gradient by the backend's own autodiff: TensorFlow's gradient within float32 rounding."""
    saved = tmp_path / "tf.npz"
    for name in ("tensorflow", backend):
        done = _on_backend(name, "-c", GRADIENT, str(saved), timeout=300, BATCHSWEEP_THREADS="1")
        assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.strip().splitlines()[-1]) < 1e-5  # largest difference, relative to the largest entry


NOISE = """
import math
from test_train import tiny_spec, without_timings
from sweep import vocab
from sweep.train.trainer import Trainer

plain = without_timings(list(Trainer.alone(tiny_spec(eval_every_steps=1)).epochs()))
measured = without_timings(list(Trainer.alone(tiny_spec(eval_every_steps=1, noise_scale=True)).epochs()))
assert [{k: v for k, v in r.items() if k not in vocab.NOISE_METRICS} for r in measured] == plain
first = measured[0][vocab.NOISE_SCALE]  # step 1: far from a minimum, so |G|^2's estimate is well above 0
assert math.isfinite(first) and first > 0, measured[0]
print(first)
"""


@pytest.mark.system
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_noise_scale_is_measured_on_the_backend_and_changes_nothing_else(backend: str) -> None:
    """B_simple recorded by a run on jax or torch, finite and positive, its other numbers those of the same
    run without it (BatchNorm's moving statistics put back after measuring).
    """
    done = _on_backend(backend, "-c", NOISE, cwd=REPO / "tests", timeout=900, BATCHSWEEP_THREADS="1")
    assert done.returncode == 0, done.stderr[-2000:]
