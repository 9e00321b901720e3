"""The default dataset ``glyphs120``: 120 visually distinct glyphs, randomly augmented.

Glyphs are rendered from the DejaVu Sans font that ships inside matplotlib (via
matplotlib's FreeType wrapper, FT2Font), so nothing is downloaded. This module uses
numpy, scipy and matplotlib only (no TensorFlow).

How the 120 glyphs were chosen (``select_distinct``, re-run by tests/test_glyphs.py):

* Pool: ``CANDIDATES``, 520 characters in order of preference (digits, Latin,
  punctuation, currency, math, arrows, geometric shapes, dingbats, Greek, Cyrillic),
  including the usual look-alikes (A/Α/А, o/O/0/ο/о, l/I/1/|, ...) on purpose.
* Legibility: the font must map the character (not .notdef); its ink box must be at
  least MIN_EXTENT = 0.45 em (rejects . , ' ` - " whose identity is size and baseline
  position, which the scale/offset augmentation erases); and once normalised it must
  have mean ink >= MIN_INK = 0.08 (rejects thin strokes: l I | / ( ) [ ] ! i j _ ...).
* Normalisation: crop to the ink box, scale the longer side to 20 px inside a 24x24
  canvas (aspect kept), blur 1 px. Case pairs that differ only in size (o/O, s/S,
  x/X, v/V, w/W, z/Z, c/C) become the same image, as they do after random scaling,
  and the blur makes stroke width matter less.
* Distance: 1 - max normalised cross-correlation (zero-mean, unit-norm) over rotations
  of -20..20 deg in 5 deg steps and shifts of -1..1 px, symmetrised (max of both
  directions). Rotations match the +-18 deg augmentation; 90/180 deg rotations and
  mirror images (arrows, b/q, <, >) stay distinct.
* Greedy: walk the pool in order and keep a glyph if its distance to every glyph kept
  so far exceeds THRESHOLD = 0.25, the largest round threshold that still leaves at
  least 120 glyphs (123 pass; 0.28 leaves under 100). For scale, u/U are at 0.07, p/P 0.12,
  5/S 0.11, 8/B 0.10, 2/Z 0.18, l/1 0.18, M/W 0.64 in this metric.
* The result is committed below as the literal ``GLYPHS``; the runtime never re-selects.

Result: min pairwise distance 0.2513, between '∞' and '♔' (distinctness_report()).
The metric is sensitive to sub-pixel phase on thin strokes: normalising from the
64-px render_masters() bitmaps instead of the font gives a min of 0.215 ('~' vs '⊣'),
and 0.225 from 128-px masters.

Samples (``render_samples``): per image, scale (longer side 0.6-0.95 of the image),
rotation +-25 deg, offset anywhere that keeps the box inside plus 6% slack, a dimmer
fragment of another glyph pushed 30-60% of the image off-centre (clutter), blur
sigma 0-0.7 px, stroke gamma 0.5-2 (thicker/thinner), background 0-0.25, ink
0.65-1.0, additive Gaussian noise sigma 0.08-0.24; resampled bilinearly from a
pre-blurred 2x master. Measured with time.perf_counter on one CPU core: 12,000 samples
at 32x32 take about 1.8 s (plus ~0.2 s once per process for the masters).

Difficulty, measured: the default 72k-parameter CNN (sweep.model) at batch size 8,
100 samples per class, reaches val_acc 0.37 after one epoch and 0.75 after two
(without clutter and with milder noise and rotation it was 0.94 after two: too easy
for the post's "60% at epoch 2"). Template matching is far below that (see the test).
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
    '>', '~', '^', '©', '™', '₦', '₴', '±', '≡', '≤',  # 30-39
    '≥', '∞', '∅', '∈', '∋', '⊂', '⊃', '⊆', '⊇', '⊕',  # 40-49
    '⊞', '⊠', '⊢', '⊣', '⊤', '∴', '∵', '∡', '∝', '≪',  # 50-59
    '≫', '⌂', '⌘', '↖', '↗', '↘', '↙', '↪', '↰', '↱',  # 60-69
    '↲', '↳', '↺', '↻', '⇄', '⇅', '⇆', '■', '□', '▷',  # 70-79
    '◁', '◇', '◐', '◑', '◒', '◓', '◬', '◮', '☆', '☘',  # 80-89
    '☢', '♂', '♔', '♖', '♧', '♨', '♫', '♬', '⚅', '⚓',  # 90-99
    '⚖', '⚘', '⚡', '✁', '✉', '✎', '❊', 'Λ', 'Ψ', 'ζ',  # 100-109
    'π', 'ω', 'Й', 'Л', 'Ъ', 'Ы', 'Ю', 'п', 'ц', 'Ђ',  # 110-119
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

# Backstop for classic confusions the NCC metric scores as distinct: thin-stroked x
# (0.28 from X) and DejaVu's narrow 0 (0.39 from O). select_distinct keeps at most
# one member of each group, on top of the distance threshold.
CONFUSABLES: tuple[str, ...] = ("Xx×Хх", "0OoΟОοо")

# Selection criterion (see select_distinct); the numbers below are the committed choice.
THRESHOLD: float = 0.25  # largest round value that still leaves >= 120 glyphs (123 pass)
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
MAX_ROTATION: float = 25.0  # degrees, uniform in +-MAX_ROTATION
EXTRA_SHIFT: float = 0.06  # offset slack beyond "stays inside", fraction of image side
BLUR_RANGE: tuple[float, float] = (0.0, 0.7)  # px at the output size
GAMMA_RANGE: tuple[float, float] = (0.5, 2.0)  # <1 thickens strokes, >1 thins them
BACKGROUND_RANGE: tuple[float, float] = (0.0, 0.25)
INK_RANGE: tuple[float, float] = (0.65, 1.0)
NOISE_RANGE: tuple[float, float] = (0.08, 0.24)  # Gaussian noise sigma, fraction of 255
# Clutter: a dimmer fragment of another glyph, pushed towards an edge, in every image.
# Without it a 70k-parameter CNN reached 94% val_acc after two epochs at batch 8;
# the post's setting needs a task that is far from solved after two epochs.
CLUTTER_SHIFT: tuple[float, float] = (0.3, 0.6)  # distractor offset per axis, fraction of image side
CLUTTER_INK: tuple[float, float] = (0.5, 0.9)  # distractor brightness relative to the glyph's


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
    source, zoom = _antialiased(crop, size, fill)
    return _warp(source, size, zoom, angle, (0.0, 0.0))


def _antialiased(crop: np.ndarray, size: int, fill: float) -> tuple[np.ndarray, float]:
    """The crop blurred for shrinking to fill*size, and the zoom (output px per crop px)."""
    zoom = fill * size / max(crop.shape)
    if zoom < 1.0:
        crop = ndimage.gaussian_filter(crop, 0.45 / zoom)
    return crop, zoom


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
    shifts = [(dy, dx) for dy in range(-METRIC_SHIFT, METRIC_SHIFT + 1)
              for dx in range(-METRIC_SHIFT, METRIC_SHIFT + 1)]
    base, variants = [], []
    for crop in crops:
        source, zoom = _antialiased(crop, METRIC_SIZE, METRIC_FILL)  # blur once, not per angle
        rotated = np.stack([_warp(source, METRIC_SIZE, zoom, a, (0.0, 0.0)) for a in METRIC_ANGLES])
        rotated = ndimage.gaussian_filter(rotated, (0, METRIC_BLUR, METRIC_BLUR))
        base.append(rotated[METRIC_ANGLES.index(0.0)])
        # (angles * shifts, size, size); the 2 px margin keeps np.roll from wrapping ink.
        variants.append(np.concatenate([np.roll(rotated, s, axis=(1, 2)) for s in shifts]))
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
    confusables: tuple[str, ...] = CONFUSABLES,
) -> tuple[str, ...]:
    """Greedy, in candidate order: keep a glyph if it is_legible, its distance to every
    glyph kept so far exceeds ``threshold``, and no kept glyph shares a ``confusables``
    group with it. Stops at k; raises if the pool runs out."""
    unique = dict.fromkeys(candidates)  # dedupe, keep order
    pool = "".join(ch for ch in unique if is_legible(ch, min_ink, min_extent))
    dist = distance_matrix(pool)
    kept: list[int] = []
    group_of = {ch: n for n, group in enumerate(confusables) for ch in group}
    for i in range(len(pool)):
        same_group = any(group_of.get(pool[j], -1) == group_of.get(pool[i], -2) for j in kept)
        if not same_group and all(dist[i, j] > threshold for j in kept):
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


def _draw_params(n: int, seed: int) -> np.ndarray:
    """(n, 9) uniforms in [0,1): row i holds sample i's augmentation parameters.

    Generated row by row from one stream, so row i is the same whatever n > i is.
    """
    return np.random.default_rng([seed, 0]).random((n, 9))


def _between(u: np.ndarray, bounds: tuple[float, float]) -> np.ndarray:
    return bounds[0] + (bounds[1] - bounds[0]) * u


def _warp_batch(
    masters: np.ndarray, labels: np.ndarray, u: np.ndarray, image_size: int
) -> np.ndarray:
    """Bilinear similarity warp (random scale, rotation, offset) of each label's master.

    One vectorised gather for the whole chunk: scipy's affine_transform per sample would
    cost more in call overhead than in arithmetic at 32x32.
    """
    size = masters.shape[-1]
    scale = _between(u[:, 0], SCALE_RANGE)
    theta = np.deg2rad(_between(u[:, 1], (-MAX_ROTATION, MAX_ROTATION)))
    room = (1.0 - scale) / 2.0 + EXTRA_SHIFT  # box stays inside, plus a little slack
    shift = (2.0 * u[:, 2:4] - 1.0) * room[:, None] * image_size
    inv_zoom = MASTER_FILL * size / (scale * image_size)  # master pixels per output pixel
    # Output pixel coordinates relative to the (shifted) glyph centre.
    grid = np.arange(image_size, dtype=np.float64) - (image_size - 1) / 2.0
    gy = grid[None, :, None] - shift[:, 0, None, None]
    gx = grid[None, None, :] - shift[:, 1, None, None]
    cos = (np.cos(theta) * inv_zoom)[:, None, None]
    sin = (np.sin(theta) * inv_zoom)[:, None, None]
    centre = (size - 1) / 2.0 + 1.0  # +1: the masters are padded by one zero pixel
    y = np.clip(cos * gy - sin * gx + centre, 0.0, size + 0.999)
    x = np.clip(sin * gy + cos * gx + centre, 0.0, size + 0.999)
    y0, x0 = np.floor(y).astype(np.intp), np.floor(x).astype(np.intp)
    wy, wx = (y - y0).astype(np.float32), (x - x0).astype(np.float32)
    padded = np.pad(masters, ((0, 0), (1, 1), (1, 1)))
    flat = padded.reshape(-1)
    base = labels.astype(np.intp)[:, None, None] * (size + 2) ** 2 + y0 * (size + 2) + x0
    top = flat[base] * (1 - wx) + flat[base + 1] * wx
    bottom = flat[base + size + 2] * (1 - wx) + flat[base + size + 3] * wx
    return top * (1 - wy) + bottom * wy


def _blur_batch(images: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Separable Gaussian blur with a different sigma (<= ~0.8 px) per image; 5 taps."""
    taps = np.arange(-2, 3, dtype=np.float32)
    weights = np.exp(-(taps[None, :] ** 2) / (2.0 * np.maximum(sigma, 1e-3)[:, None] ** 2))
    weights = (weights / weights.sum(axis=1, keepdims=True)).astype(np.float32)
    s = images.shape[-1]
    padded = np.pad(images, ((0, 0), (2, 2), (0, 0)))
    images = sum(weights[:, k, None, None] * padded[:, k : k + s, :] for k in range(5))
    padded = np.pad(images, ((0, 0), (0, 0), (2, 2)))
    return sum(weights[:, k, None, None] * padded[:, :, k : k + s] for k in range(5))


