"""Which runs answer a question about one setting, and how two of its values compare, paired by seed.

Reads the per-run tables of `sweep.analysis`; returns rows and `sweep.analysis.estimates.Estimate`s.

- Where several groups of runs could answer a question, `choose_context` picks one
  by a fixed rule (docs/report.md, "Which runs answer a claim").
- Settings that share a seed share initial weights and data order, so two values
  of a setting are compared by pairing runs with the same seed and the same other
  settings and taking the t-interval of the per-seed differences.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sweep import vocab
from sweep.analysis import (
    BACKEND_DEFAULT,
    CONTROL_DEFAULTS,
    POST_DEFAULTS,
    SOURCE_RANK,
    TOGGLE_REFERENCE,
    row_key,
    setting_columns,
)
from sweep.analysis.estimates import Estimate, estimate
from sweep.config import declared


@dataclass(frozen=True)
class Selection:
    """The rows that answer a question about one setting (axis), and why these."""

    axis: str
    rows: pd.DataFrame
    context: dict[str, Any]  # the fixed settings of the chosen group that differ between candidates
    candidates: int  # how many groups could have answered

    def tested_at(self) -> str:
        """The settings the group ran at, in a few words: the ones every reader needs (NAMED, the optimizer
        even where the rows lack its column: then the default) and every other one not at its default, with
        the seed count; "optimizer=adam, lr=0.001, batch_size=32, samples_per_class=50, ...; 3 seeds".
        """
        settings = [c for c in setting_columns(self.rows) if c != self.axis and c not in RECORDING_KEYS]
        columns = [c for c in NAMED if c in settings] + [c for c in settings if c not in NAMED]
        filled = with_defaults(self.rows, columns)
        named = [] if OPTIMIZER in settings else [f"optimizer={self.values_of(OPTIMIZER)}"]  # always named
        for c in columns:
            values = filled[c].dropna().unique()
            if len(values) == 1 and (c in NAMED or not _is_key_default(c, values[0])):
                named.append(f"{c.rsplit('.', 1)[-1]}={fmt_value(values[0])}")
        return f"{', '.join(named) or 'the defaults'}; {seed_count(self.rows[vocab.SEED].nunique())}"

    def values_of(self, key: str) -> str:
        """The distinct values of one setting in these rows (empty cells read as its default), "0.001, 0.01"."""
        if key not in self.rows:
            return fmt_value(declared.default(key))
        filled = with_defaults(self.rows, [key])[key]
        return ", ".join(fmt_value(v) for v in sorted_values(filled))

    def describe(self) -> str:
        fixed = ", ".join(f"{k}={fmt_value(v)}" for k, v in self.context.items() if not pd.isna(v))
        fixed = fixed or "the only candidate"
        seeds = seed_count(self.rows[vocab.SEED].nunique())
        values = ", ".join(fmt_value(v) for v in sorted_values(self.rows[self.axis]))
        chosen = f"chosen from {self.candidates} candidate groups: " if self.candidates > 1 else ""
        return f"{self.axis} in {{{values}}}, {seeds}; {chosen}{fixed}"


def seed_count(n: int) -> str:
    """ "1 seed", "3 seeds"."""
    return f"{n} seed{'' if n == 1 else 's'}"


OPTIMIZER, LR = "train.optimizer", "train.lr"
# Keys that change what is recorded, not how a run trains: they never set two groups of runs apart.
RECORDING_KEYS = ("train.eval_every_steps", "train.noise_scale", "train.recalibrate_bn")
# Settings a verdict always names where they are fixed: the post names none of them, and each can flip a claim.
NAMED = (OPTIMIZER, LR, "train.batch_size", "data.samples_per_class", "train.epochs")


@functools.lru_cache(maxsize=None, typed=True)  # typed: True and 1 are different cells; asked per column per check
def _is_key_default(key: str, value: Any) -> bool:
    if key == vocab.BACKEND:
        return bool(value == BACKEND_DEFAULT)
    try:
        default = declared.default(key)
    except KeyError:
        return False
    return default is not None and bool(matches(pd.Series([value]), default).iloc[0])


def sorted_values(series: pd.Series) -> list[Any]:
    """Distinct values in natural order (numbers numerically, False before True)."""
    values = series.dropna().unique().tolist()
    try:
        return sorted(values)
    except TypeError:  # mixed types
        return sorted(values, key=str)


def fmt_value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) and not math.isnan(value) else str(value)


def is_default(series: pd.Series, default: Any) -> pd.Series:
    """Rows at a control's default; an empty cell (a run from before the key existed, or null) counts as default."""
    return series.isna() | (matches(series, default) if default is not None else False)


