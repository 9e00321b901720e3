"""Hostile dataset inputs: real broken files on disk give one clear error naming the file, or a counted skip.

Datasets `folder` and `npz` (docs/inputs.md). Every case is a real file in tmp_path read by
the real loaders (PIL, numpy); nothing is mocked. One case runs end to end through
`python -m sweep run` to show how a data error reaches the run record and the console.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import services
from conftest import REPO, run_cli, write_grid
from PIL import Image

from sweep.config import DataConfig
from sweep.train.data import DataError, raw_arrays, skipped_files
from sweep.train.datafiles import npz_images, read_image

RNG = np.random.default_rng(0)


def image(path: Path, size: tuple[int, int] = (12, 10)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(RNG.integers(0, 255, (*size, 3), dtype=np.uint8)).save(path)
    return path


def dataset(root: Path, classes: tuple[str, ...] = ("cat", "dog"), per_class: int = 4) -> Path:
    for name in classes:
        for i in range(per_class):
            image(root / name / f"{i}.png")
    return root


def folder_cfg(root: Path, **changes) -> DataConfig:
    return DataConfig(**{"dataset": "folder", "path": str(root), "image_size": 8, **changes})


def folder_error(root: Path, **changes) -> str:
    with pytest.raises(DataError) as info:
        raw_arrays(folder_cfg(root, **changes))
    message = str(info.value)
    assert len(message.splitlines()) == 1 and message.startswith("data.path ")
    return message


def error_without_root_powers(cfg: DataConfig) -> str:
    """The DataError message of raw_arrays(cfg), read by a process that file permissions apply to.

    chmod 000 stops an ordinary user but not root, and CI runs as root. Then the loader runs in
    a child whose capability bounding set lacks CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH
    (`setpriv`), so root is refused like anyone else.
    """
    if os.geteuid() != 0:
        with pytest.raises(DataError) as info:
            raw_arrays(cfg)
        return str(info.value)
    services.require("setpriv")  # as root, chmod 000 does not stop reads without it
    code = (
        "import json, sys\nfrom sweep.config import DataConfig\nfrom sweep.train.data import DataError, raw_arrays\n"
        "try:\n    raw_arrays(DataConfig(**json.loads(sys.argv[1])))\nexcept DataError as err:\n    print(err)\n"
    )
    child = subprocess.run(
        [
            shutil.which("setpriv", path=services.SBIN) or "setpriv",
            "--bounding-set",
            "-dac_override,-dac_read_search",
            sys.executable,
            "-c",
            code,
            json.dumps(dataclasses.asdict(cfg)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    if child.returncode != 0 and "setpriv" in child.stderr:  # setpriv is here, but the kernel refused it
        pytest.fail(
            "setpriv could not drop root's file-permission override (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), "
            f"so unreadable files cannot be tested: {child.stderr.strip()}"
        )
    assert child.returncode == 0, child.stderr
    return child.stdout.strip()


# --- dataset folder


@pytest.mark.unit
def test_a_clean_folder_loads_and_skips_nothing(tmp_path: Path) -> None:
    root = dataset(tmp_path / "d")
    x_train, y_train, x_val, y_val, names = raw_arrays(folder_cfg(root))
    assert names == ("cat", "dog") and len(y_train) + len(y_val) == 8 and x_train.dtype == np.uint8
    assert skipped_files(folder_cfg(root)) == ()


@pytest.mark.system
def test_an_unreadable_image_is_an_error_naming_it(tmp_path: Path) -> None:
    root = dataset(tmp_path / "d")
    locked = root / "cat" / "1.png"
    locked.chmod(0)
    try:
        expected = f"data.path {locked}: cannot read this image: Permission denied"
        assert error_without_root_powers(folder_cfg(root)) == expected
    finally:
        locked.chmod(0o644)


@pytest.mark.system
def test_an_unreadable_class_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    root = dataset(tmp_path / "d")
    (root / "dog").chmod(0)
    try:
        expected = f"data.path {root / 'dog'}: cannot list this folder: Permission denied"
        assert error_without_root_powers(folder_cfg(root)) == expected
    finally:
        (root / "dog").chmod(0o755)


@pytest.mark.unit
def test_a_folder_named_like_an_image_is_an_error(tmp_path: Path) -> None:
    root = dataset(tmp_path / "d")
    (root / "cat" / "9.png").mkdir()
    assert folder_error(root) == (
        f"data.path {root / 'cat' / '9.png'}: a folder inside a class folder; images must "
        f"sit directly in the class folder (nested folders are not read, so their images "
        f"would be missing)"
    )


@pytest.mark.unit
def test_a_nested_folder_of_images_is_an_error_not_silently_dropped(tmp_path: Path) -> None:
    root = dataset(tmp_path / "d")
    image(root / "dog" / "more" / "5.png")
    assert "dog/more: a folder inside a class folder" in folder_error(root)


@pytest.mark.unit
def test_a_truncated_png_is_an_error_naming_it(tmp_path: Path) -> None:
    root = dataset(tmp_path / "d")
    broken = root / "dog" / "2.png"
    broken.write_bytes(broken.read_bytes()[: len(broken.read_bytes()) // 2])
    assert folder_error(root) == f"data.path {broken}: cannot read this image: image file is truncated"


@pytest.mark.unit
def test_a_text_file_named_png_is_an_error_naming_it(tmp_path: Path) -> None:
    root = dataset(tmp_path / "d")
    (root / "cat" / "notes.png").write_text("not an image")
    assert folder_error(root) == (
        f"data.path {root / 'cat' / 'notes.png'}: cannot read this image: "
        f"cannot identify image file '{root / 'cat' / 'notes.png'}'"
    )


@pytest.mark.unit
def test_a_fifo_named_png_is_an_error_not_a_hang(tmp_path: Path) -> None:
    root = dataset(tmp_path / "d")
    os.mkfifo(root / "cat" / "pipe.png")
    assert folder_error(root) == f"data.path {root / 'cat' / 'pipe.png'}: not a regular file"


@pytest.mark.unit
def test_hidden_and_non_image_files_are_skipped_and_counted(tmp_path: Path) -> None:
    clean = raw_arrays(folder_cfg(dataset(tmp_path / "clean")))
    root = Path(shutil.copytree(tmp_path / "clean", tmp_path / "d"))
    (root / "cat" / "notes.txt").write_text("labelled by Ann")
    (root / "cat" / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (root / "dog" / "._0.png").write_bytes(b"\x00\x05\x16\x07 AppleDouble")  # macOS resource fork: hidden, not an image
    (root / "dog" / "Thumbs.db").write_bytes(b"\xd0\xcf\x11\xe0")
    (root / "README.md").write_text("# my dataset")
    (root / ".git").mkdir()
    cfg = folder_cfg(root)
    assert skipped_files(cfg) == (".git", "README.md", "cat/.DS_Store", "cat/notes.txt", "dog/._0.png", "dog/Thumbs.db")
    with pytest.warns(UserWarning, match=r"skipped 6 file\(s\) that are hidden or not images, e\.g\. \.git$"):
        loaded = raw_arrays(cfg)
    assert all(np.array_equal(a, b) for a, b in zip(clean[:4], loaded[:4], strict=True)) and clean[4] == loaded[4]


@pytest.mark.unit
def test_an_empty_class_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    root = dataset(tmp_path / "d", ("cat", "dog", "fox"))
    for f in (root / "fox").iterdir():
        f.unlink()
    assert folder_error(root) == (
        f"data.path {root / 'fox'}: class folder holds no images (.png .jpg .jpeg .bmp .gif .webp)"
    )
    (root / "fox" / "notes.txt").write_text("todo")
    assert folder_error(root).endswith("(.png .jpg .jpeg .bmp .gif .webp); 1 other file(s) skipped")


@pytest.mark.unit
def test_a_single_class_is_an_error(tmp_path: Path) -> None:
    root = dataset(tmp_path / "d", ("cat",))
    assert folder_error(root) == (
        f"data.path {root}: found 1 class folder(s) (only 'cat'); a classifier needs at "
        f"least 2, one sub-folder per class"
    )
    assert folder_error(root / "cat") == (
        f"data.path {root / 'cat'}: found 0 class folder(s) (none); a classifier needs at least 2, one sub-folder per "
        f"class; it holds images itself: is it one class folder? point data.path at the folder above it"
    )
    two = dataset(tmp_path / "two")
    assert folder_error(two, classes=1) == f"data.path {two}: data.classes is 1; a classifier needs at least 2 classes"


@pytest.mark.unit
def test_a_link_to_an_image_outside_the_folder_is_refused(tmp_path: Path) -> None:
    root = dataset(tmp_path / "d")
    outside = image(tmp_path / "elsewhere" / "secret.png")
    (root / "cat" / "linked.png").symlink_to(outside)
    assert folder_error(root) == (
        f"data.path {root / 'cat' / 'linked.png'}: a link to {outside}, outside data.path "
        f"{root}; copy the files in instead (a dataset is what is under its folder, so runs "
        f"stay reproducible)"
    )


@pytest.mark.unit
def test_a_linked_class_folder_outside_the_folder_is_refused(tmp_path: Path) -> None:
    root = dataset(tmp_path / "d")
    dataset(tmp_path / "other", ("fox",))
    (root / "fox").symlink_to(tmp_path / "other" / "fox", target_is_directory=True)
    outside = tmp_path / "other" / "fox"
    assert folder_error(root).startswith(f"data.path {root / 'fox'}: a link to {outside}, outside data.path")


@pytest.mark.unit
def test_links_inside_the_folder_are_fine_and_broken_links_are_errors(tmp_path: Path) -> None:
    root = dataset(tmp_path / "d")
    (root / "dog" / "same.png").symlink_to(root / "cat" / "0.png")
    assert raw_arrays(folder_cfg(root))[4] == ("cat", "dog")
    (root / "dog" / "gone.png").symlink_to(root / "nowhere.png")
    assert folder_error(root).startswith(f"data.path {root / 'dog' / 'gone.png'}: a broken link (")


@pytest.mark.unit
def test_a_16_bit_png_is_scaled_not_clipped_to_white(tmp_path: Path) -> None:
    root = dataset(tmp_path / "d")
    wide = np.linspace(0, 65535, 64).reshape(8, 8).astype(np.uint16)
    Image.fromarray(wide).save(root / "cat" / "0.png")
    # Pillow opens a 16-bit PNG as "I;16" from 10.3 and as 32-bit "I" before: both must be scaled
    assert Image.open(root / "cat" / "0.png").mode in ("I;16", "I")
    read = read_image(root / "cat" / "0.png", (8, 8)).astype(int)
    assert np.abs(read - np.rint(wide / 257)).max() <= 1  # was: everything above 255 read as 255


# --- dataset npz


def npz(tmp_path: Path, **arrays) -> Path:
    path = tmp_path / "d.npz"
    np.savez(path, **arrays)
    return path


def npz_error(path: Path, **changes) -> str:
    with pytest.raises(DataError) as info:
        raw_arrays(DataConfig(**{"dataset": "npz", "path": str(path), "image_size": 8, **changes}))
    message = str(info.value)
    assert len(message.splitlines()) == 1 and message.startswith(f"data.path {path}: ")
    return message[len(f"data.path {path}: ") :]


X = RNG.integers(0, 256, (20, 8, 8), dtype=np.uint8)
Y = np.repeat([0, 1], 10)


@pytest.mark.unit
@pytest.mark.parametrize(
    "arrays, expected",
    [
        ({"x": X}, "missing array(s) ['y']; expected x (N,H,W[,C]) and y (N,), found ['x']"),
        (
            {"images": X, "labels": Y},
            "missing array(s) ['x', 'y']; expected x (N,H,W[,C]) and y (N,), found ['images', 'labels']",
        ),
        ({"x": X, "y": Y[:15]}, "array y has 15 labels but x has 20 images; they must match row for row"),
        (
            {"x": X.astype(str), "y": Y},
            "array x has dtype <U3; expected uint8 (0..255), another integer type with values "
            "in 0..255, or float (0..1 or 0..255)",
        ),
        (
            {"x": X.astype(np.complex64), "y": Y},
            "array x has dtype complex64; expected uint8 (0..255), another integer "
            "type with values in 0..255, or float (0..1 or 0..255)",
        ),
        (
            {"x": (X - 128.0) / 64.0, "y": Y},
            "array x holds values in [-2, 1.98438]; expected 0..255, or 0..1 for floats; "
            "standardised? save the raw pixels, the harness does its own preprocessing",
        ),
        (
            {"x": X * 1.5, "y": Y},
            "array x holds values in [0, 382.5]; expected 0..255, or 0..1 for floats; standardised? "
            "save the raw pixels, the harness does its own preprocessing",
        ),
        ({"x": np.where(X > 250, np.nan, X / 255.0), "y": Y}, "array x holds NaN or infinite values"),
        (
            {"x": X.astype(np.uint16) * 257, "y": Y},
            "array x holds values in [0, 65535]; expected 0..255, or 0..1 for floats; 16-bit? scale to 0..255 first",
        ),
        ({"x": X.reshape(20, 64), "y": Y}, "array x has shape (20, 64); expected (N, H, W) or (N, H, W, C)"),
        (
            {"x": X[:, None, :, :].repeat(3, axis=1), "y": Y},
            "array x has shape (20, 3, 8, 8); the last axis must be 1 or "
            "3 channels; channels first? use np.moveaxis(x, 1, -1)",
        ),
        ({"x": X[..., None, None], "y": Y}, "array x has shape (20, 8, 8, 1, 1); expected (N, H, W) or (N, H, W, C)"),
        ({"x": X[:0], "y": Y[:0]}, "array x has shape (0, 8, 8): no pixels"),
        (
            {"x": X, "y": np.where(Y == 1, -1, 0)},
            "array y holds 10 label(s) that are not whole numbers in [0, 2^31), "
            "e.g. -1 at row 10 (-1 often marks unlabelled images: drop those rows)",
        ),
        (
            {"x": X, "y": Y + 0.5},
            "array y holds 20 label(s) that are not whole numbers in [0, 2^31), e.g. 0.5 at row 0",
        ),
        (
            {"x": X, "y": Y * 2**40},
            "array y holds 10 label(s) that are not whole numbers in [0, 2^31), e.g. 1099511627776 at row 10",
        ),
        ({"x": X, "y": np.where(Y == 1, "dog", "cat")}, "array y has dtype <U3; expected integer class labels"),
        (
            {"x": X, "y": np.eye(2)[Y]},
            "array y has shape (20, 2); expected one class label per image, shape (N,); one-hot? use y.argmax(axis=1)",
        ),
        ({"x": X, "y": np.zeros(20, int)}, "y holds 1 distinct label(s); a classifier needs at least 2"),
    ],
    ids=[
        "no-y",
        "wrong-names",
        "lengths",
        "strings",
        "complex",
        "standardised",
        "float-over-255",
        "nan",
        "16-bit",
        "rank-2",
        "channels-first",
        "rank-5",
        "empty",
        "negative-labels",
        "fractional-labels",
        "huge-labels",
        "string-labels",
        "one-hot",
        "one-class",
    ],
)
def test_bad_npz_contents_are_errors_naming_the_file_and_the_problem(
    tmp_path: Path, arrays: dict, expected: str
) -> None:
    assert npz_error(npz(tmp_path, **arrays)) == expected


class _Payload:
    """Pickles to a call that creates a file: what a malicious object array in an .npz could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


