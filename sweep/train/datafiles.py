"""The user's dataset files: dataset `folder` (one sub-folder of images per class),
dataset `npz` (arrays x and y) and dataset `loader` (the user's function returning x
and y, with npz's contract), read into images per class: grey (N,H,W), or colour
(N,H,W,3) with `data.channels: 3`.

All refuse what they would have to guess about with a one-line `DataError` naming
the file and the problem (docs/inputs.md); sweep/train/data.py splits and batches the result.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sweep.config.keys import FOLDER, DataConfig
from sweep.train import usercode


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
                raise DataError(
                    f"data.path {item}: a folder inside a class folder; images must sit directly in "
                    f"the class folder (nested folders are not read, so their images would be missing)"
                )
            elif item.suffix.lower() not in IMAGE_SUFFIXES:  # notes.txt, Thumbs.db, labels.csv: never read
                skipped.append(f"{entry.name}/{item.name}")
            else:
                _inside(item, root)  # also refuses a broken link
                if not item.is_file():  # a FIFO named x.png would block the reader forever
                    raise DataError(f"data.path {item}: not a regular file")
                images.append(item)
        if not images:
            others = sum(1 for s in skipped if s.startswith(f"{entry.name}/"))
            raise DataError(
                f"data.path {entry}: class folder holds no images ({' '.join(IMAGE_SUFFIXES)})"
                + (f"; {others} other file(s) skipped" if others else "")
            )
        classes.append((entry.name, tuple(images)))
    if len(classes) < 2:
        found = f"only {classes[0][0]!r}" if classes else "none"
        loose = any(Path(s).suffix.lower() in IMAGE_SUFFIXES for s in skipped if "/" not in s)
        hint = (
            "; it holds images itself: is it one class folder? point data.path at the folder above it" if loose else ""
        )
        raise DataError(
            f"data.path {root}: found {len(classes)} class folder(s) ({found}); a classifier needs at "
            f"least 2, one sub-folder per class{hint}"
        )
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
        raise DataError(
            f"data.path {path}: a link to {target}, outside data.path {root}; copy the files in "
            f"instead (a dataset is what is under its folder, so runs stay reproducible)"
        )


def _check_classes(cfg: DataConfig, where: Path) -> None:
    if cfg.classes == 1:  # _split_fixed would keep only the first class
        raise DataError(f"data.path {where}: data.classes is 1; a classifier needs at least 2 classes")


def skipped_files(cfg: DataConfig) -> tuple[str, ...]:
    """The files dataset `folder` leaves out (relative to data.path), for the run record; () for other datasets."""
    return scan_folder(cfg.path or "").skipped if cfg.dataset == FOLDER else ()


def folder_source(cfg: DataConfig) -> tuple[list[np.ndarray], tuple[str, ...]]:
    scan = scan_folder(cfg.path or "")
    names = tuple(name for name, _ in scan.classes)
    _check_classes(cfg, scan.root)
    if scan.skipped:  # visible in the worker's log; skipped_files() gives the list for the run record
        warnings.warn(
            f"data.path {scan.root}: skipped {len(scan.skipped)} file(s) that are hidden or not images, "
            f"e.g. {scan.skipped[0]}",
            stacklevel=2,
        )
    size = (cfg.image_size, cfg.image_size)
    used = scan.classes[: cfg.classes] if cfg.classes else scan.classes  # the rest would be dropped unread anyway
    mode = "RGB" if cfg.channels == 3 else "L"
    per_class = [np.stack([read_image(f, size, mode) for f in files[: cfg.samples_per_class]]) for _, files in used]
    return per_class, names[: len(used)]


def read_image(path: Path, size: tuple[int, int], mode: str = "L") -> np.ndarray:
    """One image as uint8 grey levels (mode L) or RGB, resized; any reading problem is a DataError naming the file."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            if image.mode.startswith("I"):  # 16-bit grey: convert("L") would clip everything above 255 to white
                wide = np.asarray(image, dtype=np.float64)
                if wide.min() < 0 or wide.max() > 65535:
                    raise DataError(
                        f"data.path {path}: integer image with values in [{wide.min():g}, {wide.max():g}]; "
                        f"expected 8 or 16 bits"
                    )
                return np.asarray(Image.fromarray(np.rint(wide / 257).astype(np.uint8)).convert(mode).resize(size))
            return np.asarray(image.convert(mode).resize(size))
    except DataError:
        raise
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else (str(err).splitlines() or [""])[0]
        raise DataError(f"data.path {path}: cannot read this image: {reason}") from None


def npz_source(cfg: DataConfig) -> tuple[list[np.ndarray], tuple[str, ...]]:
    path = Path(cfg.path or "")
    x, y = _npz_arrays(path)
    return _per_class(cfg, x, y, f"data.path {path}")