def at_post(series: pd.Series, key: str) -> pd.Series:
    """Rows at the post's setting of a toggle; an empty cell of a key added later is its default
    (results written before the key existed ran at it), and counts when that is the post's setting.
    """
    post = POST_DEFAULTS[key]
    at = matches(series, post)
    if key in declared.added_later() and matches(pd.Series([declared.default(key)]), post).iloc[0]:
        at = at | series.isna()
    return at


def matches(series: pd.Series, value: Any) -> pd.Series:
    if isinstance(value, tuple):  # train.callbacks: runs.csv holds it as a JSON list
        return series.astype(str) == json.dumps(list(value))
    if isinstance(value, (bool, str)):
        return series.astype(str) == str(value)
    # numpy, not pandas arithmetic: this runs thousands of times per report, and pandas' per-call cost dominated
    numbers = series if series.dtype.kind in "iuf" else pd.to_numeric(series, errors="coerce")
    close = np.abs(numbers.to_numpy(dtype=float) - float(value)) < 1e-9
    return pd.Series(close, index=series.index, name=series.name)


def choose_context(table: pd.DataFrame, axis: str, values: Sequence[Any] = (), min_values: int = 2) -> Selection | None:
    """The one group of runs that compares `axis`, chosen by a fixed rule.

    1. Prefer runs whose other toggles are at the post's setting (POST_DEFAULTS)
       and whose controls are at their defaults (CONTROL_DEFAULTS); where no such
       group compares the axis, any group that does answers, and its settings say
       at which (a user's grid at BatchNorm momentum 0.999 still compares batch sizes).
    2. Group by every other setting; a group qualifies when it has all `values`
       of the axis (or at least `min_values` of them).
    3. Prefer the most axis values (only `values` count when given), then the most seeds, then the earliest
       results folder on the command line, then the first settings in sort order.
    """
    if table.empty or axis not in table:
        return None
    keep = pd.Series(True, index=table.index)  # one mask, one filter: each filter copies every column
    for key in POST_DEFAULTS:
        if key != axis and key in table:
            keep &= at_post(table[key], key)
    for key, value in CONTROL_DEFAULTS.items():
        if key != axis and key in table:
            keep &= is_default(table[key], value)
    for rows in (table[keep], table[~keep]):
        others = [c for c in setting_columns(rows) if c != axis]
        keyed = rows.assign(_ctx=settings_key(rows, others))
        groups = [g for _, g in keyed.groupby("_ctx", sort=True) if _qualifies(g, axis, values, min_values)]
        if groups:
            break
    else:
        return None

    def folder_rank(group: pd.DataFrame) -> int:
        return int(group[SOURCE_RANK].min()) if SOURCE_RANK in group else 0

    # With named values (C1: 8 and 64) every qualifying group has them all: the other
    # batch sizes a group also has do not make it a better answer, so they do not count.
    breadth = (lambda g: len(values)) if values else (lambda g: g[axis].nunique())
    best = min(groups, key=lambda g: (-breadth(g), -g[vocab.SEED].nunique(), folder_rank(g), g["_ctx"].iloc[0]))
    filled = with_defaults(keyed, others)
    differing = [c for c in others if filled[c].nunique(dropna=False) > 1]
    context = {c: _first_present(best[c]) for c in differing}
    return Selection(axis, best.drop(columns="_ctx").reset_index(drop=True), context, len(groups))