@pytest.mark.unit
def test_a_pickled_object_array_is_refused_and_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    payload = np.empty(20, dtype=object)
    payload[:] = [_Payload(marker)] * 20
    path = npz(tmp_path, x=X, y=payload)  # np.savez pickles object arrays
    assert npz_error(path) == (
        "array y holds Python objects (dtype object), which would have to be unpickled; refused "
        "(unpickling can run code): save plain numeric arrays"
    )
    assert not marker.exists()
    np.load(path, allow_pickle=True)["y"]  # the file really is armed: loading it the unsafe way runs the payload
    assert marker.exists()


@pytest.mark.unit
def test_files_that_are_not_npz_archives_are_errors(tmp_path: Path) -> None:
    path = tmp_path / "d.npz"
    with open(path, "wb") as handle:  # an .npy under an .npz name
        np.save(handle, X)
    assert npz_error(path) == "not an .npz archive (write one with np.savez(path, x=images, y=labels))"
    path.write_bytes(b"x,y\n1,2\n")
    assert npz_error(path) == "not an .npz archive (write one with np.savez(path, x=images, y=labels))"
    np.savez_compressed(path, x=X, y=Y)
    data = bytearray(path.read_bytes())
    data[100:140] = bytes(40)  # corrupt the compressed x data, leave the zip directory intact
    path.write_bytes(bytes(data))
    assert npz_error(path).startswith("cannot read array x: ")
    with zipfile.ZipFile(path, "w") as archive:  # np.load returns raw bytes for a member without the .npy suffix
        archive.writestr("x", b"raw bytes")
        archive.writestr("y.npy", b"")
    assert npz_error(path) == "x is not a numpy array (a zip member that is not in .npy format)"


