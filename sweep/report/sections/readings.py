"""The report's sections that re-read the batch-size claims: at comparable points, the attribution of C1's
gap, and the batch sizes at their own best learning rate. Written as blocks of a `Doc`.
"""

from __future__ import annotations

from collections.abc import Sequence

from sweep.analysis import readings, tuning
from sweep.analysis.estimates import fmt_estimate
from sweep.claims import attribution as attr
from sweep.claims import comparable
from sweep.claims.findings import FAR_GAP
from sweep.claims.registry import STEPS_DIFFER
from sweep.report.document import Doc
from sweep.vocab import RunStatus

TUNING_EXPERIMENTS = "experiments/lr_search.yaml"  # a grid with a search: block per batch size

# --- the batch-size claims at comparable points


def comparable_section(doc: Doc, reads: list[comparable.Read], tuned: Sequence[comparable.Read] = ()) -> None:
    doc.h(2, "Batch sizes compared at comparable points")
    if not reads and not tuned:
        doc.p("These results have no runs for the batch-size claims.")
        return
    doc.p(
        "The post compares batch sizes at equal epochs, where a large batch has taken far fewer optimizer steps. "
        "Each batch-size claim's checks are run again, unchanged, on the runs read elsewhere: "
        + "; ".join(f"{r.name}: {r.words}" for r in readings.READINGS)
        + ". Steps, fit and time are interpolated between a run's records; fit is the "
        f"{readings.FIT_WORDS}. 'BatchNorm recalibrated' swaps the inference-mode numbers for those with "
        "BatchNorm's statistics recomputed for the current weights (train.recalibrate_bn); raw minus "
        "recalibrated is BatchNorm's lag. The claim's verdict above is read at equal epochs; "
        "these rows use the same thresholds and uncorrected 95% intervals, for comparison. "
        "Equal fit and equal time fall between two records wherever they fall; where runs have records "
        "inside epochs, each is read again with every other one left out (either way), and a row whose "
        "checks then decide otherwise says 'not steady': its interval, over seeds, does not count where "
        "the records fell."
    )
    _comparable_tables(doc, reads, "")
    if tuned:
        doc.p(
            "The batch-size advice again, with each batch size at its own tuned lr (the search's best, re-run at "
            "every seed), as C7 and C8 are decided above: at a fixed lr a batch size is judged at another's best "
            "lr. Steps to a target at the tuned lr are in 'Steps to target'."
        )
        _comparable_tables(doc, list(tuned), ", each batch size at its own tuned lr")


def _comparable_tables(doc: Doc, reads: list[comparable.Read], at: str) -> None:
    """One table per claim of `reads` (all at one lr), with BatchNorm's lag and whether the readings agree."""
    for claim_id in STEPS_DIFFER:
        rows = comparable.rows_for(reads, claim_id)
        if not rows:
            continue
        first = next(r for r in reads if r.claim.id == claim_id)
        doc.h(3, f"{claim_id}{at}: {first.claim.test}")
        doc.table(("reading", "BatchNorm", "read at", "verdict: each check's mean [95% CI] (n) and outcome"), rows)
        for reading in (readings.EPOCHS, readings.STEPS):
            lag = comparable.lag_sentence(reads, claim_id, reading)
            if lag:
                doc.p(f"At {reading.name}: {lag}")
        doc.p(comparable.disagreement(reads, claim_id))


# --- attribution, tuning and the noise scale


