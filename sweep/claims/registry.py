"""The post's claims C1-C9 as data: its words, the runs each needs, its thresholds and its check.

Each claim is one `Claim` in `CLAIMS`; its check function (`sweep.claims.checks`) reads a run
summary table and returns a `Finding` (`sweep.claims.findings`), or None when the runs cannot
answer it. docs/report.md explains every threshold to readers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pandas as pd

from sweep import vocab
from sweep.analysis import BATCH_SIZE, GPUS
from sweep.analysis.tuning import SMALL_BATCH
from sweep.claims import basis
from sweep.claims.checks import (
    check_capacity_overfits,
    check_cause_raises_gap,
    check_gap_at_two_batch_sizes,
    check_mismatch_lowers_val,
    check_replicas_learn_alike,
)
from sweep.claims.family import each_controlled
from sweep.claims.findings import (
    CAPACITY_MARGIN,
    CLOSE_GAP,
    FAR_GAP,
    LAG_MARGIN,
    POST_GAP,
    SAME_VAL,
    SPEEDUP,
    TIME_TARGET,
    VAL_DROP,
    Budget,
    Claim,
    Finding,
    Needs,
    Part,
    Reads,
    Threshold,
)
from sweep.claims.scaling_checks import check_large_batch_trains_small_generalises, check_small_batch_wins
from sweep.claims.speed_check import check_large_batch_faster

# The experiments files whose runs answer the claims (shipped in experiments/, named here so
# an installed package can name them without that folder).
ARTICLE_GRID, CAUSES_GRID = "experiments/article.yaml", "experiments/causes.yaml"
BATCH_SIZES_GRID, GPUS_GRID = "experiments/batch_sizes.yaml", "experiments/gpus.yaml"
CAPACITY_GRID, MAP_C1_DATA_GRID = "experiments/capacity.yaml", "experiments/map_c1_data.yaml"

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "C1",
        "at batch_size=64, epoch 2, train_acc 80% but val_acc 6%; at batch_size=8 both 60% and rising",
        "at epoch 2, gap = train_acc - val_acc larger at batch 64 than at batch 8 (paired by seed) decides; the "
        f"post's size (gap above {POST_GAP.value:g} at batch 64, within +-{CLOSE_GAP.value:g} at batch 8) and "
        f"BatchNorm's lag as the mechanism (the recalibrated eval_gaps within +-{LAG_MARGIN.value:g}) are statements "
        "of their own",
        Needs(ARTICLE_GRID, (BATCH_SIZE,), values=(8, 64), also=(MAP_C1_DATA_GRID,)),
        (POST_GAP, CLOSE_GAP, LAG_MARGIN),
        check_gap_at_two_batch_sizes,
        reads=Reads.SYMPTOM,
        brief="batch 64: train_acc far above val_acc at epoch 2; batch 8: both close",
        part=Part.PICTURE,
        steps_differ=True,
        read_at="epoch 2",
    ),
    Claim(
        "C2",
        "imbalanced training classes (95% of the images in one class; validation balanced) "
        "give high train_acc and low val_acc",
        "at epoch 2 the imbalanced runs' gap exceeds the balanced runs' gap (paired by seed) decides; its size "
        f"(the imbalanced runs' gap above {FAR_GAP.value:g}) is a statement of its own",
        Needs(CAUSES_GRID, ("data.imbalance",), reference=0.0),
        (FAR_GAP,),
        check_cause_raises_gap,
        reads=Reads.SYMPTOM,
        brief="class imbalance: high train_acc, low val_acc",
        part=Part.CAUSE,
        cause="class imbalance",
        read_at="epoch 2",
    ),
    Claim(
        "C3",
        "training data not shuffled (a whole batch is one class) gives high train_acc and low val_acc",
        "at epoch 2 the unshuffled runs' gap exceeds the shuffled runs' gap (paired by seed) decides; its size "
        f"(the unshuffled runs' gap above {FAR_GAP.value:g}) is a statement of its own",
        Needs(CAUSES_GRID, ("data.shuffle",), reference=True),
        (FAR_GAP,),
        check_cause_raises_gap,
        reads=Reads.SYMPTOM,
        brief="unshuffled data: high train_acc, low val_acc",
        part=Part.CAUSE,
        cause="unshuffled data",
        read_at="epoch 2",
    ),
    Claim(
        "C4",
        "train and validation preprocessed differently give low val_acc",
        "at the last epoch at least one kind of mismatch lowers val_acc (paired by seed) decides; lowering it by "
        f"more than {VAL_DROP.value:g} (its size) is a statement of its own",
        Needs(CAUSES_GRID, ("data.preprocess_mismatch",), reference="none"),
        (VAL_DROP,),
        check_mismatch_lowers_val,
        brief="train/val preprocessing mismatch lowers val_acc",
        part=Part.CAUSE,
        cause="mismatched preprocessing",
    ),
    Claim(
        "C5",
        "a model too complex for the amount of data overfits",
        "at the last epoch eval_gap is larger for the wider model and for fewer samples per class (paired "
        f"differences above 0 for every value tested); a change within {CAPACITY_MARGIN.value:g} is no overfitting "
        "(equivalence at that margin) and contradicts it",
        Needs(CAUSES_GRID, ("model.width", "data.samples_per_class"), also=(CAPACITY_GRID,)),
        (CAPACITY_MARGIN,),
        check_capacity_overfits,
        brief="a model too large for the data overfits",
        part=Part.CAUSE,
        cause="a model too large",
        steps_differ=True,
    ),
    Claim(
        "C6",
        "large batches: faster",
        f"the largest batch reaches {vocab.VAL_ACC_RECAL} {TIME_TARGET.value:g} (a target fixed in advance; "
        f"{vocab.VAL_ACC} where not recorded) in at least {SPEEDUP.value:.0%} less time than the smallest (paired "
        "by seed), each at its own tuned lr where the results have a search; a run that misses the target counts "
        "all the time it trained, a lower bound",
        Needs(BATCH_SIZES_GRID, (BATCH_SIZE,)),
        (TIME_TARGET, SPEEDUP),
        check_large_batch_faster,
        reads=Reads.TIME,
        budget=Budget.TARGET,
        read_at=f"{TIME_TARGET.value:g} validation accuracy ({vocab.VAL_ACC_RECAL} where recorded)",
        brief="large batches train faster",
        part=Part.SPEED,
        tuned_first=True,
    ),
    Claim(
        "C7",
        "large batches: more stable [lower training error]; small: better generalisation",
        "at the last epoch the largest batch has higher train_eval_acc and lower val_acc than the smallest (paired)",
        Needs(BATCH_SIZES_GRID, (BATCH_SIZE,)),
        (),
        check_large_batch_trains_small_generalises,
        brief="large batches fit better, small ones generalise better",
        part=Part.SCALING,
        steps_differ=True,
        tuned_first=True,
    ),
    Claim(
        "C8",
        f"batch_size {SMALL_BATCH} or less",
        f"at the last epoch the best batch size <= {SMALL_BATCH} has higher val_acc than the best batch size "
        f"> {SMALL_BATCH} (paired), each chosen on the other seeds and tested on the held-out one (leave one seed out)",
        Needs(BATCH_SIZES_GRID, (BATCH_SIZE,)),
        (),
        check_small_batch_wins,
        brief="keep batch_size <= 32",
        part=Part.ADVICE,
        steps_differ=True,
        tuned_first=True,
    ),
    Claim(
        "C9",
        "with multi_gpu_model a model is copied onto G GPUs and each batch is split between them",
        "the sentence itself describes the API (copies of the model, each batch split) and is true by "
        "construction; tested is what it implies for training: at one global batch, G replicas, each normalising "
        f"its own share of the batch (per-replica BatchNorm), end with val_acc within +-{SAME_VAL.value:g} of one "
        "device (paired) for every G tested",
        Needs(GPUS_GRID, (GPUS,), reference=1),
        (SAME_VAL,),
        check_replicas_learn_alike,
        brief="G replicas learn like one device",
        part=Part.REPLICAS,
    ),
)


def by_id(claim_id: str) -> Claim:
    return next(c for c in CLAIMS if c.id == claim_id)


def the(part: Part) -> Claim:
    """The one claim that plays this part in the answer (PICTURE, ADVICE, ...)."""
    (claim,) = (c for c in CLAIMS if c.part is part)
    return claim


def causes() -> tuple[Claim, ...]:
    """The post's other suspected causes of high train / low val accuracy, in order."""
    return tuple(c for c in CLAIMS if c.part is Part.CAUSE)


