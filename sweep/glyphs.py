"""The default dataset ``glyphs120``: 120 visually distinct glyphs, randomly augmented.

PLACEHOLDER DOCSTRING
"""

from __future__ import annotations

import functools
import os

import matplotlib
import numpy as np
from matplotlib.ft2font import FT2Font, LoadFlags
from scipy import ndimage

FONT_PATH: str = os.path.join(matplotlib.get_data_path(), "fonts", "ttf", "DejaVuSans.ttf")
N_CLASSES: int = 120

# Output of select_distinct() with the defaults below; test_glyphs.py checks it still is.
GLYPHS: tuple[str, ...] = (
    '0', '1', '3', '4', 'C', 'D', 'E', 'H', 'K', 'M',  # 0-9
    'P', 'V', 'W', 'X', 'Y', 'Z', 'b', 'f', 'm', 'q',  # 10-19
    'r', '&', '@', '#', '%', '$', '*', '+', '=', '<',  # 20-29
    '>', '~', '^', '©', '™', '₦', '₴', '±', '×', '≡',  # 30-39
    '≤', '≥', '∞', '∅', '∈', '∋', '⊂', '⊃', '⊆', '⊇',  # 40-49
    '⊕', '⊞', '⊠', '⊢', '⊣', '⊤', '∴', '∵', '∡', '∝',  # 50-59
    '≪', '≫', '⌂', '⌘', '↖', '↗', '↘', '↙', '↪', '↰',  # 60-69
    '↱', '↲', '↳', '↺', '↻', '⇄', '⇅', '⇆', '■', '□',  # 70-79
    '▷', '◁', '◇', '◐', '◑', '◒', '◓', '◬', '◮', '☆',  # 80-89
    '☘', '☢', '♂', '♔', '♖', '♧', '♨', '♫', '♬', '⚅',  # 90-99
    '⚓', '⚖', '⚘', '⚡', '✁', '✉', '✎', '❊', 'Λ', 'Ψ',  # 100-109
    'ζ', 'π', 'ω', 'Й', 'Л', 'Ъ', 'Ы', 'Ю', 'п', 'ц',  # 110-119
)

# ---------------------------------------------------------------------------
# Candidate pool for select_distinct, in order of preference (greedy keeps the
# earlier of two look-alikes, so plain Latin/digits win over Greek/Cyrillic).
# It deliberately contains the known look-alikes so the selection must reject them.
CANDIDATES: str = (
    "0123456789"
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    "abcdefghijklmnopqrstuvwxyz"
    "&@#%?!$*+=<>~^/\\|()[]{}'\",.-_`:;"
    "§¶©®™€£¥¢₹₩₽₤₦₱₴₸₺"
    "±×÷≠≈≡≤≥∞√∑∏∫∂∇∀∃∅∈∉∋∩∪⊂⊃⊆⊇⊕⊖⊗⊘⊙⊞⊠⊢⊣⊤⊥∧∨¬∴∵∠∡∥∦∝∮≪≫≺≻⌂⌘"
    "←↑→↓↔↕↖↗↘↙↩↪↰↱↲↳↶↷↺↻⇄⇅⇆⇇⇈⇉⇊⇐⇑⇒⇓⇔⇕"
    "■□▣▤▥▦▧▨▩▲△▶▷▼▽◀◁◆◇◈◉◊○◎●◐◑◒◓◔◕◢◣◤◥◧◨◩◪◫◬◭◮"
    "★☆☀☁☂☃☎☑☒☘☠☢☣☮☯☹☺☻☼☽☾♀♂♔♕♖♗♘♙♚♛♜♝♞♟♠♡♢♣♤♥♦♧♨♩♪♫♬♭♯"
    "⚀⚁⚂⚃⚄⚅⚐⚑⚒⚓⚔⚕⚖⚘⚙⚛⚜⚠⚡"
    "✁✂✆✈✉✌✍✎✏✓✔✖✗✘✚✝✞✠✡✦✧✩✪✯✰✱✲✳✴✵✶✷✸✹✺✻✼✽✾✿❀❁❂❃❄❅❆❇❈❉❊❋❍❏❖❘❙❚❛❜❝❞❡❢❣❤❥❦❧"
    "ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩαβγδεζηθικλμνξοπρστυφχψω"
    "АБВГДЕЖЗИЙКЛМНОПРСТУФХЦЧШЩЪЫЬЭЮЯ"
    "абвгдежзийклмнопрстуфхцчшщъыьэюя"
    "ЂЉЊЋЏЄЅІЇЈѢѲѴҐҒҖҘҚҢҮҰҲҶҺӘӨı"
)

