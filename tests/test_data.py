"""The data pipeline and the post's toggles, asserted on the data itself."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from sweep.config import DataConfig
from sweep.train.data import batches, epoch_order, load_split, raw_arrays, train_counts

SMALL = DataConfig(classes=8, samples_per_class=20, image_size=16)  # glyphs120: 16 train + 4 val per class


def batch_classes(labels: np.ndarray, order: np.ndarray, batch_size: int) -> list[int]:
    """How many distinct classes each batch of an epoch holds."""
    ordered = labels[order]
    return [len(set(ordered[i : i + batch_size])) for i in range(0, len(ordered), batch_size)]


@pytest.mark.unit
def test_unshuffled_batches_are_single_class_and_repeat_every_epoch() -> None:
    split = load_split(SMALL)
    first, second = epoch_order(split.y_train, False, 0, 1), epoch_order(split.y_train, False, 0, 2)
    assert np.array_equal(first, second)
    assert np.all(np.diff(split.y_train[first]) >= 0)  # class order
    assert batch_classes(split.y_train, first, 8) == [1] * 16  # 8 classes x 16 images, batches of 8


@pytest.mark.unit
def test_shuffled_batches_mix_classes_and_change_every_epoch() -> None:
    split = load_split(SMALL)
    first, second = epoch_order(split.y_train, True, 0, 1), epoch_order(split.y_train, True, 0, 2)
    assert not np.array_equal(first, second)
    assert np.array_equal(first, epoch_order(split.y_train, True, 0, 1))  # reproducible
    assert sorted(first) == list(range(len(split.y_train)))
    assert np.mean(batch_classes(split.y_train, first, 8)) > 4


@pytest.mark.unit
def test_imbalance_gives_class_0_its_share_and_keeps_sizes() -> None:
    balanced = load_split(SMALL)
    skewed = load_split(DataConfig(classes=8, samples_per_class=20, image_size=16, imbalance=0.95))
    assert len(skewed.y_train) == len(balanced.y_train) == 128
    assert np.mean(skewed.y_train == 0) == pytest.approx(0.95, abs=0.01)
    assert set(skewed.y_train) == set(range(8))  # every class keeps at least one image
    assert np.bincount(skewed.y_val).tolist() == [4] * 8  # validation stays balanced
    assert np.array_equal(skewed.x_val, balanced.x_val)


@pytest.mark.unit
def test_imbalance_keeping_the_minority_grows_class_0_and_keeps_every_other_class() -> None:
    """imbalance_keeps: minority: each other class keeps its 16 images; class 0 grows to 95% of the set."""
    balanced = load_split(SMALL)
    grown = load_split(dataclasses.replace(SMALL, imbalance=0.95, imbalance_keeps="minority"))
    counts = np.bincount(grown.y_train).tolist()
    assert counts[1:] == [16] * 7 and counts[0] == round(0.95 / 0.05 * 16 * 7) == 2128
    assert np.mean(grown.y_train == 0) == pytest.approx(0.95, abs=0.001)
    assert np.array_equal(grown.x_val, balanced.x_val)  # validation unchanged
    assert train_counts(100, 5, 0.6, "minority") == [120, 20, 20, 20, 20]  # 120 / 200 = 0.6
    assert train_counts(100, 5, 0.0, "minority") == [20] * 5  # balanced: nothing to keep


@pytest.mark.unit
def test_train_counts_split_the_total() -> None:
    assert train_counts(100, 4, 0.0) == [25, 25, 25, 25]
    assert train_counts(100, 5, 0.6) == [60, 10, 10, 10, 10]
    assert sum(train_counts(9600, 120, 0.95)) == 9600


MISMATCH_OF_RESCALED = {  # validation as the mismatch makes it, from the same images rescaled to [0, 1]
    "scale": lambda v: v * 255.0,
    "invert": lambda v: 1.0 - v,
    "standardize": lambda v: (v * 255.0 - (v * 255.0).mean()) / ((v * 255.0).std() + 1e-7),
}


@pytest.mark.unit
@pytest.mark.parametrize("mismatch", sorted(MISMATCH_OF_RESCALED))
def test_preprocess_mismatch_changes_validation_pixels_only(mismatch: str) -> None:
    """Training and train_eval pixels are exactly those without a mismatch; validation is the exact transform."""
    settings = {"classes": 8, "samples_per_class": 20, "image_size": 16}
    plain = load_split(DataConfig(**settings))
    split = load_split(DataConfig(**settings, preprocess_mismatch=mismatch))
    for name in ("x_train", "y_train", "x_train_eval", "y_train_eval", "y_val"):
        assert getattr(split, name).tobytes() == getattr(plain, name).tobytes(), name
    assert plain.x_train.min() >= 0.0 and plain.x_train.max() <= 1.0  # training is always x / 255
    assert split.x_val.dtype == plain.x_val.dtype
    np.testing.assert_allclose(split.x_val, MISMATCH_OF_RESCALED[mismatch](plain.x_val.astype(np.float64)), atol=2e-5)
    assert not np.allclose(split.x_val, plain.x_val)


@pytest.mark.unit
def test_validation_is_shared_balanced_and_shuffled() -> None:
    a = load_split(SMALL)
    b = load_split(DataConfig(classes=8, samples_per_class=20, image_size=16, shuffle=False))
    assert np.array_equal(a.x_val, b.x_val) and np.array_equal(a.y_val, b.y_val)
    assert np.bincount(a.y_val).tolist() == [4] * 8
    assert np.any(np.diff(a.y_val) < 0)  # not in class order
    other = load_split(DataConfig(classes=8, samples_per_class=20, image_size=16, seed=1))
    assert not np.array_equal(a.x_val, other.x_val)  # the data seed makes other images


@pytest.mark.unit
def test_train_eval_subset_is_fixed_and_from_the_training_set() -> None:
    split = load_split(SMALL)
    assert len(split.y_train_eval) == len(split.y_val)
    rows = {arr.tobytes() for arr in split.x_train}
    assert all(arr.tobytes() in rows for arr in split.x_train_eval)
    assert np.array_equal(split.x_train_eval, load_split(SMALL).x_train_eval)


@pytest.mark.unit
def test_glyphs_are_cached_on_disk(tmp_path: Path) -> None:
    first = raw_arrays(SMALL, cache_dir=tmp_path)
    files = list(tmp_path.glob("glyphs120-*.npz"))
    assert len(files) == 1
    second = raw_arrays(SMALL, cache_dir=tmp_path)
    assert all(np.array_equal(a, b) for a, b in zip(first[:4], second[:4], strict=True)) and first[4] == second[4]


@pytest.mark.unit
@pytest.mark.parametrize("bad", ["object array", "cut short"])
def test_a_cache_file_that_is_not_ours_is_rendered_again_never_unpickled(tmp_path: Path, bad: str) -> None:
    """A cache file holding an object array (a pickle: loading it would run its writer's code) or cut short
    is no cache: the glyphs are rendered again, the same as ever, and the file replaced.
    """
    first = raw_arrays(SMALL, cache_dir=tmp_path)
    [cache] = tmp_path.glob("glyphs120-*.npz")
    if bad == "object array":
        with open(cache, "wb") as handle:
            np.savez(handle, x_train=np.array([{"a": 1}], dtype=object), y_train=first[1])
    else:
        cache.write_bytes(cache.read_bytes()[:100])
    again = raw_arrays(SMALL, cache_dir=tmp_path)
    assert all(np.array_equal(a, b) for a, b in zip(first[:4], again[:4], strict=True)) and first[4] == again[4]
    assert [p.name for p in tmp_path.iterdir()] == [cache.name]
    assert raw_arrays(SMALL, cache_dir=tmp_path)[4] == first[4]  # the file is a cache again


@pytest.mark.unit
def test_full_glyphs120_has_120_classes_at_the_default_size() -> None:
    split = load_split(DataConfig(samples_per_class=5))
    assert split.num_classes == 120 and split.x_train.shape[1:] == (32, 32, 1)
    assert len(set(split.class_names)) == 120


@pytest.mark.unit
def test_digits_is_scikit_learns_real_data() -> None:
    split = load_split(DataConfig(dataset="digits", image_size=8))
    assert split.num_classes == 10 and split.class_names == tuple("0123456789")
    # 1797 images, at most 100 per class, 20% of each class held out
    assert len(split.y_val) == 200 and len(split.y_train) == 800
    assert split.x_train.shape[1:] == (8, 8, 1)


@pytest.mark.unit
def test_folder_dataset_reads_one_subfolder_per_class(tmp_path: Path) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    for name in ("cat", "dog", "fox"):
        (tmp_path / name).mkdir()
        for i in range(5):
            Image.fromarray(rng.integers(0, 255, (20, 30, 3), dtype=np.uint8)).save(tmp_path / name / f"{i}.png")
    split = load_split(DataConfig(dataset="folder", path=str(tmp_path), image_size=16))
    assert split.class_names == ("cat", "dog", "fox")
    assert len(split.y_val) == 3 and len(split.y_train) == 12 and split.x_train.shape[1:] == (16, 16, 1)


@pytest.mark.unit
def test_npz_dataset_reads_x_and_y(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    path = tmp_path / "d.npz"
    np.savez(path, x=rng.random((40, 10, 10)), y=np.repeat([3, 7], 20))
    split = load_split(DataConfig(dataset="npz", path=str(path), image_size=10, val_fraction=0.25))
    assert split.class_names == ("3", "7") and split.num_classes == 2
    assert np.bincount(split.y_val).tolist() == [5, 5] and len(split.y_train) == 30
    np.savez(tmp_path / "bad.npz", images=np.zeros((2, 4, 4)))
    with pytest.raises(ValueError, match=r"missing array\(s\) \['x', 'y'\]"):
        load_split(DataConfig(dataset="npz", path=str(tmp_path / "bad.npz")))


def _fixed_dataset(kind: str, folder: Path) -> DataConfig:
    """A fixed dataset of 3 (folder, npz) or 10 (digits) classes, each image distinct."""
    rng = np.random.default_rng(1)
    if kind == "folder":
        from PIL import Image

        for name in ("a", "b", "c"):
            (folder / name).mkdir()
            for i in range(12):
                Image.fromarray(rng.integers(0, 256, (16, 16), dtype=np.uint8)).save(folder / name / f"{i}.png")
        return DataConfig(dataset="folder", path=str(folder), image_size=16)
    if kind == "npz":
        np.savez(folder / "d.npz", x=rng.integers(0, 256, (36, 10, 10), dtype=np.uint8), y=np.repeat([0, 1, 2], 12))
        return DataConfig(dataset="npz", path=str(folder / "d.npz"), image_size=10)
    return DataConfig(dataset="digits", image_size=8, samples_per_class=30)


def _rows(x: np.ndarray) -> list[bytes]:
    return [image.tobytes() for image in x]


@pytest.mark.unit
@pytest.mark.parametrize("kind", ["digits", "folder", "npz"])
@pytest.mark.parametrize("imbalance", [0.6, 0.9])
def test_imbalance_on_a_fixed_dataset_gives_class_0_its_share(tmp_path: Path, kind: str, imbalance: float) -> None:
    """Class 0 gets round(imbalance x size) of a training set of unchanged size, drawn from class 0's own
    training images (with replacement: it has too few); the other classes share the rest; validation is untouched.
    """
    cfg = _fixed_dataset(kind, tmp_path)
    balanced, skewed = load_split(cfg), load_split(dataclasses.replace(cfg, imbalance=imbalance))
    size = len(balanced.y_train)
    counts = np.bincount(skewed.y_train, minlength=balanced.num_classes)
    assert len(skewed.y_train) == size and len(set(np.bincount(balanced.y_train))) == 1
    assert counts[0] == round(imbalance * size) and abs(counts[0] / size - imbalance) <= 0.5 / size
    assert max(counts[1:]) - min(counts[1:]) <= 1 and min(counts[1:]) >= 1
    for k in range(balanced.num_classes):  # each class draws from its own training images only
        assert set(_rows(skewed.x_train[skewed.y_train == k])) <= set(_rows(balanced.x_train[balanced.y_train == k]))
    class_0 = set(_rows(balanced.x_train[balanced.y_train == 0]))
    assert set(_rows(skewed.x_train[skewed.y_train == 0])) == class_0  # every one of them, some twice
    assert not class_0 & set(_rows(skewed.x_val))
    assert skewed.x_val.tobytes() == balanced.x_val.tobytes() and np.array_equal(skewed.y_val, balanced.y_val)
    assert len(set(np.bincount(skewed.y_val))) == 1  # balanced


@pytest.mark.integration
def test_batches_keep_order_and_sizes_without_tf_data_autotuning() -> None:
    """Autotuning off: its thread's wake-ups made every fit/evaluate wait (benchmarks/costs/autotune.py)."""
    x, y = np.arange(10, dtype=np.float32).reshape(10, 1), np.arange(10)
    dataset = batches(x, y, 4)
    assert [list(b[1].numpy()) for b in dataset] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert dataset.options().autotune.enabled is False
    towers = batches((x, x + 100), None, 8)  # a pack's images, no labels
    assert [[list(t.numpy().ravel()) for t in b] for b in towers][1] == [[8, 9], [108, 109]]
