"""Datasets, the train/val split, and the post's three data toggles.

Flow: a source gives images per class -> a balanced validation set and a
training set (imbalanced on request) -> preprocessing (different for
validation on request) -> a per-epoch order (shuffled or class-sorted) ->
`tf.data` batches.

Decisions:
- The data has its own seed (`data.seed`), not the run's: every point of a
  sweep with the same data settings sees the same validation set and the same
  training images; the run seed only changes initialisation and data order.
- Imbalance keeps the training-set size: class 0 gets `imbalance` of it and the
  other classes share the rest evenly. glyphs120 renders as many images as that
  needs; fixed datasets (digits, folder, npz) draw class-0 images with
  replacement when the class has too few.
- Shuffling happens here, in numpy, once per epoch (`epoch_order`), not through
  `fit(shuffle=...)`, which Keras ignores for `tf.data` inputs. Unshuffled means
  the same class-sorted order every epoch, so each batch holds one or two classes.
- Validation is balanced, shuffled once with the data seed, and never resampled.

Registry: `SOURCES` maps a dataset name to a function
``(DataConfig) -> (images_per_class: list[np.ndarray uint8 (n, size, size)], class_names)``;
add a dataset by adding one entry (README, "Adding a dataset").
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from sweep.config import DataConfig
from sweep.plan import derive_seed

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


# --- sources: raw images per class


def _glyphs_counts(cfg: DataConfig) -> tuple[int, list[int], list[int]]:
    """(number of classes, val count per class, train count per class) for glyphs120."""
    from sweep import glyphs

    classes = min(cfg.classes or len(glyphs.GLYPHS), len(glyphs.GLYPHS))
    n_val = max(1, round(cfg.val_fraction * cfg.samples_per_class))
    n_train = max(1, cfg.samples_per_class - n_val)
    return classes, [n_val] * classes, train_counts(n_train * classes, classes, cfg.imbalance)


def train_counts(total: int, classes: int, imbalance: float) -> list[int]:
    """Training images per class: class 0 gets `imbalance` of `total` (0 = balanced)."""
    if imbalance == 0 or classes == 1:
        base, extra = divmod(total, classes)
        return [base + (1 if k < extra else 0) for k in range(classes)]
    first = min(total - (classes - 1), max(1, round(imbalance * total)))
    rest, extra = divmod(total - first, classes - 1)
    return [first] + [rest + (1 if k < extra else 0) for k in range(classes - 1)]


def _render_glyphs(cfg: DataConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    from sweep import glyphs

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
    per_class = [_resize(images[bunch.target == k], cfg.image_size) for k in range(10)]
    return per_class, tuple(str(k) for k in range(10))


class DataError(ValueError):
    """A dataset file or folder that cannot be used as it is. One line, naming the file and the problem.

    A ValueError, so callers that catch ValueError keep working; its own class so a caller
    can tell it from a bug (retrying a run does not fix its data).
    """


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")


@dataclass(frozen=True)
class FolderScan:
    """What dataset `folder` reads under data.path, decided from names and file types alone."""

    root: Path
    classes: tuple[tuple[str, tuple[Path, ...]], ...]  # (class folder name, its image files, sorted)
    skipped: tuple[str, ...]  # left out: hidden entries and files that are not images by name; relative to root


def scan_folder(path: str | Path) -> FolderScan:
    """One sub-folder per class, images directly inside; see docs/inputs.md.

    Hidden entries (.DS_Store, .git, ._x.png) and files whose suffix is not an image are
    skipped and listed in `skipped`; anything else that does not fit the layout is a
    DataError, because leaving it out would silently change the dataset.
    """
    root = Path(path).resolve()
    if not root.is_dir():
        raise DataError(f"data.path {root}: not a folder (dataset folder needs one sub-folder per class)")
    skipped: list[str] = []
    classes = []
    for entry in _listing(root):
        if entry.name.startswith(".") or not entry.is_dir():  # a README, a .DS_Store, a .git folder
            skipped.append(entry.name)
            continue
        _inside(entry, root)
        images = []
        for item in _listing(entry):
            if item.name.startswith("."):
                skipped.append(f"{entry.name}/{item.name}")
            elif item.is_dir():  # also a folder named like an image, cat.png/
                raise DataError(f"data.path {item}: a folder inside a class folder; images must sit directly in "
                                f"the class folder (nested folders are not read, so their images would be missing)")
            elif item.suffix.lower() not in IMAGE_SUFFIXES:  # notes.txt, Thumbs.db, labels.csv: never read
                skipped.append(f"{entry.name}/{item.name}")
            else:
                _inside(item, root)  # also refuses a broken link
                if not item.is_file():  # a FIFO named x.png would block the reader forever
                    raise DataError(f"data.path {item}: not a regular file")
                images.append(item)
        if not images:
            others = sum(1 for s in skipped if s.startswith(f"{entry.name}/"))
            raise DataError(f"data.path {entry}: class folder holds no images ({' '.join(IMAGE_SUFFIXES)})"
                            + (f"; {others} other file(s) skipped" if others else ""))
        classes.append((entry.name, tuple(images)))
    if len(classes) < 2:
        found = f"only {classes[0][0]!r}" if classes else "none"
        loose = any(Path(s).suffix.lower() in IMAGE_SUFFIXES for s in skipped if "/" not in s)
        hint = "; it holds images itself: is it one class folder? point data.path at the folder above it" if loose else ""
        raise DataError(f"data.path {root}: found {len(classes)} class folder(s) ({found}); a classifier needs at "
                        f"least 2, one sub-folder per class{hint}")
    return FolderScan(root=root, classes=tuple(classes), skipped=tuple(skipped))


def _listing(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError as err:
        raise DataError(f"data.path {folder}: cannot list this folder: {err.strerror or err}") from None


def _inside(path: Path, root: Path) -> None:
    """Refuse a link that leads out of data.path: the dataset is what is under data.path (docs/inputs.md)."""
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError) as err:  # a dangling link, a link loop
        raise DataError(f"data.path {path}: a broken link ({type(err).__name__}: {err})") from None
    if not target.is_relative_to(root):
        raise DataError(f"data.path {path}: a link to {target}, outside data.path {root}; copy the files in "
                        f"instead (a dataset is what is under its folder, so runs stay reproducible)")


def _check_classes(cfg: DataConfig, where: Path) -> None:
    if cfg.classes == 1:  # _split_fixed would keep only the first class
        raise DataError(f"data.path {where}: data.classes is 1; a classifier needs at least 2 classes")


def skipped_files(cfg: DataConfig) -> tuple[str, ...]:
    """The files dataset `folder` leaves out (relative to data.path), for the run record; () for other datasets."""
    return scan_folder(cfg.path or "").skipped if cfg.dataset == "folder" else ()


def _folder(cfg: DataConfig) -> tuple[list[np.ndarray], tuple[str, ...]]:
    scan = scan_folder(cfg.path or "")
    names = tuple(name for name, _ in scan.classes)
    _check_classes(cfg, scan.root)
    if scan.skipped:  # visible in the worker's log; skipped_files() gives the list for the run record
        warnings.warn(f"data.path {scan.root}: skipped {len(scan.skipped)} file(s) that are hidden or not images, "
                      f"e.g. {scan.skipped[0]}", stacklevel=2)
    size = (cfg.image_size, cfg.image_size)
    used = scan.classes[: cfg.classes] if cfg.classes else scan.classes  # the rest would be dropped unread anyway
    per_class = [np.stack([_read_image(f, size) for f in files[: cfg.samples_per_class]]) for _, files in used]
    return per_class, names[: len(used)]


def _read_image(path: Path, size: tuple[int, int]) -> np.ndarray:
    """One image as uint8 grey levels, resized; any reading problem is a DataError naming the file."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            if image.mode.startswith("I"):  # 16-bit grey: convert("L") would clip everything above 255 to white
                wide = np.asarray(image, dtype=np.float64)
                if wide.min() < 0 or wide.max() > 65535:
                    raise DataError(f"data.path {path}: integer image with values in [{wide.min():g}, {wide.max():g}]; "
                                    f"expected 8 or 16 bits")
                image = Image.fromarray(np.rint(wide / 257).astype(np.uint8))
            return np.asarray(image.convert("L").resize(size))
    except DataError:
        raise
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else (str(err).splitlines() or [""])[0]
        raise DataError(f"data.path {path}: cannot read this image: {reason}") from None