@pytest.mark.system
def test_an_unreadable_npz_is_an_error(tmp_path: Path) -> None:
    path = npz(tmp_path, x=X, y=Y)
    path.chmod(0)
    try:
        cfg = DataConfig(dataset="npz", path=str(path), image_size=8)
        assert error_without_root_powers(cfg) == f"data.path {path}: cannot read: Permission denied"
    finally:
        path.chmod(0o644)


@pytest.mark.unit
def test_accepted_npz_variants_load_to_the_same_grey_levels(tmp_path: Path) -> None:
    """uint8, float 0..1, float 0..255, (N,H,W,1), whole-number float labels, (N,1) labels: one dataset."""
    cfg = DataConfig(dataset="npz", path=str(tmp_path / "d.npz"), image_size=8)
    npz(tmp_path, x=X, y=Y)
    reference = raw_arrays(cfg)
    for arrays in (
        {"x": X / 255.0, "y": Y},
        {"x": X.astype(np.float32), "y": Y},
        {"x": X[..., None], "y": Y},
        {"x": X.astype(np.int32), "y": Y.astype(np.float64)},
        {"x": X, "y": Y[:, None]},
    ):
        npz(tmp_path, **arrays)
        loaded = raw_arrays(cfg)
        same = all(np.array_equal(a, b) for a, b in zip(reference[:4], loaded[:4], strict=True))
        assert same and loaded[4] == ("0", "1"), arrays


