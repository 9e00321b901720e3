"""C7 and C8: fit and generalisation across batch sizes, and the advice to keep batch_size <= 32, each read on
the group of runs `sweep.claims.checks.across_batch_sizes` chooses, at the last epoch, paired by seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from sweep import vocab
from sweep.analysis import BATCH_SIZE, column
from sweep.analysis.estimates import Check, Estimate, Key, estimate
from sweep.analysis.selection import Selection, fmt_value, matches, pair_keys, paired, paired_values, sorted_values
from sweep.analysis.tuning import SMALL_BATCH
from sweep.claims.checks import across_batch_sizes, estimate_at, finding_from
from sweep.claims.findings import Finding


def _means(rows: pd.DataFrame, axis: str, values: Sequence[Any], metric: str) -> dict[Any, float]:
    """`estimate_at(rows, axis, v, metric).mean` for each of `values`, the metric converted to an array once."""
    numbers = rows[metric].to_numpy(dtype=float)
    return {v: estimate(numbers[matches(rows[axis], v).to_numpy()]).mean for v in values}


@across_batch_sizes
def check_large_batch_trains_small_generalises(sel: Selection, small: Any, large: Any) -> Finding | None:

    keys = pair_keys(sel.rows, BATCH_SIZE)

    def diff(metric: str) -> Estimate:
        return paired(sel.rows, BATCH_SIZE, small, large, column(metric, "last"), keys)

    def label(metric: str) -> str:
        return f"{metric}, batch {fmt_value(large)} - batch {fmt_value(small)}, last epoch (paired)"

    def key(metric: str) -> Key:
        return Key(metric, ((BATCH_SIZE, f"{fmt_value(large)} - {fmt_value(small)}"), (vocab.EPOCH, "last")))

    def short(metric: str) -> str:
        return f"{metric}, batch {fmt_value(large)} - batch {fmt_value(small)}"

    checks = (
        Check(
            label(vocab.TRAIN_EVAL_ACC),
            diff(vocab.TRAIN_EVAL_ACC),
            low=0.0,
            key=key(vocab.TRAIN_EVAL_ACC),
            short=short(vocab.TRAIN_EVAL_ACC),
        ),
        Check(label(vocab.VAL_ACC), diff(vocab.VAL_ACC), high=0.0, key=key(vocab.VAL_ACC), short=short(vocab.VAL_ACC)),
    )
    evidence = (
        (label(vocab.TRAIN_ACC), diff(vocab.TRAIN_ACC)),
        (label(vocab.TRAIN_EVAL_LOSS), diff(vocab.TRAIN_EVAL_LOSS)),
        (f"optimizer steps, batch {fmt_value(large)} - batch {fmt_value(small)}", diff(vocab.STEP)),
    )
    notes = (
        "Training error is judged on train_eval_acc (the final model in inference mode). Equal epochs mean "
        "fewer optimizer steps at the larger batch, and the learning rate was not re-tuned per batch size.",
    )
    return finding_from(checks, sel, evidence, notes)


@across_batch_sizes
def check_small_batch_wins(sel: Selection, _smallest: Any, _largest: Any) -> Finding | None:
    """Best batch <= 32 vs best batch > 32, each chosen on the other seeds and compared on the held-out one.

    Choosing the best batch size on the seeds that then test it favours the winner; leaving one
    seed out per choice keeps every tested value out of the sample that chose it.
    """
    metric = column(vocab.VAL_ACC, "last")
    sizes = sorted_values(sel.rows[BATCH_SIZE])
    small, large = [bs for bs in sizes if bs <= SMALL_BATCH], [bs for bs in sizes if bs > SMALL_BATCH]
    seeds = sorted_values(sel.rows[vocab.SEED])
    if not small or not large or len(seeds) < 2:
        return None
    diffs = []
    picks = []
    sides = (small, large)
    keys, narrow = pair_keys(sel.rows, BATCH_SIZE), sel.rows[[BATCH_SIZE, metric]]  # once, not once per seed
    for seed in seeds:
        held = sel.rows[vocab.SEED] == seed
        on_rest = _means(narrow[~held], BATCH_SIZE, sizes, metric)
        best_small, best_large = (max(side, key=on_rest.__getitem__) for side in sides)
        diffs.extend(paired_values(narrow[held], BATCH_SIZE, best_large, best_small, metric, keys[held]))
        picks.append(f"seed {fmt_value(seed)}: {fmt_value(best_small)} vs {fmt_value(best_large)}")
    checks = (
        Check(
            f"val_acc, best batch <= {SMALL_BATCH} - best batch > {SMALL_BATCH}, each chosen on the other seeds, "
            "last epoch (paired, leave one seed out)",
            estimate(diffs),
            low=0.0,
            key=Key(
                vocab.VAL_ACC, ((BATCH_SIZE, f"best <= {SMALL_BATCH} - best > {SMALL_BATCH}"), (vocab.EPOCH, "last"))
            ),
            short=f"val_acc, best batch <= {SMALL_BATCH} - best batch > {SMALL_BATCH}",
        ),
    )
    means = {bs: estimate_at(sel.rows, BATCH_SIZE, bs, metric) for bs in sizes}
    in_sample = (max(small, key=lambda bs: means[bs].mean), max(large, key=lambda bs: means[bs].mean))
    evidence = tuple((f"val_acc at batch {fmt_value(bs)}, last epoch", e) for bs, e in means.items()) + (
        (
            f"chosen and tested on the same seeds ({fmt_value(in_sample[0])} - {fmt_value(in_sample[1])}; "
            "favours the winner)",
            paired(sel.rows, BATCH_SIZE, in_sample[1], in_sample[0], metric, keys),
        ),
    )
    notes = (
        f"Leave one seed out: for each seed, the best batch size on each side of {SMALL_BATCH} is chosen by its mean "
        "val_acc over the other seeds, and the two are compared on the held-out seed; the check is the t-test of "
        "these held-out differences (they share the seeds that chose them, so its p-value is approximate). "
        f"Chosen (<= {SMALL_BATCH} vs > {SMALL_BATCH}) per held-out seed: {'; '.join(picks)}.",
    )
    return finding_from(checks, sel, evidence, notes)