def _npz(cfg: DataConfig) -> tuple[list[np.ndarray], tuple[str, ...]]:
    path = Path(cfg.path or "")
    x, y = _npz_arrays(path)
    x = _npz_images(x, path)
    y = _npz_labels(y, len(x), path)
    labels = np.unique(y)
    if len(labels) < 2:
        raise DataError(f"data.path {path}: y holds {len(labels)} distinct label(s); a classifier needs at least 2")
    names = tuple(str(k) for k in labels)
    _check_classes(cfg, path)
    per_class = [_resize(x[y == k], cfg.image_size) for k in labels]
    return per_class, names


def _npz_arrays(path: Path) -> tuple[np.ndarray, np.ndarray]:
    import zipfile

    try:
        with open(path, "rb") as handle:
            is_zip = zipfile.is_zipfile(handle)
    except OSError as err:
        raise DataError(f"data.path {path}: cannot read: {err.strerror or err}") from None
    if not is_zip:  # a .npy, a pickle or a text file renamed: np.load would guess its way through it
        raise DataError(f"data.path {path}: not an .npz archive (write one with np.savez(path, x=images, y=labels))")
    name = "the archive"
    try:
        # allow_pickle=False: unpickling an object array runs code chosen by whoever made the file.
        with np.load(path, allow_pickle=False) as archive:
            missing = {"x", "y"} - set(archive.files)
            if missing:
                raise DataError(f"data.path {path}: missing array(s) {sorted(missing)}; expected x (N,H,W[,C]) and y (N,), "
                                f"found {sorted(archive.files)[:10]}")
            name = "array x"
            x = archive["x"]
            name = "array y"
            y = archive["y"]
    except (DataError, MemoryError):
        raise
    except Exception as err:  # noqa: BLE001 - a corrupt archive fails in many ways: BadZipFile, zlib.error, EOFError, ...
        if "allow_pickle" in str(err):
            raise DataError(f"data.path {path}: {name} holds Python objects (dtype object), which would have to be "
                            f"unpickled; refused (unpickling can run code): save plain numeric arrays") from None
        kind = type(err).__qualname__ if type(err).__module__ == "builtins" else f"{type(err).__module__}.{type(err).__qualname__}"
        raise DataError(f"data.path {path}: cannot read {name}: {kind}: {(str(err).splitlines() or [''])[0]}") from None
    for name, array in (("x", x), ("y", y)):
        if not isinstance(array, np.ndarray):  # np.load hands back raw bytes for a zip member that is not .npy
            raise DataError(f"data.path {path}: {name} is not a numpy array (a zip member that is not in .npy format)")
    return x, y


