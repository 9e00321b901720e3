"""Datasets, the train/val split, and the post's three data toggles.

Flow: a source gives images per class -> a balanced validation set and a
training set (imbalanced on request) -> preprocessing (different for
validation on request) -> a per-epoch order (shuffled or class-sorted) ->
batches (`tf.data` on TensorFlow, numpy elsewhere). Reading the user's files (folder, npz) and arrays (loader) is in
sweep/train/datafiles.py; only those may be colour (`data.channels: 3`).

Decisions:
- The data has its own seed (`data.seed`), not the run's: every point of a
  sweep with the same data settings sees the same validation set and the same
  training images; the run seed only changes initialisation and data order.
- Imbalance keeps the training-set size by default: class 0 gets `imbalance` of
  it and the other classes share the rest evenly; with `imbalance_keeps:
  minority` the other classes keep their images and class 0 grows instead, so
  imbalance is not confounded with fewer images per minority class. glyphs120
  renders as many images as that needs; fixed datasets (digits, folder, npz)
  draw class-0 images with replacement when the class has too few.
- Shuffling happens here, in numpy, once per epoch (`epoch_order`), not through
  `fit(shuffle=...)`, which Keras ignores for `tf.data` inputs. Unshuffled means
  the same class-sorted order every epoch, so each batch holds one or two classes.
- Validation is balanced, shuffled once with the data seed, and never resampled.

Registry: `SOURCES` maps a dataset name to a function
``(DataConfig) -> (images_per_class: list[np.ndarray uint8 (n, size, size[, 3])], class_names)``;
add a dataset by adding one entry here and its name to `DATASETS` in sweep/config/keys.py
(docs/data.md, "Adding a dataset").
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sweep.base import atomic
from sweep.base.seeds import derive_seed
from sweep.config.keys import DIGITS, FOLDER, GLYPHS120, LOADER, NPZ, DataConfig
from sweep.train import backends
from sweep.train.datafiles import DataError, folder_source, loader_source, npz_source, resize, skipped_files

__all__ = [  # DataError and skipped_files are defined in sweep.train.datafiles; callers import them from here
    "DataError",
    "Split",
    "batches",
    "epoch_order",
    "load_split",
    "raw_arrays",
    "skipped_files",
    "train_counts",
]

CACHE_VERSION = 1  # bump when rendering changes, so stale caches are not reused


@dataclass(frozen=True)
class Split:
    """Preprocessed float32 arrays (N, H, W, 1) and int32 labels."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_train_eval: np.ndarray  # fixed subset of the training set, training preprocessing
    y_train_eval: np.ndarray
    num_classes: int
    class_names: tuple[str, ...]


# x_train, y_train, x_val, y_val (uint8 images sorted by class, int labels), class names
RawArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]


# --- sources: raw images per class


def _glyphs_counts(cfg: DataConfig) -> tuple[int, list[int], list[int]]:
    """(number of classes, val count per class, train count per class) for glyphs120."""
    from sweep.train import glyphs

    classes = min(cfg.classes or len(glyphs.GLYPHS), len(glyphs.GLYPHS))
    n_val = max(1, round(cfg.val_fraction * cfg.samples_per_class))
    n_train = max(1, cfg.samples_per_class - n_val)
    return classes, [n_val] * classes, train_counts(n_train * classes, classes, cfg.imbalance, cfg.imbalance_keeps)


def train_counts(total: int, classes: int, imbalance: float, keeps: str = "total") -> list[int]:
    """Training images per class: class 0 gets `imbalance` of the set (0 = balanced).

    keeps "total": the set keeps `total` images and the other classes share what class 0 leaves;
    "minority": the other classes keep their balanced share and class 0 grows to `imbalance` of the set.
    """
    base, extra = divmod(total, classes)
    if imbalance == 0 or classes == 1:
        return [base + (1 if k < extra else 0) for k in range(classes)]
    if keeps == "minority":
        kept = [base + (1 if k < extra else 0) for k in range(1, classes)]
        return [max(1, round(imbalance / (1 - imbalance) * sum(kept)))] + kept
    first = min(total - (classes - 1), max(1, round(imbalance * total)))
    rest, extra = divmod(total - first, classes - 1)
    return [first] + [rest + (1 if k < extra else 0) for k in range(classes - 1)]


def _render_glyphs(cfg: DataConfig) -> RawArrays:
    from sweep.train import glyphs

    classes, val_counts, tr_counts = _glyphs_counts(cfg)
    y_val = np.repeat(np.arange(classes), val_counts)
    y_train = np.repeat(np.arange(classes), tr_counts)
    # Separate named streams: the validation images do not change with imbalance.
    x_val = glyphs.render_samples(y_val, cfg.image_size, derive_seed(cfg.seed, "glyphs-val"))
    x_train = glyphs.render_samples(y_train, cfg.image_size, derive_seed(cfg.seed, "glyphs-train"))
    return x_train, y_train, x_val, y_val, tuple(glyphs.GLYPHS[:classes])