def settings_key(rows: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """`row_key` with empty cells read as defaults (`with_defaults`), as `is_default` reads them.

    The same run written before and after a key existed must group and pair with its own
    settings, whichever folder's copy of it was kept.
    """
    return row_key(with_defaults(rows[list(columns)], columns), columns)  # only the key's columns: no wide copy


def with_defaults(rows: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """`rows` with the empty cells of controls and of keys added after the first release filled with
    the key's default: results written before a key existed lack it, and their runs ran at its default.
    """
    implied = _implied_defaults()
    filled = {
        c: rows[c].fillna(_as_written(implied[c]))
        for c in columns
        if c in implied and implied[c] is not None and rows[c].isna().any()
    }
    return rows.assign(**filled) if filled else rows


@functools.cache  # with_defaults runs hundreds of times per report; the keys' defaults never change
def _implied_defaults() -> dict[str, Any]:
    return {
        **{k: declared.default(k) for k in declared.added_later()},
        **CONTROL_DEFAULTS,
        vocab.BACKEND: BACKEND_DEFAULT,
    }


def _as_written(default: Any) -> Any:
    """A default as runs.csv holds it: a tuple (train.callbacks) as its JSON list."""
    return json.dumps(list(default)) if isinstance(default, tuple) else default


def _first_present(values: pd.Series) -> Any:
    """A group's value of a setting: the first non-empty cell (empty cells of a control mean its default)."""
    present = values.dropna()
    return present.iloc[0] if len(present) else values.iloc[0]


def _qualifies(group: pd.DataFrame, axis: str, values: Sequence[Any], min_values: int) -> bool:
    if values:
        return all(matches(group[axis], v).any() for v in values)
    return group[axis].nunique(dropna=False) >= min_values


def toggle_values(rows: pd.DataFrame, toggle: str) -> list[Any]:
    """A toggle's values, reference first: the post's default, or the most samples per class."""
    values = sorted_values(rows[toggle])
    if toggle in TOGGLE_REFERENCE:
        reference = [v for v in values if matches(pd.Series([v]), TOGGLE_REFERENCE[toggle]).iloc[0]]
        return reference + [v for v in values if v not in reference]
    return values[::-1]


def where(rows: pd.DataFrame, axis: str, value: Any) -> pd.DataFrame:
    """Rows whose axis equals value (floats compared to 1e-9, bools and strings as text)."""
    return rows[matches(rows[axis], value)]


def pair_keys(rows: pd.DataFrame, axis: str) -> pd.Series:
    """Each row's pair key (`settings_key` of its seed and every setting but the axis), named "_pair".

    A check that compares several metrics on the same rows computes it once and passes it on:
    building keys is most of a paired comparison's cost.
    """
    others = [c for c in setting_columns(rows) if c != axis] + [vocab.SEED]
    return settings_key(rows, others).rename("_pair")


def _per_pair(rows: pd.DataFrame, axis: str, value: Any, metric: str, keys: pd.Series | None = None) -> pd.Series:
    """metric at `value` per pair key (`pair_keys`, of the same rows)."""
    keys = pair_keys(rows, axis) if keys is None else keys
    at = matches(rows[axis], value)  # the metric's column alone: filtering every column is most of the cost
    return rows.loc[at, metric].groupby(keys[at]).mean()


def paired_values(
    rows: pd.DataFrame, axis: str, reference: Any, value: Any, metric: str, keys: pd.Series | None = None
) -> pd.Series:
    """Per pair (same seed and other settings): metric at `value` minus metric at `reference`.

    `keys`: `pair_keys(rows, axis)`, when already computed.
    """
    keys = pair_keys(rows, axis) if keys is None else keys
    return (_per_pair(rows, axis, value, metric, keys) - _per_pair(rows, axis, reference, metric, keys)).dropna()


def paired(
    rows: pd.DataFrame, axis: str, reference: Any, value: Any, metric: str, keys: pd.Series | None = None
) -> Estimate:
    """Mean paired difference (value - reference) with its t-interval; n = number of pairs."""
    return estimate(paired_values(rows, axis, reference, value, metric, keys))


def paired_relative(rows: pd.DataFrame, axis: str, reference: Any, value: Any, metric: str) -> Estimate:
    """Mean paired relative change (value / reference - 1), e.g. -0.4 = 40% less."""
    keys = pair_keys(rows, axis)
    diff = paired_values(rows, axis, reference, value, metric, keys)
    return estimate(diff / _per_pair(rows, axis, reference, metric, keys).reindex(diff.index))
