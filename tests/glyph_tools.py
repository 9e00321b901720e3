"""How the 120 glyphs of glyphs120 were chosen: the selection tooling, used only by tests/test_glyphs.py.

The runtime never re-selects: ``sweep.train.glyphs.GLYPHS`` is this module's ``select_distinct()`` output,
committed as a literal, and test_glyphs.py checks that it still is. The criterion:

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
* The result is committed as the literal ``sweep.train.glyphs.GLYPHS``; the runtime never re-selects.

Result: min pairwise distance 0.2513, between '∞' and '♔' (distinctness_report()).
The metric is sensitive to sub-pixel phase on thin strokes: normalising from the
64-px render_masters() bitmaps instead of the font gives a min of 0.215 ('~' vs '⊣'),
and 0.225 from 128-px masters.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from sweep.train import glyphs
from sweep.train.glyphs import GLYPHS, N_CLASSES, antialiased, crop_to_ink, glyph_crop, place, warp

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


def has_glyph(ch: str) -> bool:
    """True if DejaVu Sans itself maps ``ch`` (index 0 is .notdef, the tofu box)."""
    return glyphs.font().get_char_index(ord(ch)) != 0


def ink_fraction(ch: str) -> float:
    """Mean ink of the glyph normalised to the metric box: low for thin marks like . ' - | _"""
    return float(place(glyph_crop(ch), METRIC_SIZE, METRIC_FILL).mean())


def extent(ch: str) -> float:
    """Longer side of the glyph's ink box as a fraction of the em (font size)."""
    return max(glyph_crop(ch).shape) / glyphs.EM_PX


def is_legible(ch: str, min_ink: float = MIN_INK, min_extent: float = MIN_EXTENT) -> bool:
    """Present in DejaVu Sans, big enough on the em, and enough ink once normalised."""
    return has_glyph(ch) and extent(ch) >= min_extent and ink_fraction(ch) >= min_ink


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Zero-mean, unit-norm rows, so dot products are normalised cross-correlations."""
    x = x.reshape(x.shape[0], -1).astype(np.float64)
    x = x - x.mean(axis=1, keepdims=True)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _normalised_variants(crops: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per glyph crop: the upright normalised image, and all its rotated+shifted variants.

    Returns (base (n, d), variants (n, v, d)), rows zero-mean and unit-norm.
    """
    shifts = [
        (dy, dx) for dy in range(-METRIC_SHIFT, METRIC_SHIFT + 1) for dx in range(-METRIC_SHIFT, METRIC_SHIFT + 1)
    ]
    base, variants = [], []
    for crop in crops:
        source, zoom = antialiased(crop, METRIC_SIZE, METRIC_FILL)  # blur once, not per angle
        rotated = np.stack([warp(source, METRIC_SIZE, zoom, a, (0.0, 0.0)) for a in METRIC_ANGLES])
        rotated = ndimage.gaussian_filter(rotated, (0, METRIC_BLUR, METRIC_BLUR))
        base.append(rotated[METRIC_ANGLES.index(0.0)])
        # (angles * shifts, size, size); the 2 px margin keeps np.roll from wrapping ink.
        variants.append(np.concatenate([np.roll(rotated, s, axis=(1, 2)) for s in shifts]))
    n, v = len(crops), len(variants[0])
    base_rows = unit_rows(np.stack(base))
    variant_rows = unit_rows(np.stack(variants).reshape(n * v, -1))
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
    return _distances([glyph_crop(ch) for ch in chars])


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
    group with it. Stops at k; raises if the pool runs out.
    """
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
        dist = _distances([crop_to_ink(np.asarray(m, np.float32)) for m in masters])
    iu = np.triu_indices(dist.shape[0], k=1)
    best = int(np.argmin(dist[iu]))
    i, j = int(iu[0][best]), int(iu[1][best])
    return float(dist[i, j]), (i, j)