def _npz_images(x: np.ndarray, path: Path) -> np.ndarray:
    """x as uint8 (N,H,W) grey levels. Refuses what it would have to guess about (docs/inputs.md)."""
    where = f"data.path {path}: array x"
    if x.dtype.kind not in "uif":
        raise DataError(f"{where} has dtype {x.dtype}; expected uint8 (0..255), another integer type with values "
                        f"in 0..255, or float (0..1 or 0..255)")
    if x.ndim == 4 and x.shape[-1] not in (1, 3):
        hint = "; channels first? use np.moveaxis(x, 1, -1)" if x.shape[1] in (1, 3) else ""
        raise DataError(f"{where} has shape {x.shape}; the last axis must be 1 or 3 channels{hint}")
    if x.ndim not in (3, 4):
        raise DataError(f"{where} has shape {x.shape}; expected (N, H, W) or (N, H, W, C)")
    if 0 in x.shape:
        raise DataError(f"{where} has shape {x.shape}: no pixels")
    low, high = float(x.min()), float(x.max())  # a NaN anywhere makes both NaN
    if not (math.isfinite(low) and math.isfinite(high)):
        raise DataError(f"{where} holds NaN or infinite values")
    if low < 0 or high > 255:
        hint = ("; standardised? save the raw pixels, the harness does its own preprocessing" if x.dtype.kind == "f"
                else "; 16-bit? scale to 0..255 first")
        raise DataError(f"{where} holds values in [{low:g}, {high:g}]; expected 0..255, or 0..1 for floats{hint}")
    if x.dtype == np.uint8 and x.ndim == 3:
        return x
    values = x.astype(np.float32) * (255.0 if x.dtype.kind == "f" and high <= 1.0 else 1.0)
    if values.ndim == 4:  # the grey levels of PIL's convert("L"), as for dataset folder (ITU-R 601-2)
        values = values[..., 0] if values.shape[-1] == 1 else values @ np.array([0.299, 0.587, 0.114], np.float32)
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


