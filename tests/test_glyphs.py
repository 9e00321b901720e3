"""Tests for sweep.train.glyphs: the glyph choice is distinct and reproducible (re-run with the selection
tooling of tests/glyph_tools.py), samples are sane.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import glyph_tools
import numpy as np
import pytest
from glyph_tools import distinctness_report, unit_rows

from sweep.train import glyphs
from sweep.train.glyphs import GLYPHS, render_masters, render_samples

# Characters that look the same, or become the same under random scale/rotation/offset.
LOOKALIKE_GROUPS: list[set[str]] = [
    {"A", "Α", "А"},
    {"O", "o", "0", "Ο", "О", "ο", "о"},
    {"l", "I", "1", "|", "ı", "Ι", "І"},
    {"x", "X", "х", "Х", "×"},  # × needs the CONFUSABLES backstop
    {"P", "Р", "Ρ"},
    {"c", "C", "с", "С"},
    {"B", "В", "Β"},
    {"H", "Н", "Η"},
    {"p", "р", "ρ"},
    {"y", "у"},
    {"e", "е"},
    {"K", "К", "Κ"},
    {"M", "М", "Μ"},
    {"T", "Т", "Τ"},
    {"s", "S", "ѕ", "Ѕ"},
    {"v", "V", "ν"},
    {"w", "W"},
    {"z", "Z"},
    {"u", "U"},
    {"E", "Е", "Ε"},
    {"j", "J", "ј", "Ј"},
    {"n", "п", "П", "Π"},
    {"κ", "к"},
]


@pytest.mark.unit
def test_exactly_120_unique_single_characters() -> None:
    assert isinstance(GLYPHS, tuple)
    assert len(GLYPHS) == 120 == glyphs.N_CLASSES
    assert len(set(GLYPHS)) == 120
    assert all(isinstance(ch, str) and len(ch) == 1 for ch in GLYPHS)


@pytest.mark.unit
def test_every_glyph_is_in_dejavu_sans_and_legible() -> None:
    for ch in GLYPHS:
        assert glyph_tools.has_glyph(ch), ch
        assert glyph_tools.extent(ch) >= glyph_tools.MIN_EXTENT, ch
        assert glyph_tools.ink_fraction(ch) >= glyph_tools.MIN_INK, ch
    masters = render_masters()
    ink = masters.reshape(120, -1).max(axis=1)
    assert ink.min() > 0.9  # every master actually has ink (no tofu, no blank)


@pytest.mark.unit
def test_font_lacks_some_characters_and_they_are_detected() -> None:
    assert not glyph_tools.has_glyph("\u0378")  # unassigned code point -> .notdef
    assert glyph_tools.has_glyph("A")


@pytest.mark.unit
@pytest.mark.parametrize("group", LOOKALIKE_GROUPS, ids=lambda g: "".join(sorted(g)))
def test_lookalike_groups_contribute_at_most_one(group: set[str]) -> None:
    chosen = group & set(GLYPHS)
    assert len(chosen) <= 1, chosen


@pytest.mark.unit
def test_lookalikes_were_candidates_so_the_selection_rejected_them() -> None:
    # The groups are only evidence if the pool offered them and the selection refused.
    offered = [g for g in LOOKALIKE_GROUPS if len(g & set(glyph_tools.CANDIDATES)) >= 2]
    assert len(offered) >= 15


@pytest.mark.unit
def test_small_and_thin_marks_are_rejected() -> None:
    for ch in ".,'`-_|lI!":
        assert not glyph_tools.is_legible(ch), ch


@pytest.mark.unit
def test_metric_sees_case_pairs_as_close_and_different_shapes_as_far() -> None:
    dist = glyph_tools.distance_matrix("oOsSuUxX+×")
    for i in range(0, 8, 2):  # o/O, s/S, u/U, x/X collapse once size is normalised
        assert dist[i, i + 1] < 0.1
    assert dist[8, 9] > 0.5  # + and x are 45 deg apart: beyond the +-20 deg search
    assert np.allclose(dist, dist.T)


@pytest.mark.unit
def test_distinctness_report_exceeds_threshold() -> None:
    dmin, (i, j) = distinctness_report()
    assert dmin > glyph_tools.THRESHOLD == 0.25
    assert dmin == pytest.approx(0.2513, abs=1e-3)
    assert 0 <= i < j < 120
    assert {GLYPHS[i], GLYPHS[j]} == {"∞", "♔"}


@pytest.mark.unit
def test_distinctness_report_from_master_bitmaps_is_close() -> None:
    # Re-normalising 64-px bitmaps shifts sub-pixel phase; documented as ~0.215.
    dmin, (i, j) = distinctness_report(render_masters(64))
    assert 0.2 < dmin < 0.3
    assert 0 <= i < j < 120


@pytest.mark.unit
def test_select_distinct_reproduces_glyphs() -> None:
    assert glyph_tools.select_distinct() == GLYPHS


@pytest.mark.unit
def test_select_distinct_raises_when_pool_too_small() -> None:
    with pytest.raises(ValueError):
        glyph_tools.select_distinct(candidates="ABCDEFG", k=10)


@pytest.mark.unit
def test_render_masters_shape_range_and_centring() -> None:
    masters = render_masters(64)
    assert masters.shape == (120, 64, 64) and masters.dtype == np.float32
    assert masters.min() >= 0.0 and masters.max() <= 1.0
    assert masters[:, 0, :].max() < 0.05 and masters[:, :, -1].max() < 0.05  # margins empty
    assert render_masters(64) is masters  # cached
    assert not masters.flags.writeable  # callers cannot corrupt the cache
    for m in masters[:10]:
        rows = np.flatnonzero(m.max(axis=1) > 0.5)
        cols = np.flatnonzero(m.max(axis=0) > 0.5)
        assert abs((rows[0] + rows[-1]) / 2 - 31.5) <= 1.5
        assert abs((cols[0] + cols[-1]) / 2 - 31.5) <= 1.5
        assert max(rows[-1] - rows[0], cols[-1] - cols[0]) + 1 == pytest.approx(51.2, abs=2)
    assert render_masters(32).shape == (120, 32, 32)


@pytest.mark.unit
def test_render_samples_shape_dtype_range() -> None:
    labels = np.arange(240) % 120
    x = render_samples(labels, 32, seed=0)
    assert x.shape == (240, 32, 32) and x.dtype == np.uint8
    assert x.min() == 0 and x.max() == 255
    # Ink is bright on a dark background: the centre is brighter than the border on average.
    border = np.concatenate([x[:, 0], x[:, -1], x[:, :, 0], x[:, :, -1]], axis=1)
    assert x.mean() < 100 and border.mean() < x[:, 8:24, 8:24].mean()
    assert render_samples(labels[:5], 48, seed=0).shape == (5, 48, 48)
    assert render_samples(np.array([], dtype=int), 32, seed=0).shape == (0, 32, 32)


@pytest.mark.unit
def test_render_samples_rejects_bad_labels() -> None:
    with pytest.raises(ValueError):
        render_samples(np.array([120]), 32, seed=0)
    with pytest.raises(ValueError):
        render_samples(np.array([-1]), 32, seed=0)


@pytest.mark.unit
def test_render_samples_is_deterministic_and_seed_dependent() -> None:
    labels = np.arange(500) % 120
    a = render_samples(labels, 32, seed=5)
    b = render_samples(labels, 32, seed=5)
    c = render_samples(labels, 32, seed=6)
    assert a.tobytes() == b.tobytes()
    assert (a != c).mean() > 0.5
    # Sample i does not depend on later labels (documented prefix property).
    assert np.array_equal(render_samples(labels[:37], 32, seed=5), a[:37])


@pytest.mark.unit
def test_samples_of_one_class_differ() -> None:
    x = render_samples(np.full(20, 7), 32, seed=1).astype(np.float64)
    diffs = [np.abs(x[i] - x[j]).mean() for i in range(20) for j in range(i + 1, 20)]
    assert min(diffs) > 5.0  # grey levels: augmentation really happens


@pytest.mark.unit
def test_template_matching_is_well_above_chance_but_not_trivial() -> None:
    # Nearest master by normalised cross-correlation, no alignment search: measured ~0.22.
    labels = np.arange(2400) % 120
    samples = render_samples(labels, 32, seed=7)
    pred = np.argmax(unit_rows(samples) @ unit_rows(render_masters(32)).T, axis=1)
    accuracy = float((pred == labels).mean())
    assert 0.15 < accuracy < 0.4  # chance is 1/120 = 0.008


@pytest.mark.system
def test_rendering_is_fast() -> None:
    render_samples(np.arange(10), 32, seed=0)  # build the cached masters
    start = time.perf_counter()
    render_samples(np.arange(12000) % 120, 32, seed=0)
    assert time.perf_counter() - start < 6.0  # 1.2-1.5 s measured; generous for slow CI


@pytest.mark.system
def test_module_does_not_import_tensorflow() -> None:
    """A fresh process (this one has TensorFlow loaded): importing the renderer loads no TensorFlow or Keras."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import sweep.train.glyphs"],
        cwd=Path(glyphs.__file__).parents[1],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in done.stderr.splitlines()}
    assert "sweep" in imported and not imported & {"tensorflow", "keras"}
