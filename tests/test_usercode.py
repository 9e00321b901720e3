"""The user's own model, data and callbacks: model.builder, data.loader, data.channels, train.callbacks,
train.early_stopping; trained for real, and every broken reference refused before anything is queued.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli, sweep_here, write_grid

from sweep.config import ConfigError, load_grid
from sweep.config.plan import plan

# A builder outside sweep/, as a user writes one: a small functional model with one BatchNormalization.
MODELS = """\
import keras


def build(input_shape, num_classes, filters=4):
    inputs = keras.Input(input_shape)
    x = keras.layers.Conv2D(filters, 3, padding="same")(inputs)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes, activation="softmax")(x))


def not_a_model(input_shape, num_classes):
    return "a string"


def broken(input_shape, num_classes):
    raise RuntimeError("no GPU here")


def stopper():
    return keras.callbacks.EarlyStopping(monitor="loss", patience=0, min_delta=10.0)


def loader():
    rng = __import__("numpy").random.default_rng(0)
    x = rng.integers(0, 256, size=(60, 16, 16, 3), dtype="uint8")
    return x, __import__("numpy").arange(60) % 3
"""

GRID = """\
name: own
seeds: [0]
base:
  data: {dataset: glyphs120, classes: 4, samples_per_class: 10, image_size: 12}
  model: {builder: "models.py:build", options: {filters: 6}}
  train: {epochs: 2, batch_size: 8}