# Selection criterion (see select_distinct); the numbers below are the committed choice.
THRESHOLD: float = 0.25  # largest round value that still leaves >= 120 glyphs (124 pass)
MIN_INK: float = 0.08  # mean ink in the normalised box; rejects thin strokes l I | / ( ) ! i j
MIN_EXTENT: float = 0.45  # longer ink side / em; rejects small marks . , ' ` - " whose
# identity is their size and position on the baseline, which the augmentation removes
METRIC_SIZE: int = 24  # normalised canvas side for the distance, in pixels
METRIC_FILL: float = 20 / 24  # glyph's longer bbox side as a fraction of that canvas
METRIC_BLUR: float = 1.0  # px; makes stroke width (upper vs lower case) matter less
METRIC_ANGLES: tuple[float, ...] = (-20.0, -15.0, -10.0, -5.0, 0.0, 5.0, 10.0, 15.0, 20.0)
METRIC_SHIFT: int = 1  # px at METRIC_SIZE, both axes

# Augmentation ranges for render_samples.
MASTER_FILL: float = 0.8  # master glyph's longer bbox side / master canvas side
SCALE_RANGE: tuple[float, float] = (0.6, 0.95)  # longer bbox side / image side
MAX_ROTATION: float = 18.0  # degrees, uniform in +-MAX_ROTATION
EXTRA_SHIFT: float = 0.06  # offset slack beyond "stays inside", fraction of image side
BLUR_RANGE: tuple[float, float] = (0.0, 0.7)  # px at the output size
GAMMA_RANGE: tuple[float, float] = (0.5, 2.0)  # <1 thickens strokes, >1 thins them
BACKGROUND_RANGE: tuple[float, float] = (0.0, 0.25)
INK_RANGE: tuple[float, float] = (0.65, 1.0)
NOISE_RANGE: tuple[float, float] = (0.06, 0.16)  # Gaussian noise sigma, fraction of 255


# ---------------------------------------------------------------------------
# Font rendering


@functools.lru_cache(maxsize=1)
def _font() -> FT2Font:
    return FT2Font(FONT_PATH)


def has_glyph(ch: str) -> bool:
    """True if DejaVu Sans itself maps ``ch`` (index 0 is .notdef, the tofu box)."""
    return _font().get_char_index(ord(ch)) != 0


_EM_PX: int = 192  # font size for the high-resolution bitmaps everything is resampled from


@functools.lru_cache(maxsize=None)
def _glyph_crop(ch: str) -> np.ndarray:
    """High-resolution float32 bitmap of ``ch`` cropped to its ink bounding box."""
    font = _font()
    font.clear()
    font.set_size(_EM_PX, 72)  # 72 dpi: points == pixels
    font.set_text(ch, 0.0, flags=LoadFlags.NO_HINTING)
    font.draw_glyphs_to_bitmap(antialiased=True)
    return _crop_to_ink(np.asarray(font.get_image(), dtype=np.float32) / 255.0)


def _place(crop: np.ndarray, size: int, fill: float, angle: float = 0.0) -> np.ndarray:
    """Draw ``crop`` into a size x size canvas: longer side = fill*size, bbox centred, rotated.

    Scaling to a fixed box (aspect kept) removes the size difference between case
    pairs such as o/O, so such pairs look alike to the distance, as they do after
    the random scale augmentation.
    """
    zoom = fill * size / max(crop.shape)  # output pixels per crop pixel
    if zoom < 1.0:  # anti-alias before shrinking
        crop = ndimage.gaussian_filter(crop, 0.45 / zoom)
    return _warp(crop, size, zoom, angle, (0.0, 0.0))


def _warp(
    source: np.ndarray, size: int, zoom: float, angle: float, shift: tuple[float, float]
) -> np.ndarray:
    """Similarity transform of ``source`` (centre to canvas centre + shift) into size x size."""
    theta = np.deg2rad(angle)
    cos, sin = np.cos(theta), np.sin(theta)
    # affine_transform maps output coords to input coords: in = M @ out + offset.
    matrix = np.array([[cos, -sin], [sin, cos]]) / zoom
    centre_in = (np.array(source.shape, np.float64) - 1.0) / 2.0
    centre_out = (size - 1.0) / 2.0 + np.asarray(shift, np.float64)
    offset = centre_in - matrix @ centre_out
    out = ndimage.affine_transform(
        source, matrix, offset, output_shape=(size, size), order=1, mode="constant", cval=0.0
    )
    return out.astype(np.float32, copy=False)