def _npz_labels(y: np.ndarray, n: int, path: Path) -> np.ndarray:
    """y as int64 class labels (N,): whole numbers >= 0; any values, not necessarily 0..C-1."""
    where = f"data.path {path}: array y"
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        hint = "; one-hot? use y.argmax(axis=1)" if y.ndim == 2 else ""
        raise DataError(f"{where} has shape {y.shape}; expected one class label per image, shape (N,){hint}")
    if len(y) != n:
        raise DataError(f"{where} has {len(y)} labels but x has {n} images; they must match row for row")
    if y.dtype.kind not in "uif":
        raise DataError(f"{where} has dtype {y.dtype}; expected integer class labels")
    values = y.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(values) | (values != np.round(values)) | (values < 0) | (values >= 2**31))
    if len(bad):
        row = bad[0]
        hint = " (-1 often marks unlabelled images: drop those rows)" if values[row] == -1 else ""
        raise DataError(f"{where} holds {len(bad)} label(s) that are not whole numbers in [0, 2^31), "
                        f"e.g. {y[row].item()!r} at row {row}{hint}")
    return values.astype(np.int64)


def _resize(images: np.ndarray, size: int) -> np.ndarray:
    if images.shape[1:] == (size, size):
        return images
    from PIL import Image

    return np.stack([np.asarray(Image.fromarray(im).resize((size, size), Image.BILINEAR)) for im in images])


SOURCES: dict[str, Callable[[DataConfig], tuple[list[np.ndarray], tuple[str, ...]]]] = {
    "digits": _digits,
    "folder": _folder,
    "npz": _npz,
}


