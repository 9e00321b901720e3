"""The report's "Where each claim holds" (condition maps) and "Reproducing the post's numbers" sections.

The maps come from `sweep.claims.maps`, the settings ranked by their distance from the post's numbers from
`sweep.claims.reproduction`.
"""

from __future__ import annotations

from collections.abc import Sequence

from sweep import vocab
from sweep.analysis import column
from sweep.analysis.estimates import fmt_estimate
from sweep.analysis.selection import where
from sweep.claims.findings import CLOSE_GAP, FAR_GAP, Part
from sweep.claims.maps import MAPPED, Cell, ConditionMap, short, shown
from sweep.claims.reproduction import NEAR, POST_NUMBERS, Candidate
from sweep.report.document import Doc
from sweep.report.figures import lag
from sweep.report.figures.files import FigureFile
from sweep.report.sections import headline

SHOWN = 5  # settings listed, closest first


def maps_section(doc: Doc, found: Sequence[ConditionMap], figures: dict[str, FigureFile]) -> None:
    doc.h(2, "Where each claim holds")
    if not found:
        doc.p(
            "These results test no claim at more than one setting. A condition map needs a results folder whose "
            "runs compare the claim's values at two or more settings: "
            + ", ".join(f"`{m.experiments}` ({m.claim_id})" for m in MAPPED if m.experiments)
            + " are such grids."
        )
        return
    doc.p(
        "A verdict above reads one group of runs. Here each claim's checks are computed again, unchanged, at every "
        "setting of one results folder that compares the claim's values (the folder with the most such "
        "settings), and described, not decided: a setting shows the post's pattern when every check's 95% "
        "interval lies wholly beyond the claim's threshold, does not when one lies wholly short of it, and is "
        "unclear otherwise. With 3 seeds per setting and dozens of settings no error rate is claimed for these "
        "words; only the verdict table decides. A run at chance is in its setting's numbers: a setting whose "
        "compared runs sit at chance while the others learned (a one-sided binomial test of their validation "
        "accuracy over seeds against chance, at 0.05) 'prevents learning', and one whose reference runs did not "
        "learn cannot answer; neither counts as showing the pattern or not. A group of settings is named by the "
        "fewest settings that pick out exactly its cells."
    )
    for m in found:
        doc.h(3, f"{m.claim.id} over {len(m.cells)} settings ({m.source})")
        doc.p(
            f"{m.claim.id} {m.summary()}. Reading: the post's, equal epochs, at epoch 2; "
            f"{m.seeds()} seeds per setting. {m.counts()}."
        )
        doc.table(_header(m), [_row(m, c) for c in m.cells])
        if m.claim.id in figures:
            doc.figure(figures[m.claim.id])
        if m.claim.part is Part.PICTURE:  # its headline and mechanism figure
            for sentence in headline.sentences(m):
                doc.p(sentence)
            if lag.NAME in figures:
                doc.figure(figures[lag.NAME])


def _header(m: ConditionMap) -> tuple[str, ...]:
    return (*(short(k) for k in m.keys), *m.mapped.panels, "train_acc / val_acc at epoch 2 (seed means)", "pattern")


def _row(m: ConditionMap, cell: Cell) -> tuple[str, ...]:
    checks = [f"{fmt_estimate(k.estimate)} {k.outcome().words.interval}" for k in cell.checks]
    return (*(shown(v) for _, v in cell.conditions), *checks, _accuracies(m, cell), cell.word())


def _accuracies(m: ConditionMap, cell: Cell) -> str:
    """train_acc / val_acc at epoch 2, seed means, at the compared value and at the reference."""
    axis, rows = m.claim.needs.axes[0], cell.rows
    balanced = column(vocab.TRAIN_EVAL_BALANCED_ACC, "epoch2")
    parts = []
    for value in (cell.value, cell.reference):
        at = where(rows, axis, value)
        train, val = (at[column(metric, "epoch2")].mean() for metric in (vocab.TRAIN_ACC, vocab.VAL_ACC))
        text = f"{short(axis)}={shown(value)}: {train:.2f} / {val:.2f}"
        if balanced in at and at[balanced].notna().any():
            text += f" (balanced train_eval_acc {at[balanced].mean():.2f})"
        parts.append(text)
    return "; ".join(parts)


# --- reproducing the post's numbers


def reproduction_section(doc: Doc, found: Sequence[Candidate]) -> None:
    doc.h(2, "Reproducing the post's numbers")
    post = ", ".join(f"{m} {v:.2f} at batch {bs}" for (bs, m), v in POST_NUMBERS.items())
    if not found:
        doc.p(f"The post reports, at epoch 2: {post}. These results have no runs at batch 8 and 64 at epoch 2.")
        return
    best = found[0]
    near = [c for c in found if c.distance <= NEAR]
    verdict = (
        f"{len(near)} of the {len(found)} settings tested come within {NEAR:g} of each of the post's numbers"
        if near
        else f"No setting of the {len(found)} tested comes within {NEAR:g} of each of the post's numbers"
    )
    patterned = sum(c.pattern for c in found)
    doc.p(
        f"The post reports, at epoch 2: {post}. {verdict}; {patterned} show its pattern (batch 64's gap above "
        f"{FAR_GAP.value:g}, batch 8's within +-{CLOSE_GAP.value:g}, in seed means). Settings with the pattern "
        f"come first, each part ranked by distance, the largest absolute difference of the four seed means from "
        f"the post's numbers. The first is {best.label}: largest distance {best.distance:.2f} (in "
        f"{best.farthest()}); {best.covered()} of the 4 numbers lie inside its 95% intervals over seeds. Every "
        "setting with runs at batch 8 and 64 at epoch 2 in these results counts, from any folder; the post says "
        "nothing of its optimizer, learning rate, data size or BatchNorm, so these are its unknowns."
    )
    doc.table(
        (
            "setting",
            "pattern",
            "distance",
            *(f"{m} at batch {bs} (post {v:.2f})" for (bs, m), v in POST_NUMBERS.items()),
        ),
        [
            (
                c.label,
                "yes" if c.pattern else "no",
                f"{c.distance:.2f}",
                *(fmt_estimate(c.numbers[k]) for k in POST_NUMBERS),
            )
            for c in found[:SHOWN]
        ],
    )
