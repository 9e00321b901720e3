"""Where a learning-rate search's best lr sits in the range it drew from, and the range a widening
reaches. No TensorFlow, no Optuna: the store widens a search with it and the report flags one with it.

A best lr that is the lowest (highest) lr tried and within EDGE_FACTOR of the low (high) end of the
range may have its optimum outside the range. The search then reaches WIDEN_FACTOR past that end
(`search.widen` times at most), so a range set too narrow is corrected by the sweep, not by the reader.
"""

from __future__ import annotations

from collections.abc import Iterable

EDGE_FACTOR = 1.5  # a best lr this close to an end of the range is "at the edge"
WIDEN_FACTOR = 10.0  # a widening reaches one decade past the edge the best lr sat at

LOW, HIGH = "low", "high"


def edge_side(best: float, drawn: Iterable[float], low: float, high: float) -> str:
    """LOW or HIGH when `best` is the lowest (highest) of the `drawn` lrs and near that end of
    [low, high]; "" when it is inside the range.
    """
    lrs = list(drawn)
    if not lrs:
        return ""
    if best <= min(lrs) and best <= low * EDGE_FACTOR:
        return LOW
    if best >= max(lrs) and best >= high / EDGE_FACTOR:
        return HIGH
    return ""


def widened(low: float, high: float, side: str) -> tuple[float, float]:
    """The range reaching WIDEN_FACTOR past its `side` end (the other end kept)."""
    return (low / WIDEN_FACTOR, high) if side == LOW else (low, high * WIDEN_FACTOR)


def extra_trials(trials: int) -> int:
    """Trials a widening adds to a search of `trials`: half as many again, at least 2 (one alone would
    rarely land past the old edge).
    """
    return max(2, trials // 2)