TUNED_FIRST = tuple(c.id for c in CLAIMS if c.tuned_first)
STEPS_DIFFER = tuple(c.id for c in CLAIMS if c.steps_differ)


def thresholds() -> tuple[Threshold, ...]:
    """Every threshold the claims use, once each, in the order the claims name them."""
    return tuple(dict.fromkeys(t for claim in CLAIMS for t in claim.thresholds))


def evaluate(
    table: pd.DataFrame,
    decided_in: Mapping[str, str] | None = None,
    sequential: Mapping[str, pd.DataFrame] | None = None,
    tuned: pd.DataFrame | None = None,
) -> list[tuple[Claim, Finding | None]]:
    """Every claim against a run summary table (`analysis.run_summary`), each under its own error control
    (`family.controlled`): a claim's verdict never depends on which other claims or folders were read.

    `decided_in` maps a claim to the results folder that continued it with `run --until-decided`: the claim is
    read from that folder's runs alone, so its sequential verdict and the numbers shown are about the same
    runs (a combined report would otherwise answer C5 from a map grid's broader but thinner data sizes).
    `sequential` holds each such claim's rows of decisions.csv: a check they decided on the same numbers
    enters the family with its sequential p-value, valid after the optional stopping. `tuned`
    (`basis.tuned_lr`): the batch-size advice (`Claim.tuned_first`) is read there first, each batch size at
    its own best lr.
    """
    if table.empty and (tuned is None or tuned.empty):
        return [(claim, None) for claim in CLAIMS]
    where, looks = decided_in or {}, sequential or {}
    found: list[tuple[Claim, Finding | None]] = []
    for claim in CLAIMS:
        tuned_first = claim.tuned_first and tuned is not None and len(tuned)
        at_tuned = basis.read(claim, tuned) if tuned_first else None
        if at_tuned is not None:
            found.append((claim, dataclasses.replace(at_tuned, tuned=True)))
            continue
        finding = basis.in_folder(claim, table, where.get(claim.id)) if len(table) else None
        found.append((claim, basis.with_sequential(finding, looks.get(claim.id))))
    return each_controlled(found)