"""


def own_folder(tmp_path: Path, grid: str = GRID) -> Path:
    (tmp_path / "models.py").write_text(MODELS)
    return write_grid(tmp_path, grid)


@pytest.mark.integration
def test_a_builder_outside_sweep_trains_and_runs_csv_counts_its_parameters(tmp_path: Path) -> None:
    import keras

    from sweep.train.model import trainable_parameters

    outcome, _ = sweep_here(own_folder(tmp_path))
    assert outcome.exit_code == 0
    runs = pd.read_csv(tmp_path / "results" / "own" / "runs.csv")
    assert list(runs["status"]) == ["done"] and list(runs["epochs_done"]) == [2]
    namespace: dict = {}
    exec(MODELS, namespace)  # the user's own count, from the user's own function
    own = namespace["build"]((12, 12, 1), 4, filters=6)
    expected = sum(int(np.prod(w.shape)) for w in own.trainable_weights)
    assert isinstance(own, keras.Model) and runs["parameters"].iloc[0] == expected == trainable_parameters(own)
    assert runs["model.builder"].iloc[0] == f"{tmp_path / 'models.py'}:build"
    assert runs["model.options"].iloc[0] == '{"filters": 6}'


@pytest.mark.integration
def test_a_loader_gives_colour_images_and_ghost_batch_norm_swaps_the_builders_layer(tmp_path: Path) -> None:
    grid = GRID.replace(
        "data: {dataset: glyphs120, classes: 4, samples_per_class: 10, image_size: 12}",
        'data: {dataset: loader, loader: "models.py:loader", channels: 3, samples_per_class: 20, image_size: 16}',
    ).replace("options: {filters: 6}", "options: {filters: 6}, ghost_batch_size: 4")
    outcome, _ = sweep_here(own_folder(tmp_path, grid))
    assert outcome.exit_code == 0
    runs = pd.read_csv(tmp_path / "results" / "own" / "runs.csv")
    assert list(runs["status"]) == ["done"]
    # 3 classes of 20 images, 4 held out per class; a colour conv with 6 filters: 3*3*3*6 + 6 + 2*6 + 6*3 + 3
    assert (runs["num_classes"].iloc[0], runs["train_samples"].iloc[0], runs["val_samples"].iloc[0]) == (3, 48, 12)
    assert runs["parameters"].iloc[0] == 3 * 3 * 3 * 6 + 6 + 2 * 6 + 6 * 3 + 3


@pytest.mark.integration
def test_the_ghost_swap_keeps_the_users_layers_and_replaces_batch_norm(tmp_path: Path) -> None:
    from sweep.config import ModelConfig
    from sweep.train.model import build_model

    (tmp_path / "models.py").write_text(MODELS)
    cfg = ModelConfig(builder=f"{tmp_path / 'models.py'}:build", ghost_batch_size=4)
    names = [type(layer).__name__ for layer in build_model(cfg, 12, 4).layers]
    assert "GhostBatchNormalization" in names and "BatchNormalization" not in names and "Conv2D" in names


@pytest.mark.integration
def test_early_stopping_ends_a_run_before_its_epochs_and_runs_csv_says_when(tmp_path: Path) -> None:
    # min_delta 1.0: val_acc can never improve by more than 1, so the run stops after epoch 1 + patience
    grid = GRID.replace("train: {epochs: 2, batch_size: 8}", "train: {epochs: 6, batch_size: 8}") + (
        "grid:\n  train.early_stopping: [{metric: val_acc, patience: 2, min_delta: 1.0}, null]\n"
    )
    outcome, _ = sweep_here(own_folder(tmp_path, grid))
    assert outcome.exit_code == 0
    runs = pd.read_csv(tmp_path / "results" / "own" / "runs.csv").set_index("train.early_stopping", drop=False)
    stopped = runs[runs["train.early_stopping"].notna()].iloc[0]
    full = runs[runs["train.early_stopping"].isna()].iloc[0]
    assert (stopped["status"], stopped["epochs_done"], stopped["stopped_early"]) == ("done", 3, 3)
    assert (full["status"], full["epochs_done"]) == ("done", 6) and pd.isna(full["stopped_early"])
    epochs = pd.read_csv(tmp_path / "results" / "own" / "epochs.csv")
    assert epochs.groupby("run_id")["epoch"].max().sort_values().tolist() == [3, 6]
    assert stopped["final_val_acc"] == epochs[epochs["run_id"] == stopped["run_id"]]["val_acc"].iloc[-1]


@pytest.mark.integration
def test_a_callback_from_the_users_file_is_used_and_can_stop_the_run(tmp_path: Path) -> None:
    grid = GRID.replace("train: {epochs: 2, batch_size: 8}", 'train: {epochs: 4, callbacks: ["models.py:stopper"]}')
    outcome, _ = sweep_here(own_folder(tmp_path, grid))
    assert outcome.exit_code == 0
    runs = pd.read_csv(tmp_path / "results" / "own" / "runs.csv")
    # Keras's EarlyStopping with patience 0 and an unreachable min_delta stops after the second epoch
    assert (runs["epochs_done"].iloc[0], runs["stopped_early"].iloc[0]) == (2, 2)


@pytest.mark.system
@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ('model: {builder: "models.py:missing"}', "model.builder {}/models.py:missing: {}/models.py has no function"),
        ('model: {builder: "models.py:buld"}', "{}/models.py has no function buld; did you mean 'build'?"),
        ('model: {builder: "models.py:not_a_model"}', "returned str, not a keras.Model"),
        (
            'model: {builder: "models.py:broken"}',
            "raised RuntimeError: no GPU here; the call was broken((12, 12, 1), 4)",
        ),
        ('model: {builder: "no_such_module:build"}', "cannot import no_such_module: ModuleNotFoundError"),
        ('train: {callbacks: ["models.py:build"]}', "train.callbacks"),
    ],
)
def test_a_broken_reference_is_one_line_exit_2_and_nothing_is_written(tmp_path: Path, base: str, expected: str) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    grid = write_grid(
        tmp_path, f"name: bad\nbase:\n  data: {{classes: 4, samples_per_class: 10, image_size: 12}}\n  {base}\n"
    )
    done = run_cli("run", str(grid), "--workers", "1", cwd=tmp_path, timeout=600)
    assert done.returncode == 2, done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and expected.format(tmp_path, tmp_path) in error[0], done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "results").exists()
    assert done.stderr == error[0] + "\n"  # nothing of TensorFlow's start-up on the terminal


@pytest.mark.system
def test_the_sweep_script_imports_a_module_from_the_working_folder_and_a_files_neighbours(tmp_path: Path) -> None:
    """As a user runs it: the `sweep` console script (whose own folder, not the working folder, is first on
    sys.path) with "mymodels:build" from the folder it runs in, and "code/withhelper.py:build" whose file imports
    the module beside it; the grid file in a folder of its own.
    """
    import shutil
    import subprocess
    import sys

    (tmp_path / "mymodels.py").write_text(MODELS)
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "helper.py").write_text(MODELS)
    (tmp_path / "code" / "withhelper.py").write_text("from helper import build  # noqa: F401\n")
    (tmp_path / "grids").mkdir()
    script = shutil.which("sweep", path=str(Path(sys.executable).parent))
    assert script is not None
    for builder in ("mymodels:build", str(tmp_path / "code" / "withhelper.py") + ":build"):
        grid = write_grid(
            tmp_path / "grids",
            f"name: own\nbase:\n  data: {{classes: 4, samples_per_class: 10, image_size: 12}}\n"
            f'  model: {{builder: "{builder}"}}\n  train: {{epochs: 1}}\n',
        )
        done = subprocess.run(
            [script, "run", str(grid), "--workers", "1", "--results", str(tmp_path / "r" / builder[-12:])],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr


@pytest.mark.unit
@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ("model: {options: {a: 1}}", "model.options are the keyword arguments of model.builder"),
        ('model: {builder: "models.py:build", width: 2.0}', "model.width is a setting of the built-in model"),
        ("data: {channels: 3}", "data.channels: only used with data.dataset folder | npz | loader"),
        ("data: {dataset: loader}", "data.loader is required for data.dataset=loader"),
        ("train: {early_stopping: {metric: accuracy}}", "metric must be one of val_acc"),
        ("train: {early_stopping: {metric: val_acc_recal}}", "recorded only with train.recalibrate_bn: true"),
        ('model: {builder: "models.py"}', 'must be "package.module:function"'),
        ('model: {builder: "nofile.py:build"}', "no such file or folder"),
    ],
)
def test_settings_that_do_not_fit_together_are_refused(tmp_path: Path, settings: str, expected: str) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    with pytest.raises(ConfigError, match=expected.replace("|", r"\|").replace("(", r"\(")):
        load_grid(write_grid(tmp_path, f"name: bad\nbase:\n  {settings}\n"))


@pytest.mark.system  # four runs of six epochs: a minute
def test_the_documented_example_builder_trains(tmp_path: Path) -> None:
    """docs/data.md's "Your own model and data" example, copied out of it and run as written."""
    reference = (Path(__file__).resolve().parent.parent / "docs" / "data.md").read_text()
    section = reference[reference.index("## Your own model and data") :]
    files = {}
    for block in section.split("```")[1::2]:  # the fenced blocks: a language line, then "# file name"
        body = block.split("\n", 1)[1]
        if body.startswith("# my_"):  # a file of the example, not a command to run with it
            files[body.splitlines()[0].removeprefix("# ")] = body
    assert sorted(files) == ["my_data.py", "my_grid.yaml", "my_model.py"]
    shipped = Path(__file__).resolve().parent.parent / "experiments" / "own_model"
    assert {name: (shipped / name).read_text() for name in files} == files  # the study's copies are the same files
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    grid = tmp_path / "my_grid.yaml"
    outcome, _ = sweep_here(grid, report=True)
    assert outcome.exit_code == 0
    runs = pd.read_csv(tmp_path / "results" / "my_model" / "runs.csv")
    assert (runs["status"] == "done").all() and len(runs) == len(plan(load_grid(grid))) == 4
    assert (runs["num_classes"] == 10).all() and (tmp_path / "results" / "my_model" / "report.md").is_file()


@pytest.mark.unit
def test_a_loader_is_held_to_the_npz_contract_before_anything_is_queued(tmp_path: Path) -> None:
    from sweep.run import preflight
    from sweep.train import usercode

    (tmp_path / "bad_data.py").write_text(
        "import numpy as np\n\ndef short():\n    return np.zeros((6, 12, 12), 'uint8'), np.arange(5)\n\n"
        "def lists():\n    return [[0]], [0]\n\n"
        "def one_each():\n    return np.zeros((3, 12, 12), 'uint8'), np.arange(3)\n"
    )
    base = "name: bad\nbase:\n  data: {dataset: loader, loader: 'bad_data.py:%s'}\n"
    for name, expected in (
        ("short", f"data.loader {tmp_path}/bad_data.py:short: array y has 5 labels but x has 6 images"),
        ("lists", "x and y must be numpy arrays"),
        ("one_each", r"data: class '0' has 1 image\(s\) .*too few to split into train and validation"),
    ):
        grid = load_grid(write_grid(tmp_path, base % name))
        with pytest.raises(usercode.UserCodeError, match=expected):
            preflight.check(point for point, _ in grid.points())