def attribution_section(doc: Doc, att: attr.Attribution | None) -> None:
    doc.h(2, "Attribution: what makes C1's gap at batch 64?")
    if att is None:
        doc.p(
            f"These results have no runs at batch 8 and 64 with the controls at their defaults; "
            f"`{attr.EXPERIMENTS}` runs the attribution grid."
        )
        return
    far = f"{FAR_GAP.value:g}"
    doc.p(
        "Each arm changes one thing against the default arm (same seeds, so changes are paired per seed). "
        f'The gap "survives" when its whole 95% interval lies above {far}. The equal-steps arm is read '
        "at batch 64's record after as many optimizer steps as batch 8 takes by epoch 2. The last column is C7's "
        "val_acc at batch 64 minus batch 8 at each run's last record (for equal steps: after the same steps). "
        "eval_gap at batch 64 (same reading) measures real overfitting (train and validation read the same way), "
        "whichever gap the arm reads. Arms are grouped by the effect they measure; arms of one effect are "
        "several measurements of it, so they are not ranked against each other."
    )
    doc.p(f"Runs used: {att.selection}.")
    doc.table(
        (
            "effect",
            "arm",
            "read at",
            "gap at batch 64 [95% CI] (n)",
            f"survives (> {far})?",
            "change vs default (paired)",
            "gap at batch 8",
            "C7: val_acc 64 - 8, last (paired)",
            "eval_gap at batch 64 (same reading)",
        ),
        [
            (
                a.mechanism.family or "(reference)",
                a.label,
                a.read_at,
                fmt_estimate(a.gap64),
                a.survives.words.answer,
                fmt_estimate(a.change) if a.change else "(reference)",
                fmt_estimate(a.gap8),
                fmt_estimate(a.val_last) if a.val_last.n else "as default",
                fmt_estimate(a.eval_gap64),
            )
            for a in sorted(att.arms, key=lambda a: attr.family_rank(a.mechanism))
        ],
    )
    for mechanism in att.missing:
        doc.p(f"{mechanism.label}: not in these results ({attr.EXPERIMENTS}).")
    doc.p(f"Conclusion: {att.conclusion()}")


def tuning_section(doc: Doc, tun: tuning.Tuning | None) -> None:
    doc.h(2, "Batch sizes at their own best learning rate")
    if tun is None:
        doc.p(
            f"No learning-rate search in these results; `{TUNING_EXPERIMENTS}` runs one per batch size "
            "(a `search:` block in a grid file)."
        )
        return
    doc.p(
        "Shallue et al. (2019) compare batch sizes each at a learning rate tuned for it. Each search below drew "
        "learning rates with TPE at one seed, pruned trials whose curve of the search's metric fell below the "
        "median, and re-ran the best lr at every seed of the grid; the fixed lr is the grid's own runs of the same "
        "point. Changes are paired by seed. Each row reads val_acc_recal (BatchNorm statistics recomputed for the "
        "weights) where every record of its tuned and fixed-lr runs has it, else val_acc, which lags behind the "
        "weights at a large batch size; the 'read on' column names which."
    )
    fmt = fmt_estimate
    doc.table(
        (
            "batch size",
            "context",
            "best lr",
            "fixed lr",
            "read on",
            "at best lr, last epoch",
            "at fixed lr",
            "tuned - fixed (paired)",
            "gap at epoch 2: best lr / fixed lr",
        ),
        [
            (
                str(p.batch_size),
                p.context or "-",
                tuning.describe(p.best_lr),
                tuning.describe(p.fixed_lr),
                p.metric,
                fmt(p.tuned_val),
                fmt(p.fixed_val),
                fmt(p.change),
                f"{fmt(p.tuned_gap2)} / {fmt(p.fixed_gap2)}",
            )
            for p in tun.points
        ],
    )
    for p in tun.points:
        if p.edge():
            where = f"batch {p.batch_size}" + (f" ({p.context})" if p.context else "")
            doc.p(f"The best lr of {where}, {tuning.describe(p.best_lr)}, is {p.edge()}.")
    doc.table(
        ("batch size", "search chose on", "search trials: lr -> final value of the read-on metric (status)"),
        [
            (
                str(p.batch_size),
                p.search_metric or "not recorded",
                "; ".join(f"{lr:.3g} -> {v:.3f}{'' if s == RunStatus.DONE else f' ({s})'}" for lr, v, s in p.trials),
            )
            for p in tun.points
        ],
    )
    doc.p(f"Conclusion: {tun.conclusion()}")
