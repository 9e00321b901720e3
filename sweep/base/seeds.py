"""Named sub-seeds: every random stream of a run (weights, data order, splits, glyphs, search trials,
the noise-scale batches) is drawn from its own seed, derived from the run's seed and the stream's name.
"""

from __future__ import annotations

import hashlib
from typing import Any


def derive_seed(seed: int, *names: Any) -> int:
    """A sub-seed for one purpose, derived by name: derive_seed(s, "data-order", epoch).

    Named sub-seeds keep streams independent (changing how many numbers the
    initialiser draws cannot change the data order) and reproducible.
    """
    text = ":".join([str(seed), *map(str, names)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
