"""Grid-file validation: every bad input gets one line naming the file, the key and the fix."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import REPO, write_grid

from sweep import cli
from sweep.config import ConfigError, DataConfig, PointConfig, TrainConfig, load_grid
from sweep.config.plan import plan

pytestmark = pytest.mark.unit

# The valid keys that "unknown key" messages list, in declaration order (sweep/config/keys.py).
DATA_KEYS = ", ".join(f.name for f in dataclasses.fields(DataConfig))
TRAIN_KEYS = ", ".join(f.name for f in dataclasses.fields(TrainConfig))


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_grid(write_grid(tmp_path, text))
    return str(info.value)


def test_defaults_match_the_documented_schema(tmp_path: Path) -> None:
    grid = load_grid(write_grid(tmp_path, "name: x\n"))
    assert grid.base == PointConfig()
    data, train = grid.base.data, grid.base.train
    assert (data.dataset, data.samples_per_class, data.image_size) == ("glyphs120", 100, 32)
    assert (data.val_fraction, data.shuffle, data.imbalance) == (0.2, True, 0.0)
    assert (grid.base.model.width, grid.base.model.batchnorm, grid.base.model.bn_momentum) == (1.0, True, 0.99)
    assert (train.epochs, train.batch_size, train.lr, train.gpus) == (10, 32, 0.001, 1)
    assert grid.seeds == (0,) and grid.grid == ()


def test_grid_values_are_parsed_in_file_order(tmp_path: Path) -> None:
    grid = load_grid(
        write_grid(
            tmp_path,
            """
        name: g
        seeds: [0, 1, 2]
        base: {train: {epochs: 3}}
        grid: {train.batch_size: [8, 64], data.shuffle: [true, false]}
    """,
        )
    )
    assert grid.grid == (("train.batch_size", (8, 64)), ("data.shuffle", (True, False)))
    assert grid.seeds == (0, 1, 2) and grid.base.train.epochs == 3


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "name: x\ngrid: {train.batch_size: [8, -4]}\n",
            "grid.yaml: grid.train.batch_size[1]: must be a positive integer, got -4",
        ),
        (
            "name: x\nbse: {}\n",
            "grid.yaml: bse: unknown key; did you mean 'base'? valid keys: name, seeds, base, grid, variants, search",
        ),
        (
            "name: x\nbase: {train: {batch_sise: 8}}\n",
            f"grid.yaml: base.train.batch_sise: unknown key; did you mean 'batch_size'? valid keys: {TRAIN_KEYS}",
        ),
        (
            "name: x\nbase: {trian: {}}\n",
            "grid.yaml: base.trian: unknown key; did you mean 'train'? valid keys: data, model, train",
        ),
        ("name: x\nbase: {data: {shuffle: 'yes'}}\n", "grid.yaml: base.data.shuffle: must be true or false, got 'yes'"),
        (
            "name: x\nbase: {train: {epochs: 2.5}}\n",
            "grid.yaml: base.train.epochs: must be a positive integer, got 2.5",
        ),
        (
            "name: x\nbase: {data: {imbalance: 1.5}}\n",
            "grid.yaml: base.data.imbalance: must be a number in [0, 1), got 1.5",
        ),
        (
            "name: x\nbase: {data: {val_fraction: 0}}\n",
            "grid.yaml: base.data.val_fraction: must be a number in (0, 1), got 0",
        ),
        (
            "name: x\nbase: {data: {dataset: glyphs}}\n",
            "grid.yaml: base.data.dataset: must be one of glyphs120 | digits | folder | npz | loader, got 'glyphs'; "
            "did you mean "
            "'glyphs120'?",
        ),
        (
            "name: x\nbase: {data: {preprocess_mismatch: scaled}}\n",
            "grid.yaml: base.data.preprocess_mismatch: must be one of none | scale | standardize | invert, "
            "got 'scaled'; "
            "did you mean 'scale'?",
        ),
        (
            "name: x\ngrid: {train.batch_size: []}\n",
            "grid.yaml: grid.train.batch_size: must be a non-empty list of values, got []",
        ),
        (
            "name: x\ngrid: {train.batch_size: 8}\n",
            "grid.yaml: grid.train.batch_size: must be a non-empty list of values, got 8",
        ),
        (
            "name: x\ngrid: {batch_size: [8]}\n",
            "grid.yaml: grid.batch_size: keys are dotted paths into base (data.<key>, model.<key>, train.<key>)",
        ),
        (
            "name: x\ngrid: {train.batchsize: [8]}\n",
            f"grid.yaml: grid.train.batchsize: unknown key; did you mean 'batch_size'? valid keys: {TRAIN_KEYS}",
        ),
        (
            "name: x\ngrid: {trainer.batch_size: [8]}\n",
            "grid.yaml: grid.trainer.batch_size: keys are dotted paths into base (data.<key>, model.<key>, "
            "train.<key>); "
            "did you mean 'train'?",
        ),
        (
            "name: x\nbase: {train: {gpus: 4}}\ngrid: {train.batch_size: [8, 30]}\n",
            "grid.yaml: grid point train.batch_size=30: train.batch_size=30 is not divisible by "
            "train.gpus=4; the global "
            "batch is split evenly across replicas",
        ),
        (
            "name: x\nbase: {train: {batch_size: 30, gpus: 4}}\n",
            "grid.yaml: base: train.batch_size=30 is not divisible by train.gpus=4; the global batch is "
            "split evenly across "
            "replicas",
        ),
        ("name: x\nseeds: []\n", "grid.yaml: seeds: must be a non-empty list of integers >= 0, got []"),
        ("name: x\nseeds: [0, 0]\n", "grid.yaml: seeds: must not repeat a seed, got [0, 0]"),
        (
            "name: 'a b'\n",
            "grid.yaml: name: must be letters, digits, '_', '.' or '-' (it names the results folder), got 'a b'",
        ),
        ("name: x\nbase: {data: {dataset: npz}}\n", "grid.yaml: base: data.path is required for data.dataset=npz"),
        (
            "- just\n- a list\n",
            "grid.yaml: (top level): must be a mapping with keys name, seeds, base, grid, variants, search, got list",
        ),
    ],
)
def test_bad_input_gets_one_precise_line(tmp_path: Path, text: str, expected: str) -> None:
    assert error_of(tmp_path, text) == expected


def test_missing_dataset_paths_are_named(tmp_path: Path) -> None:
    message = error_of(tmp_path, "name: x\nbase: {data: {dataset: folder, path: no/such/dir}}\n")
    assert message == f"grid.yaml: base.data.path: no such file or folder: {tmp_path / 'no/such/dir'}"
    message = error_of(tmp_path, "name: x\nbase: {data: {dataset: npz}}\ngrid: {data.path: [gone.npz]}\n")
    assert message == f"grid.yaml: grid.data.path[0]: no such file or folder: {tmp_path / 'gone.npz'}"


def test_relative_dataset_paths_resolve_against_the_grid_file(tmp_path: Path) -> None:
    (tmp_path / "imgs").mkdir()
    grid = load_grid(write_grid(tmp_path, "name: x\nbase: {data: {dataset: folder, path: imgs}}\n"))
    assert grid.base.data.path == str(tmp_path / "imgs")


def test_missing_file_and_yaml_syntax_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope.yaml: no such grid file$"):
        load_grid(tmp_path / "nope.yaml")
    message = error_of(tmp_path, "name: x\nbase: {train: [1, 2\n")
    assert message.startswith("grid.yaml: line ") and "YAML syntax error" in message


@pytest.mark.parametrize("command", ["plan", "run", "status"])
def test_cli_rejects_bad_grid_with_exit_2_and_writes_nothing(
    tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_grid(tmp_path, "name: bad\ngrid: {train.batch_size: [8, -4]}\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main([command, "grid.yaml"]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", "error: grid.yaml: grid.train.batch_size[1]: must be a positive integer, got -4\n")
    assert not (tmp_path / "results").exists()


def test_variants_cross_the_grid(tmp_path: Path) -> None:
    grid = load_grid(
        write_grid(
            tmp_path,
            """
        name: v
        seeds: [0, 1]
        grid: {train.batch_size: [8, 64]}
        variants:
          - {}
          - {data.imbalance: 0.95}
          - {data.shuffle: false, model.width: 2.0}
    """,
        )
    )
    runs = plan(grid)
    # 2 batch sizes x 3 variants x 2 seeds -> 12 runs
    assert len(runs) == 12 and len({r.run_id for r in runs}) == 12
    assert [r.slug for r in runs[:6]] == [
        "bs8-s0",
        "bs8-s1",
        "bs8-imb0.95-s0",
        "bs8-imb0.95-s1",
        "bs8-shuf0-w2-s0",
        "bs8-shuf0-w2-s1",
    ]
    assert runs[4].point.data.shuffle is False and runs[4].point.model.width == 2.0
    assert runs[0].point.data.imbalance == 0.0


@pytest.mark.parametrize(
    "variants, expected",
    [
        ("[]", "grid.yaml: variants: must be a non-empty list of mappings of dotted keys to values, got []"),
        (
            "[{train.batch_size: 8}]",
            "grid.yaml: variants[0].train.batch_size: train.batch_size is also a grid axis; vary "
            "a key in grid or in variants, not both",
        ),
        (
            "[{}, {data.imbalanse: 0.9}]",
            f"grid.yaml: variants[1].data.imbalanse: unknown key; did you mean 'imbalance'? valid keys: {DATA_KEYS}",
        ),
        ("[{data.imbalance: 2}]", "grid.yaml: variants[0].data.imbalance: must be a number in [0, 1), got 2"),
        ("[{}, {}]", "grid.yaml: variants: must not repeat a variant"),
        (
            "[{train.gpus: 3}]",
            "grid.yaml: grid point train.batch_size=8, train.gpus=3: train.batch_size=8 is not "
            "divisible by train.gpus=3; the global batch is split evenly across replicas",
        ),
    ],
)
def test_bad_variants(tmp_path: Path, variants: str, expected: str) -> None:
    assert error_of(tmp_path, f"name: x\ngrid: {{train.batch_size: [8]}}\nvariants: {variants}\n") == expected


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b", "..", ".hidden", "a\\\\b"])
def test_a_sweep_name_cannot_escape_the_results_folder(tmp_path: Path, name: str) -> None:
    message = error_of(tmp_path, f"name: '{name}'\n")
    assert message.startswith("grid.yaml: name: must be letters, digits, '_', '.' or '-'")


def test_python_tags_are_rejected_not_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    message = error_of(tmp_path, f"name: !!python/object/apply:os.system ['touch {marker}']\n")
    assert "YAML syntax error" in message or "could not determine a constructor" in message
    assert not marker.exists()


# --- a key that some points of a grid do not use


def ids(tmp_path: Path, text: str, name: str = "grid.yaml") -> list[str]:
    return [r.run_id for r in plan(load_grid(write_grid(tmp_path, text, name)))]


def test_a_reference_batch_is_accepted_in_a_grid_that_also_has_no_scaling(tmp_path: Path) -> None:
    both = ids(
        tmp_path, "name: x\nbase: {train: {reference_batch_size: 8}}\ngrid: {train.lr_scaling: [none, linear, sqrt]}\n"
    )
    alone = ids(tmp_path, "name: x\ngrid: {train.lr_scaling: [none]}\n", "alone.yaml")
    # 3 scalings x 1 seed -> 3 runs; without scaling the run is the one it would be without the reference batch
    assert len(both) == 3 and both[0] == alone[0]
    runs = plan(load_grid(tmp_path / "grid.yaml"))
    assert [r.point.train.reference_batch_size for r in runs] == [None, 8, 8]


def test_steps_are_accepted_in_a_grid_that_also_has_the_epochs_budget(tmp_path: Path) -> None:
    both = ids(tmp_path, "name: x\nbase: {train: {steps: 100}}\ngrid: {train.budget: [epochs, steps]}\n")
    alone = ids(tmp_path, "name: x\ngrid: {train.budget: [epochs]}\n", "alone.yaml")
    assert len(both) == 2 and both[0] == alone[0] and both[1] != alone[0]


def test_an_inert_grid_axis_is_left_out_of_the_points_that_do_not_use_it(tmp_path: Path) -> None:
    # budget x steps would be 4 combinations; under budget: epochs both step counts are the same run
    runs = ids(tmp_path, "name: x\ngrid: {train.budget: [epochs, steps], train.steps: [100, 200]}\n")
    alone = ids(tmp_path, "name: x\ngrid: {train.budget: [epochs]}\n", "alone.yaml")
    assert [i.rsplit("-", 1)[0] for i in runs] == ["budepochs-s0", "budsteps-st100-s0", "budsteps-st200-s0"]
    assert runs[0] == alone[0]


def test_a_dataset_path_is_accepted_where_some_variants_read_files(tmp_path: Path) -> None:
    (tmp_path / "d.npz").write_bytes(b"")
    runs = ids(tmp_path, "name: x\nbase: {data: {path: d.npz}}\nvariants: [{}, {data.dataset: npz}]\n")
    alone = ids(tmp_path, "name: x\n", "alone.yaml")
    assert len(runs) == 2 and runs[0] == alone[0]


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "base: {train: {steps: 100}}\ngrid: {train.batch_size: [8, 64]}\n",
            "grid.yaml: base.train.steps: only used with train.budget steps, which no point of the grid has; remove it",
        ),
        (
            "grid: {train.reference_batch_size: [8, 16]}\n",
            "grid.yaml: grid.train.reference_batch_size: only used with train.lr_scaling linear | sqrt, which no point "
            "of the grid has; remove it",
        ),
        (
            "variants: [{}, {data.path: d.npz}]\n",
            "grid.yaml: variants[1].data.path: only used with data.dataset folder | npz, which no point of "
            "the grid has; "
            "remove it",
        ),
        (
            "grid: {train.budget: [epochs, steps]}\n",
            "grid.yaml: grid point train.budget=steps: train.steps is required for train.budget=steps",
        ),
    ],
)
def test_a_key_no_point_uses_is_still_an_error(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / "d.npz").write_bytes(b"")
    assert error_of(tmp_path, f"name: x\n{text}") == expected


def test_plan_accepts_a_grid_with_keys_inert_at_some_points(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_grid(
        tmp_path, "name: x\nbase: {train: {reference_batch_size: 8}}\ngrid: {train.lr_scaling: [none, linear, sqrt]}\n"
    )
    assert cli.main(["plan", str(path)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("3 runs (3 points x 1 seed)")


# --- image sizes the model can use


@pytest.mark.parametrize(
    "where, text",
    [
        ("base.data.image_size", "base: {data: {image_size: 2}}\n"),
        ("grid.data.image_size[0]", "grid: {data.image_size: [8, 32]}\n"),
    ],
)
def test_an_image_too_small_for_the_model_is_refused(tmp_path: Path, where: str, text: str) -> None:
    value = 2 if "image_size: 2" in text else 8
    assert error_of(tmp_path, f"name: x\n{text}") == (
        f"grid.yaml: {where}: must be an integer >= 9 (each of the model's 4 poolings needs 2x2 pixels), got {value}"
    )


def test_the_smallest_image_the_model_uses_is_accepted(tmp_path: Path) -> None:
    assert load_grid(write_grid(tmp_path, "name: x\nbase: {data: {image_size: 9}}\n")).base.data.image_size == 9


def test_the_committed_experiments_still_load() -> None:
    grids = [*(REPO / "experiments").glob("*.yaml"), *(REPO / "tests" / "fixtures" / "grids").glob("*.yaml")]
    assert len(grids) >= 10 and all(load_grid(path).name for path in grids)


def test_digits_without_scikit_learn_is_refused_with_its_install_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """scikit-learn is the `digits` extra, not a dependency: a grid asking for digits without it stops at load."""
    import importlib.util

    from sweep.config import rules

    grid = "name: x\nbase: {data: {dataset: digits}}\n"
    assert load_grid(write_grid(tmp_path, grid)).base.data.dataset == "digits"  # the test extra has scikit-learn
    real = importlib.util.find_spec
    monkeypatch.setattr(rules.importlib.util, "find_spec", lambda name: None if name == "sklearn" else real(name))
    assert error_of(tmp_path, grid).endswith(
        "data.dataset: digits is scikit-learn's digits; install it with pip install 'batchsweep[digits]'"
    )


@pytest.mark.parametrize("metric", ["val_loss", "val_loss_recal", "train_eval_loss"])
def test_early_stopping_on_any_loss_waits_while_it_falls(metric: str) -> None:
    """A loss improves downwards, the recalibrated one too: falling for 6 epochs never stops the run (patience 3);
    then 3 epochs without a new low stop it, at the third (by hand).
    """
    from sweep.config import stopping

    watch = stopping.Watch(stopping.Rule(metric, patience=3))
    falling = [3.9, 2.9, 2.2, 1.6, 1.2, 1.0]
    assert [watch.stop({metric: v}) for v in falling] == [False] * 6
    assert [watch.stop({metric: v}) for v in (1.1, 1.0, 1.3)] == [False, False, True]
    rising = stopping.Watch(stopping.Rule("val_acc_recal", patience=2))
    assert [rising.stop({"val_acc_recal": v}) for v in (0.1, 0.3, 0.2, 0.25)] == [False, False, False, True]
