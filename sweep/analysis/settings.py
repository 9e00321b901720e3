"""The settings of a table of runs: which columns are settings (`setting_columns`), which of them vary, one
key per row from some of them; and where each grid key stands for the claims, from its declaration
(sweep/config/keys.py). pandas only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from sweep import vocab
from sweep.config import declared

SETTING_PREFIXES = ("data.", "model.", "train.")
BATCH_SIZE, GPUS = "train.batch_size", "train.gpus"

# Where a grid key stands for the claims comes from its declaration (sweep/config/keys.py):
# - POST_DEFAULTS: the post's setting of the toggles; where several groups of runs could
#   answer a question, rows at these values are used (except for the setting compared);
# - CONTROL_DEFAULTS: the control axes (docs/internals.md, "Controls") at their defaults; claims
#   read the runs at these values, and an empty cell (results written before a key existed)
#   means the default;
# - CONTROL_COMPANIONS: settings that only accompany a control, or add records, not updates;
# - TOGGLES: the post's suspected causes, in the order of the toggles figure's panels.
POST_DEFAULTS: dict[str, Any] = declared.post_defaults()
CONTROL_DEFAULTS: dict[str, Any] = declared.control_defaults()
CONTROL_COMPANIONS: tuple[str, ...] = declared.control_companions()
TOGGLES: tuple[str, ...] = declared.toggles()
TOGGLE_REFERENCE: dict[str, Any] = {**POST_DEFAULTS}  # samples_per_class: the largest present


def setting_columns(table: pd.DataFrame) -> list[str]:
    """The dotted setting columns (data.*, model.*, train.*), in table order, and the backend where the
    table has it: runs on different backends are never grouped or paired (sweep/train/backends.py).
    """
    return [c for c in table.columns if c.startswith(SETTING_PREFIXES) or c == vocab.BACKEND]


def varying(table: pd.DataFrame, exclude: Iterable[str] = ()) -> list[str]:
    """Setting columns that take more than one value in the table."""
    skip = set(exclude)
    return [c for c in setting_columns(table) if c not in skip and table[c].nunique(dropna=False) > 1]


def row_key(table: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """One string per row from the given columns; NaN-safe, for grouping and pairing."""
    if not columns or table.empty:  # agg over no rows returns a frame, not a series
        return pd.Series("", index=table.index, dtype=object)
    # Python strings of the cells, joined per row: str() of each cell is what Series.map(str) gives, and
    # joining lists is ~50x faster than concatenating string Series column by column on a 100-run sweep.
    cells = [map(str, table[name].tolist()) for name in columns]
    return pd.Series(["|".join(row) for row in zip(*cells, strict=True)], index=table.index, dtype="str")
