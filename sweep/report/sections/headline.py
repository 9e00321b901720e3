"""C1's headline in words: where the post's epoch-2 picture appears over a condition map, and why.

The post saw batch 64 far above and batch 8 close at epoch 2. Over the C1 map's settings
(`sweep.claims.headline.settings`) this module says where that picture shows (raw, as the post
read it), names the mechanism the attribution points to, BatchNorm's moving statistics (after n
optimizer steps at momentum m they still weigh their initial values by m^n, and batch 64 takes 8x
fewer steps per epoch than batch 8), and tests it: with the statistics recomputed for the same
weights (`*_recal`), does batch 64's gap close? What remains after recalibration is generalisation.
Every number is read from the map's cells; nothing is typed in.
"""

from __future__ import annotations

from collections.abc import Sequence

from sweep.analysis.estimates import fmt_estimate
from sweep.claims.findings import CLOSE_GAP, FAR_GAP, POST_GAP
from sweep.claims.headline import LARGE, SMALL, Setting, settings
from sweep.claims.maps import ConditionMap


def sentences(m: ConditionMap) -> list[str]:
    """The headline: where the picture shows, the mechanism's numbers there and elsewhere, and the test."""
    found = settings(m)
    if not found:
        return []
    shows = [s for s in found if s.shows]
    head = (
        f"Over the {len(found)} settings of {m.source} where both batch sizes learned, the post's picture at its "
        f"size (batch {LARGE}'s gap above {POST_GAP.value:g} while batch {SMALL}'s is within +-{CLOSE_GAP.value:g}, "
        f"each 95% interval wholly so, at epoch 2, read as the post read it) shows at {len(shows)}"
    )
    if not shows:
        return [head + ".", _mechanism(found)]
    return [f"{head}: {_labels(shows)}.", _mechanism(found), _test(shows)]


def _labels(chosen: Sequence[Setting]) -> str:
    return "; ".join(s.label for s in chosen)


def _span(values: Sequence[float], digits: int = 2) -> str:
    low, high = min(values), max(values)
    return f"{low:.{digits}f}" if f"{low:.{digits}f}" == f"{high:.{digits}f}" else f"{low:.{digits}f}-{high:.{digits}f}"


def _mechanism(found: Sequence[Setting]) -> str:
    """Batch 64's gap against the weight its moving statistics still give their initial values, raw and
    recalibrated: if BatchNorm's lag makes the picture, the raw gap follows the weight and the other does not.
    """
    by_weight: dict[str, list[Setting]] = {}
    for s in found:
        by_weight.setdefault("no BatchNorm" if s.weight is None else f"{s.weight:.2f}", []).append(s)
    order = sorted(by_weight, key=lambda w: (w == "no BatchNorm", float(w) if w != "no BatchNorm" else 0.0))

    def mean(chosen: list[Setting], pick: str) -> float:
        return sum(getattr(s, pick).mean for s in chosen) / len(chosen)

    raw = ", ".join(f"{mean(by_weight[w], 'gap'):.2f} {_weight_words(w)}" for w in order)
    recal = ", ".join(f"{mean(by_weight[w], 'recal_gap'):.2f}" for w in order)
    steps = _span([s.steps for s in found], 0)
    return (
        f"The mechanism: after batch {LARGE}'s {steps} optimizer steps by epoch 2, BatchNorm's moving statistics "
        f"still weigh their initial values by momentum^steps. Batch {LARGE}'s gap, averaged over the settings at "
        f"each weight, is {raw}; recalibrated (eval_gap_recal), {recal} in the same order."
    )


def _weight_words(weight: str) -> str:
    return "without BatchNorm" if weight == "no BatchNorm" else f"at weight {weight}"


def _test(shows: Sequence[Setting]) -> str:
    """Does recomputing BatchNorm's statistics for the same weights close batch 64's gap?"""
    closed = [s for s in shows if s.closes]
    listed = "; ".join(
        f"{s.label}: gap {fmt_estimate(s.gap)} raw, eval_gap_recal {fmt_estimate(s.recal_gap)} at batch {LARGE} "
        f"and {s.recal_gap_small.mean:.2f} at batch {SMALL}"
        for s in shows
    )
    verdict = (
        f"at all {len(shows)} the recalibrated gap's 95% interval lies below {FAR_GAP.value:g}: the picture is "
        "BatchNorm's lag, not a failure to generalise"
        if len(closed) == len(shows)
        else f"at {len(closed)} of {len(shows)} the recalibrated gap's 95% interval lies below {FAR_GAP.value:g}"
    )
    return (
        f"Recomputing BatchNorm's statistics for the same weights (recalibrated; what remains is generalisation), "
        f"{verdict} ({listed})."
    )