def _digits(cfg: DataConfig) -> tuple[list[np.ndarray], tuple[str, ...]]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = (bunch.images * (255.0 / 16.0)).astype(np.uint8)
    per_class = [resize(images[bunch.target == k], cfg.image_size) for k in range(10)]
    return per_class, tuple(str(k) for k in range(10))


SOURCES: dict[str, Callable[[DataConfig], tuple[list[np.ndarray], tuple[str, ...]]]] = {
    DIGITS: _digits,
    FOLDER: folder_source,
    NPZ: npz_source,
    LOADER: loader_source,
}


def _split_fixed(cfg: DataConfig) -> RawArrays:
    """Split a fixed dataset per class; resample the training set for imbalance."""
    per_class, names = SOURCES[cfg.dataset](cfg)
    if cfg.classes:
        per_class, names = per_class[: cfg.classes], names[: cfg.classes]
    rng = np.random.default_rng(derive_seed(cfg.seed, "split"))
    pools = []
    x_val = []
    y_val = []
    for k, images in enumerate(per_class):
        images = images[rng.permutation(len(images))][: cfg.samples_per_class]
        n_val = max(1, round(cfg.val_fraction * len(images)))
        if len(images) - n_val < 1:
            raise DataError(
                f"data: class {names[k]!r} has {len(images)} image(s) (data.samples_per_class="
                f"{cfg.samples_per_class}): too few to split into train and validation (data.val_fraction="
                f"{cfg.val_fraction:g}); every class needs at least 2"
            )
        x_val.append(images[:n_val])
        y_val.append(np.full(n_val, k))
        pools.append(images[n_val:])
    counts = train_counts(sum(len(p) for p in pools), len(pools), cfg.imbalance, cfg.imbalance_keeps)
    x_train = [_draw(pool, n, rng) for pool, n in zip(pools, counts, strict=True)]
    y_train = [np.full(n, k) for k, n in enumerate(counts)]
    return (np.concatenate(x_train), np.concatenate(y_train), np.concatenate(x_val), np.concatenate(y_val), names)