@pytest.mark.unit
def test_rgb_npz_images_get_the_grey_levels_of_the_folder_dataset(tmp_path: Path) -> None:
    rgb = RNG.integers(0, 256, (20, 8, 8, 3), dtype=np.uint8)
    pil = np.stack([np.asarray(Image.fromarray(im).convert("L")) for im in rgb]).astype(int)
    assert np.abs(npz_images(rgb, tmp_path / "d.npz").astype(int) - pil).max() <= 1
    assert np.abs(npz_images(rgb / 255.0, tmp_path / "d.npz").astype(int) - pil).max() <= 1


@pytest.mark.system
def test_a_data_error_reaches_the_run_record_and_the_console_without_a_traceback(tmp_path: Path) -> None:
    path = npz(tmp_path, x=X, y=np.where(Y == 1, -1, 0))
    write_grid(
        tmp_path,
        f"""
        name: bad_npz
        base:
          data: {{dataset: npz, path: {path.name}, image_size: 9}}
          train: {{epochs: 1, batch_size: 4}}
    """,
    )
    result = run_cli("run", "grid.yaml", cwd=tmp_path)  # one retry by default, not used on a data error
    message = (
        f"data.path {path}: array y holds 10 label(s) that are not whole numbers in [0, 2^31), e.g. -1 at "
        f"row 10 (-1 often marks unlabelled images: drop those rows)"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert f"FAILED: sweep.train.datafiles.DataError: {message}" in result.stdout + result.stderr
    [failed] = [line for line in result.stderr.splitlines() if line.startswith("FAILED ")]
    assert failed.endswith(f": sweep.train.datafiles.DataError: {message}")
    with open(tmp_path / "results" / "bad_npz" / "runs.csv", newline="") as handle:
        [row] = list(csv.DictReader(handle))
    assert row["status"] == "failed" and row["error"].strip().endswith(f"sweep.train.datafiles.DataError: {message}")
    assert row["attempt"] == "1" and "retrying" not in result.stdout  # retrying cannot fix the data


@pytest.mark.integration
def test_a_batch_larger_than_the_training_set_fails_its_run_with_the_sizes(tmp_path: Path) -> None:
    """4 classes x 10 images, a fifth for validation: 32 training images; batch 64 would be one step of the whole
    set an epoch, labelled bs64. The run fails at once with the sizes (a data error: never retried); batch 32 trains.
    """
    from sweep.config import load_grid
    from sweep.config.plan import plan
    from sweep.train.trainer import Trainer

    grid = write_grid(tmp_path, "name: big\nbase:\n  data: {classes: 4, samples_per_class: 10, image_size: 12}\n")
    (spec,) = plan(load_grid(grid, ["train.batch_size=64", "train.epochs=1"]))
    with pytest.raises(DataError) as info:
        Trainer.alone(spec)
    assert str(info.value) == (
        "train.batch_size 64 is larger than the 32 training images (one step an epoch, of the whole set); give at "
        "most 32, or more data"
    )
    (fits,) = plan(load_grid(grid, ["train.batch_size=32", "train.epochs=1"]))
    assert Trainer.alone(fits).steps_per_epoch == 1