def loader_source(cfg: DataConfig) -> tuple[list[np.ndarray], tuple[str, ...]]:
    """The user's loader's (x, y), checked as an npz's arrays are."""
    source = f"data.loader {cfg.loader}"
    x, y = usercode.load_arrays(cfg.loader or "")
    if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)):
        raise DataError(f"{source}: returned ({type(x).__name__}, {type(y).__name__}); x and y must be numpy arrays")
    return _per_class(cfg, x, y, source)


def _per_class(cfg: DataConfig, x: np.ndarray, y: np.ndarray, source: str) -> tuple[list[np.ndarray], tuple[str, ...]]:
    x = npz_images(x, source, cfg.channels)
    y = _npz_labels(y, len(x), source)
    labels = np.unique(y)
    if len(labels) < 2:
        raise DataError(f"{source}: y holds {len(labels)} distinct label(s); a classifier needs at least 2")
    if cfg.classes == 1:  # _split_fixed would keep only the first class
        raise DataError(f"{source}: data.classes is 1; a classifier needs at least 2 classes")
    per_class = [resize(x[y == k], cfg.image_size) for k in labels]
    return per_class, tuple(str(k) for k in labels)


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
                raise DataError(
                    f"data.path {path}: missing array(s) {sorted(missing)}; "
                    f"expected x (N,H,W[,C]) and y (N,), "
                    f"found {sorted(archive.files)[:10]}"
                )
            name = "array x"
            x = archive["x"]
            name = "array y"
            y = archive["y"]
    except (DataError, MemoryError):
        raise
    except Exception as err:  # noqa: BLE001 - a corrupt archive fails in many ways: BadZipFile, zlib.error, EOFError, ...
        if "allow_pickle" in str(err):
            raise DataError(
                f"data.path {path}: {name} holds Python objects (dtype object), which would have to be "
                f"unpickled; refused (unpickling can run code): save plain numeric arrays"
            ) from None
        kind = type(err).__qualname__
        kind = kind if type(err).__module__ == "builtins" else f"{type(err).__module__}.{kind}"
        raise DataError(f"data.path {path}: cannot read {name}: {kind}: {(str(err).splitlines() or [''])[0]}") from None
    for name, array in (("x", x), ("y", y)):
        if not isinstance(array, np.ndarray):  # np.load hands back raw bytes for a zip member that is not .npy
            raise DataError(f"data.path {path}: {name} is not a numpy array (a zip member that is not in .npy format)")
    return x, y


def npz_images(x: np.ndarray, source: str | Path, channels: int = 1) -> np.ndarray:
    """x as uint8 (N,H,W) grey levels, or (N,H,W,3) colour with channels 3. Refuses what it would have
    to guess about (docs/inputs.md). `source` names where x came from (a path: data.path).
    """
    where = f"{_source(source)}: array x"
    if x.dtype.kind not in "uif":
        raise DataError(
            f"{where} has dtype {x.dtype}; expected uint8 (0..255), another integer type with values "
            f"in 0..255, or float (0..1 or 0..255)"
        )
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
        hint = (
            "; standardised? save the raw pixels, the harness does its own preprocessing"
            if x.dtype.kind == "f"
            else "; 16-bit? scale to 0..255 first"
        )
        raise DataError(f"{where} holds values in [{low:g}, {high:g}]; expected 0..255, or 0..1 for floats{hint}")
    if x.dtype == np.uint8 and x.ndim == 3 and channels == 1:
        return x
    values = x.astype(np.float32) * (255.0 if x.dtype.kind == "f" and high <= 1.0 else 1.0)
    if channels == 3:  # grey images repeated into three equal channels; colour kept
        values = values if values.ndim == 4 else values[..., None]
        values = np.repeat(values, 3, axis=-1) if values.shape[-1] == 1 else values
    elif values.ndim == 4:  # the grey levels of PIL's convert("L"), as for dataset folder (ITU-R 601-2)
        values = values[..., 0] if values.shape[-1] == 1 else values @ np.array([0.299, 0.587, 0.114], np.float32)
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


def _source(source: str | Path) -> str:
    return f"data.path {source}" if isinstance(source, Path) else source


def _npz_labels(y: np.ndarray, n: int, source: str) -> np.ndarray:
    """y as int64 class labels (N,): whole numbers >= 0; any values, not necessarily 0..C-1."""
    where = f"{source}: array y"
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
        raise DataError(
            f"{where} holds {len(bad)} label(s) that are not whole numbers in [0, 2^31), "
            f"e.g. {y[row].item()!r} at row {row}{hint}"
        )
    return values.astype(np.int64)


def resize(images: np.ndarray, size: int) -> np.ndarray:
    if images.shape[1:3] == (size, size):
        return images
    from PIL import Image

    return np.stack([np.asarray(Image.fromarray(im).resize((size, size), Image.Resampling.BILINEAR)) for im in images])