# ---------------------------------------------------------------------------
# Distinctness


def ink_fraction(ch: str) -> float:
    """Mean ink of the glyph normalised to the metric box: low for thin marks like . ' - | _"""
    return float(_place(_glyph_crop(ch), METRIC_SIZE, METRIC_FILL).mean())


def extent(ch: str) -> float:
    """Longer side of the glyph's ink box as a fraction of the em (font size)."""
    return max(_glyph_crop(ch).shape) / _EM_PX


def is_legible(ch: str, min_ink: float = MIN_INK, min_extent: float = MIN_EXTENT) -> bool:
    """Present in DejaVu Sans, big enough on the em, and enough ink once normalised."""
    return has_glyph(ch) and extent(ch) >= min_extent and ink_fraction(ch) >= min_ink


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """Zero-mean, unit-norm rows, so dot products are normalised cross-correlations."""
    x = x.reshape(x.shape[0], -1).astype(np.float64)
    x = x - x.mean(axis=1, keepdims=True)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _crop_to_ink(image: np.ndarray, level: float = 0.05) -> np.ndarray:
    """Crop a float bitmap to the bounding box of pixels brighter than ``level``."""
    rows = np.flatnonzero(image.max(axis=1) > level)
    cols = np.flatnonzero(image.max(axis=0) > level)
    if rows.size == 0:
        return np.zeros((1, 1), np.float32)  # blank glyph, e.g. a space
    return np.ascontiguousarray(image[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1])