def _photometric(glyph: np.ndarray, u: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Stroke thickness (gamma on the soft edges), contrast, additive Gaussian noise."""
    gamma = np.exp(_between(u[:, 5], (np.log(GAMMA_RANGE[0]), np.log(GAMMA_RANGE[1]))))
    glyph = np.clip(glyph, 0.0, 1.0) ** gamma[:, None, None].astype(np.float32)
    background = _between(u[:, 6], BACKGROUND_RANGE)[:, None, None]
    ink = _between(u[:, 7], INK_RANGE)[:, None, None]
    sigma = _between(u[:, 8], NOISE_RANGE)[:, None, None]
    image = background + (ink - background) * glyph + sigma * noise
    return np.clip(image, 0.0, 1.0)


def _clutter(masters: np.ndarray, labels: np.ndarray, u: np.ndarray, image_size: int) -> np.ndarray:
    """A dimmed, randomly warped other glyph, shifted so that only part of it is in frame."""
    others = (labels + 1 + (u[:, 0] * (len(GLYPHS) - 1)).astype(np.intp)) % len(GLYPHS)
    fragment = _warp_batch(masters, others, u[:, 1:], image_size)
    sign = np.where(u[:, 5:7] < 0.5, -1, 1)
    shift = np.rint(sign * _between(u[:, 7:9], CLUTTER_SHIFT) * image_size).astype(np.intp)
    out = np.zeros_like(fragment)
    for i, (dy, dx) in enumerate(shift):
        src = fragment[i, max(0, -dy): image_size - max(0, dy), max(0, -dx): image_size - max(0, dx)]
        out[i, max(0, dy): max(0, dy) + src.shape[0], max(0, dx): max(0, dx) + src.shape[1]] = src
    return out * _between(u[:, 4], CLUTTER_INK)[:, None, None].astype(np.float32)


def render_samples(labels: np.ndarray, image_size: int, seed: int) -> np.ndarray:
    """For each int label in ``labels`` (values 0..119), one randomly augmented image of that glyph.

    Returns uint8 (len(labels), image_size, image_size), ink bright on dark background.
    Randomness: sample i uses row i of np.random.default_rng([seed, 0]).random((n, 9))
    for its geometry/photometry, block i of default_rng([seed, 1]).standard_normal for
    its noise, and row i of default_rng([seed, 2]).random((n, 9)) for its clutter. Both streams are consumed in order, so output is byte-identical for the
    same (labels, image_size, seed), and sample i does not depend on later labels:
    render_samples(labels[:m], ...) == render_samples(labels, ...)[:m].
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= len(GLYPHS)):
        raise ValueError(f"labels must be in 0..{len(GLYPHS) - 1}")
    masters, _ = _sampling_masters(image_size)
    n = labels.size
    params = _draw_params(n, seed)
    noise_rng = np.random.default_rng([seed, 1])
    clutter = np.random.default_rng([seed, 2]).random((n, 9))
    out = np.empty((n, image_size, image_size), np.uint8)
    chunk = 2048  # bounds the memory of the vectorised gather
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        u = params[start:stop]
        glyph = _warp_batch(masters, labels[start:stop], u, image_size)
        glyph = np.maximum(glyph, _clutter(masters, labels[start:stop], clutter[start:stop], image_size))
        glyph = _blur_batch(glyph, _between(u[:, 4], BLUR_RANGE).astype(np.float32))
        noise = noise_rng.standard_normal((stop - start, image_size, image_size), np.float32)
        out[start:stop] = np.rint(_photometric(glyph, u, noise) * 255.0).astype(np.uint8)
    return out