def _draw(pool: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n images from a class pool: a subset, or with replacement if the pool is too small."""
    if n <= len(pool):
        return pool[:n]
    return np.concatenate([pool, pool[rng.integers(0, len(pool), n - len(pool))]])


# --- raw arrays, cached


def raw_arrays(cfg: DataConfig, cache_dir: Path | None = None) -> RawArrays:
    """(x_train, y_train, x_val, y_val, class names), uint8 images sorted by class.

    glyphs120 is cached on disk (rendering takes seconds; loading, milliseconds).
    """
    if cfg.dataset != GLYPHS120:
        return _split_fixed(cfg)
    cache = (cache_dir or default_cache_dir()) / f"{GLYPHS120}-{_cache_key(cfg)}.npz"
    cached = _read_cache(cache)
    if cached is not None:
        return cached
    arrays = _render_glyphs(cfg)
    names = ("x_train", "y_train", "x_val", "y_val", "names")
    _save_atomically(cache, dict(zip(names, (*arrays[:4], np.array(arrays[4])), strict=True)))
    return arrays


def _read_cache(cache: Path) -> RawArrays | None:
    """The cached arrays; None if there are none, or the file is not what this module writes (cut short,
    another format, or an object array: never unpickled, which would run code chosen by its writer).
    The caller renders them again and replaces the file.
    """
    try:
        with np.load(cache, allow_pickle=False) as saved:
            arrays = tuple(np.asarray(saved[k]) for k in ("x_train", "y_train", "x_val", "y_val"))
            return (*arrays, tuple(str(n) for n in saved["names"]))  # type: ignore[return-value]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError):  # OSError: no file yet, among others
        return None


def default_cache_dir() -> Path:
    return Path(os.environ.get("BATCHSWEEP_CACHE", Path.home() / ".cache" / "batchsweep"))


def _cache_key(cfg: DataConfig) -> str:
    keys = ("classes", "samples_per_class", "image_size", "val_fraction", "imbalance", "seed")
    settings: dict[str, Any] = {k: getattr(cfg, k) for k in keys}
    if cfg.imbalance_keeps != "total":  # added later: older caches stay valid
        settings["imbalance_keeps"] = cfg.imbalance_keeps
    settings["version"] = CACHE_VERSION
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


def _save_atomically(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write to a temporary name and rename: parallel workers never read half a file."""
    with atomic.replacing(path) as tmp, open(tmp, "wb") as handle:  # a temporary name no other process shares
        # numpy's stub types **kwds as savez's own flags; these are named arrays
        np.savez(handle, **arrays)  # type: ignore[arg-type]


# --- preprocessing and the split


def preprocess(x: np.ndarray, mismatch: str = "none") -> np.ndarray:
    """uint8 (N,H,W) -> float32 (N,H,W,1), or (N,H,W,3) -> (N,H,W,3). Training always uses
    mismatch="none" (x / 255).
    """
    x = x.astype(np.float32)
    x = x[..., None] if x.ndim == 3 else x
    if mismatch == "none":
        return x / 255.0
    if mismatch == "scale":  # validation left in 0..255: the "forgot to rescale" bug
        return x
    if mismatch == "invert":  # ink dark on light: a different colour convention
        return 1.0 - x / 255.0
    if mismatch == "standardize":  # zero mean, unit variance over the set, vs train in [0, 1]
        return (x - x.mean()) / (x.std() + 1e-7)
    raise ValueError(f"unknown preprocess_mismatch {mismatch!r}")


def check_batch(batch_size: int, train_images: int) -> None:
    """DataError for a batch larger than the training set: every step would be the whole set, one step an epoch,
    and the run labelled with a batch size it never trained at.
    """
    if batch_size > train_images:
        raise DataError(
            f"train.batch_size {batch_size} is larger than the {train_images} training images (one step an epoch, "
            f"of the whole set); give at most {train_images}, or more data"
        )


def load_split(cfg: DataConfig, cache_dir: Path | None = None) -> Split:
    """The arrays a run trains and evaluates on; identical for identical data settings."""
    x_train, y_train, x_val, y_val, names = raw_arrays(cfg, cache_dir)
    rng = np.random.default_rng(derive_seed(cfg.seed, "val-order"))
    val_order = rng.permutation(len(y_val))
    eval_order = np.random.default_rng(derive_seed(cfg.seed, "train-eval")).permutation(len(y_train))
    eval_rows = np.sort(eval_order[: len(y_val)])
    return Split(
        x_train=preprocess(x_train),
        y_train=y_train.astype(np.int32),
        x_val=preprocess(x_val[val_order], cfg.preprocess_mismatch),
        y_val=y_val[val_order].astype(np.int32),
        x_train_eval=preprocess(x_train[eval_rows]),
        y_train_eval=y_train[eval_rows].astype(np.int32),
        num_classes=len(names),
        class_names=names,
    )


def epoch_order(labels: np.ndarray, shuffle: bool, seed: int, epoch: int) -> np.ndarray:
    """Row order of the training set for one epoch.

    Shuffled: a fresh permutation per epoch from a sub-seed of the run seed.
    Not shuffled: sorted by class (stable), the same every epoch.
    """
    if not shuffle:
        return np.argsort(labels, kind="stable")
    return np.random.default_rng(derive_seed(seed, "data-order", epoch)).permutation(len(labels))


def batches(x: Any, y: Any, batch_size: int) -> Any:
    """A `tf.data.Dataset` of (x, y) batches in the given row order; the last batch may be short.
    x and y may be arrays or tuples of arrays (a pack's towers, sweep/train/pack.py); y None: x alone.

    tf.data's autotuning is off. Its optimisation thread wakes after 10 ms, then 20, 40, ... up to
    5.12 s between wake-ups, and a finished iterator waits for the next wake-up: each `fit`,
    `evaluate` or `predict` call returned only at 0.63 s, 1.27, 2.55, 5.11, 10.23 s... after it
    started, up to twice its work (docs/levers.md, "tf.data's autotuning wait"). The arrays are in
    memory, so a fixed prefetch of two batches is all the pipeline needs.

    On another Keras backend (JAX): a generator of numpy batches in the same order, so no TensorFlow
    is imported there (sweep/train/backends.py).
    """
    if not backends.is_tensorflow():
        return numpy_batches(x, y, batch_size)
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    elements = x if y is None else (x, y)
    return tf.data.Dataset.from_tensor_slices(elements).batch(batch_size).prefetch(2).with_options(options)


def numpy_batches(x: Any, y: Any, batch_size: int) -> Any:
    """`batches` as numpy slices, read in order in this thread, and counted: Keras knows each epoch's
    length, as it does a `tf.data` pipeline's (a generator would make it guess the first one).
    """
    return _numpy_batches_class()(x if y is None else (x, y), batch_size)


@functools.cache  # one class per process; it subclasses a Keras class, so it is made on first use
def _numpy_batches_class() -> Any:
    import keras

    class NumpyBatches(keras.utils.PyDataset):
        def __init__(self, elements: Any, batch_size: int) -> None:
            super().__init__()  # one worker, no multiprocessing: batches come in order
            self.elements, self.batch_size = elements, batch_size
            first = elements
            while isinstance(first, tuple):
                first = first[0]
            self.rows = len(first)

        def __len__(self) -> int:
            return math.ceil(self.rows / self.batch_size)

        def __getitem__(self, index: int) -> Any:
            return _rows(self.elements, slice(index * self.batch_size, (index + 1) * self.batch_size))

    return NumpyBatches


def _rows(elements: Any, rows: slice) -> Any:
    """The same rows of an array or of every array in (nested) tuples of them."""
    return tuple(_rows(e, rows) for e in elements) if isinstance(elements, tuple) else elements[rows]