def _normalised_variants(crops: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per glyph crop: the upright normalised image, and all its rotated+shifted variants.

    Returns (base (n, d), variants (n, v, d)), rows zero-mean and unit-norm.
    """
    shifts = range(-METRIC_SHIFT, METRIC_SHIFT + 1)
    base, variants = [], []
    for crop in crops:
        rotated = [_place(crop, METRIC_SIZE, METRIC_FILL, a) for a in METRIC_ANGLES]
        rotated = [ndimage.gaussian_filter(r, METRIC_BLUR) for r in rotated]
        base.append(rotated[METRIC_ANGLES.index(0.0)])
        variants.append(
            [np.roll(r, (dy, dx), axis=(0, 1)) for r in rotated for dy in shifts for dx in shifts]
        )
    n, v = len(crops), len(variants[0])
    base_rows = _unit_rows(np.stack(base))
    variant_rows = _unit_rows(np.stack(variants).reshape(n * v, -1))
    return base_rows, variant_rows.reshape(n, v, -1)


def _distances(crops: list[np.ndarray]) -> np.ndarray:
    """Symmetric (n, n) distance: 1 - max NCC over rotations +-20 deg and shifts +-1 px.

    Only one side is rotated/shifted against the other's upright image; taking the
    max of both directions makes it symmetric.
    """
    base, variants = _normalised_variants(crops)
    n, v, d = variants.shape
    sim = (variants.reshape(n * v, d) @ base.T).reshape(n, v, n).max(axis=1)
    sim = np.maximum(sim, sim.T)
    np.fill_diagonal(sim, 1.0)
    return 1.0 - sim


def distance_matrix(chars: str | tuple[str, ...]) -> np.ndarray:
    """_distances for characters, each normalised straight from its high-res font bitmap."""
    return _distances([_glyph_crop(ch) for ch in chars])


def select_distinct(
    candidates: str = CANDIDATES,
    k: int = N_CLASSES,
    threshold: float = THRESHOLD,
    min_ink: float = MIN_INK,
    min_extent: float = MIN_EXTENT,
) -> tuple[str, ...]:
    """Greedy, in candidate order: keep a glyph if it is_legible and its distance to every
    glyph kept so far exceeds ``threshold``. Stops at k; raises if the pool runs out."""
    unique = dict.fromkeys(candidates)  # dedupe, keep order
    pool = "".join(ch for ch in unique if is_legible(ch, min_ink, min_extent))
    dist = distance_matrix(pool)
    kept: list[int] = []
    for i in range(len(pool)):
        if all(dist[i, j] > threshold for j in kept):
            kept.append(i)
            if len(kept) == k:
                return tuple(pool[i] for i in kept)
    raise ValueError(f"only {len(kept)} glyphs pass threshold {threshold}; need {k}")


def distinctness_report(masters: np.ndarray | None = None) -> tuple[float, tuple[int, int]]:
    """The minimum pairwise distance between the 120 normalised glyph masters and the pair
    (i < j, indices into GLYPHS / masters) that attains it.

    ``masters=None`` normalises GLYPHS straight from the font (exactly the metric of
    select_distinct); an (n, s, s) array (e.g. render_masters()) is normalised the same
    way from its bitmaps: crop to ink, fixed box, blur, rotations, shifts.
    """
    if masters is None:
        dist = distance_matrix(GLYPHS)
    else:
        dist = _distances([_crop_to_ink(np.asarray(m, np.float32)) for m in masters])
    iu = np.triu_indices(dist.shape[0], k=1)
    best = int(np.argmin(dist[iu]))
    i, j = int(iu[0][best]), int(iu[1][best])
    return float(dist[i, j]), (i, j)


# ---------------------------------------------------------------------------
# Rendering


@functools.lru_cache(maxsize=8)
def render_masters(size: int = 64) -> np.ndarray:
    """float32 array (120, size, size) in [0,1], each glyph centred, ink=1, background=0.

    Each glyph's ink bounding box is centred and its longer side is MASTER_FILL*size.
    Cached in-process; the returned array is read-only so the cache cannot be corrupted.
    """
    masters = np.stack([_place(_glyph_crop(ch), size, MASTER_FILL) for ch in GLYPHS])
    masters = np.clip(masters, 0.0, 1.0)
    masters.flags.writeable = False
    return masters


@functools.lru_cache(maxsize=8)
def _sampling_masters(image_size: int) -> tuple[np.ndarray, int]:
    """Masters at 2x the output size, pre-blurred 1 px: the samples shrink them by 1.3-2.7x,
    so this blur stops order-1 interpolation aliasing without a per-sample filter."""
    size = 2 * image_size
    masters = np.array(render_masters(size))  # writable copy
    for m in masters:
        ndimage.gaussian_filter(m, 1.0, output=m)
    masters.flags.writeable = False
    return masters, size


def _augment(master: np.ndarray, master_size: int, image_size: int, rng: np.random.Generator) -> np.ndarray:
    """One augmented float image in [0,1] of a master, all randomness drawn from ``rng``."""
    scale = rng.uniform(*SCALE_RANGE)
    angle = rng.uniform(-MAX_ROTATION, MAX_ROTATION)
    # Offset: anywhere that keeps the (unrotated) box inside, plus a little slack.
    room = (1.0 - scale) / 2.0 + EXTRA_SHIFT
    shift = rng.uniform(-room, room, size=2) * image_size
    zoom = scale * image_size / (MASTER_FILL * master_size)
    glyph = _warp(master, image_size, zoom, angle, (float(shift[0]), float(shift[1])))
    glyph = ndimage.gaussian_filter(glyph, rng.uniform(*BLUR_RANGE))
    # Gamma on the soft edges changes the apparent stroke thickness cheaply.
    glyph = np.clip(glyph, 0.0, 1.0) ** rng.uniform(*GAMMA_RANGE)
    background, ink = rng.uniform(*BACKGROUND_RANGE), rng.uniform(*INK_RANGE)
    image = background + (ink - background) * glyph
    image = image + rng.normal(0.0, rng.uniform(*NOISE_RANGE), size=image.shape)
    return np.clip(image, 0.0, 1.0)


def render_samples(labels: np.ndarray, image_size: int, seed: int) -> np.ndarray:
    """For each int label in ``labels`` (values 0..119), one randomly augmented image of that glyph.

    Returns uint8 (len(labels), image_size, image_size), ink bright on dark background.
    Sample i draws all its randomness from np.random.default_rng([seed, i]), so it depends
    only on (seed, i, labels[i], image_size): identical bytes on every call, and a prefix
    of a batch renders the same as the whole batch.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= len(GLYPHS)):
        raise ValueError(f"labels must be in 0..{len(GLYPHS) - 1}")
    masters, master_size = _sampling_masters(image_size)
    out = np.empty((labels.size, image_size, image_size), np.uint8)
    for i, label in enumerate(labels.tolist()):
        rng = np.random.default_rng([seed, i])
        image = _augment(masters[label], master_size, image_size, rng)
        out[i] = np.rint(image * 255.0).astype(np.uint8)
    return out