def _split_fixed(cfg: DataConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    """Split a fixed dataset per class; resample the training set for imbalance."""
    per_class, names = SOURCES[cfg.dataset](cfg)
    if cfg.classes:
        per_class, names = per_class[: cfg.classes], names[: cfg.classes]
    rng = np.random.default_rng(derive_seed(cfg.seed, "split"))
    pools, x_val, y_val = [], [], []
    for k, images in enumerate(per_class):
        images = images[rng.permutation(len(images))][: cfg.samples_per_class]
        n_val = max(1, round(cfg.val_fraction * len(images)))
        if len(images) - n_val < 1:
            raise ValueError(f"class {names[k]!r} has {len(images)} image(s): too few to split into train and validation")
        x_val.append(images[:n_val])
        y_val.append(np.full(n_val, k))
        pools.append(images[n_val:])
    counts = train_counts(sum(len(p) for p in pools), len(pools), cfg.imbalance)
    x_train = [_draw(pool, n, rng) for pool, n in zip(pools, counts)]
    y_train = [np.full(n, k) for k, n in enumerate(counts)]
    return (np.concatenate(x_train), np.concatenate(y_train), np.concatenate(x_val),
            np.concatenate(y_val), names)


def _draw(pool: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n images from a class pool: a subset, or with replacement if the pool is too small."""
    if n <= len(pool):
        return pool[:n]
    return np.concatenate([pool, pool[rng.integers(0, len(pool), n - len(pool))]])


# --- raw arrays, cached


def raw_arrays(cfg: DataConfig, cache_dir: Path | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    """(x_train, y_train, x_val, y_val, class names), uint8 images sorted by class.

    glyphs120 is cached on disk (rendering takes seconds; loading, milliseconds).
    """
    if cfg.dataset != "glyphs120":
        return _split_fixed(cfg)
    cache = (cache_dir or default_cache_dir()) / f"glyphs120-{_cache_key(cfg)}.npz"
    if cache.exists():
        with np.load(cache) as saved:
            arrays = tuple(saved[k] for k in ("x_train", "y_train", "x_val", "y_val"))
            return (*arrays, tuple(str(n) for n in saved["names"]))
    arrays = _render_glyphs(cfg)
    _save_atomically(cache, dict(zip(("x_train", "y_train", "x_val", "y_val", "names"), (*arrays[:4], np.array(arrays[4])))))
    return arrays


def default_cache_dir() -> Path:
    return Path(os.environ.get("BATCHSWEEP_CACHE", Path.home() / ".cache" / "batchsweep"))


def _cache_key(cfg: DataConfig) -> str:
    keys = ("classes", "samples_per_class", "image_size", "val_fraction", "imbalance", "seed")
    settings: dict[str, Any] = {k: getattr(cfg, k) for k in keys}
    settings["version"] = CACHE_VERSION
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


def _save_atomically(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write to a temporary name and rename: parallel workers never read half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as handle:
        np.savez(handle, **arrays)
    os.replace(tmp, path)


# --- preprocessing and the split


def preprocess(x: np.ndarray, mismatch: str = "none") -> np.ndarray:
    """uint8 (N,H,W) -> float32 (N,H,W,1). Training always uses mismatch="none" (x / 255)."""
    x = x.astype(np.float32)[..., None]
    if mismatch == "none":
        return x / 255.0
    if mismatch == "scale":  # validation left in 0..255: the "forgot to rescale" bug
        return x
    if mismatch == "invert":  # ink dark on light: a different colour convention
        return 1.0 - x / 255.0
    if mismatch == "standardize":  # zero mean, unit variance over the set, vs train in [0, 1]
        return (x - x.mean()) / (x.std() + 1e-7)
    raise ValueError(f"unknown preprocess_mismatch {mismatch!r}")


def load_split(cfg: DataConfig, cache_dir: Path | None = None) -> Split:
    """The arrays a run trains and evaluates on; identical for identical data settings."""
    x_train, y_train, x_val, y_val, names = raw_arrays(cfg, cache_dir)
    rng = np.random.default_rng(derive_seed(cfg.seed, "val-order"))
    val_order = rng.permutation(len(y_val))
    eval_rows = np.sort(np.random.default_rng(derive_seed(cfg.seed, "train-eval")).permutation(len(y_train))[: len(y_val)])
    return Split(
        x_train=preprocess(x_train), y_train=y_train.astype(np.int32),
        x_val=preprocess(x_val[val_order], cfg.preprocess_mismatch), y_val=y_val[val_order].astype(np.int32),
        x_train_eval=preprocess(x_train[eval_rows]), y_train_eval=y_train[eval_rows].astype(np.int32),
        num_classes=len(names), class_names=names,
    )


def epoch_order(labels: np.ndarray, shuffle: bool, seed: int, epoch: int) -> np.ndarray:
    """Row order of the training set for one epoch.

    Shuffled: a fresh permutation per epoch from a sub-seed of the run seed.
    Not shuffled: sorted by class (stable), the same every epoch.
    """
    if not shuffle:
        return np.argsort(labels, kind="stable")
    return np.random.default_rng(derive_seed(seed, "data-order", epoch)).permutation(len(labels))


def batches(x: np.ndarray, y: np.ndarray, batch_size: int) -> Any:
    """A `tf.data.Dataset` of (x, y) batches in the given row order; the last batch may be short."""
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size).prefetch(tf.data.AUTOTUNE)
