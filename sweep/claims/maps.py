"""Condition maps: a claim checked at every setting a results folder tested it at, and where it holds.

A claim's verdict (`sweep.claims.registry`) reads one group of runs, chosen by a fixed rule, so
it can be an accident of that group's settings. A map re-runs the claim's own checks, unchanged,
on every *cell*: every group of runs that share all settings but the claim's axis and have
both of the values it compares (C1: batch 8 and 64; C3: shuffled and not). Cells come from
one results folder, the one with the most cells, so every cell ran the same code and grid.

A map describes; it does not decide. Each cell is its checks' estimates with their 95%
intervals: a cell "shows" the claim's pattern when every interval lies wholly on the claim's
side of its threshold, "does not" when one lies wholly on the other side, and is "unclear"
otherwise. With 3 seeds per cell and dozens of cells, threshold tests corrected for
multiplicity could decide almost nothing, and uncorrected ones would claim too much; so no
error rate is claimed here, and only the verdict table decides. A run at chance is in its cell's
numbers; a cell whose compared arm sits at chance while its reference learned "prevents learning", and
one whose reference did not learn cannot answer and is in no tally of shows / does not
(`sweep.analysis.chance`, the same test as the verdicts').
`where` names each set of cells by the fewest settings that cover it exactly
(`batchnorm=False` for all cells without BatchNorm).
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sweep import vocab
from sweep.analysis import BATCH_SIZE, SOURCE, SOURCE_RANK, column, setting_columns
from sweep.analysis.chance import Answer
from sweep.analysis.estimates import Check
from sweep.analysis.outcome import Outcome, all_of
from sweep.analysis.selection import (
    RECORDING_KEYS,
    Selection,
    fmt_value,
    matches,
    settings_key,
    toggle_values,
    with_defaults,
)
from sweep.analysis.selection import where as rows_at
from sweep.claims.checks import cause_raises_gap, gap_at_two_batch_sizes
from sweep.claims.findings import Claim, Finding
from sweep.claims.registry import by_id
from sweep.config import declared

Judge = Callable[[Claim, Selection, Any], Finding]
MIN_CELLS = 2  # one cell is the verdict itself, not a map


def post_size(finding: Finding) -> tuple[Check, ...]:
    """C1's pattern in a cell: the post's picture at its size (the finding's size statement)."""
    return finding.size


def symptom_and_cause(finding: Finding) -> tuple[Check, ...]:
    """C2/C3's pattern in a cell: the cause's gap far above (its size), then the cause raising the gap."""
    return (*finding.size, *finding.checks)


@dataclass(frozen=True)
class Mapped:
    """How a claim is mapped: the check function for one cell, the checks of its finding that make the claim's
    pattern there, and a title per such check for the figure.
    """

    claim_id: str
    judge: Judge
    pattern: Callable[[Finding], tuple[Check, ...]]
    panels: tuple[str, ...]
    experiments: str = ""  # the shipped grid that maps it, if any
    # the sweeps (runs.csv's `sweep`) of its shipped grids: read together they are one map (C1's data-size axis
    # is a grid of its own); results of other sweeps give the folder with the most cells
    sweeps: tuple[str, ...] = ()


MAPPED = (
    Mapped(
        "C1",
        gap_at_two_batch_sizes,
        post_size,
        ("gap at the large batch, epoch 2", "gap at batch 8, epoch 2"),
        "experiments/map_c1.yaml",
        ("map_c1", "map_c1_data"),
    ),
    Mapped(
        "C2",
        cause_raises_gap,
        symptom_and_cause,
        ("gap with the cause, epoch 2", "gap change vs none (paired), epoch 2"),
        "experiments/map_c2.yaml",
    ),
    Mapped(
        "C3",
        cause_raises_gap,
        symptom_and_cause,
        ("gap with the cause, epoch 2", "gap change vs none (paired), epoch 2"),
        "experiments/map_c3.yaml",
    ),
)


@dataclass(frozen=True)
class Cell:
    """One setting of the map: the conditions that set it apart, and the claim's checks there."""

    conditions: tuple[tuple[str, Any], ...]
    value: Any  # the compared value (C1: the large batch; C3: shuffle False)
    reference: Any  # what it is compared with (C1: batch 8; C3: shuffle True)
    finding: Finding  # its checks on its runs, and its arms against chance
    rows: pd.DataFrame  # the cell's runs
    checks: tuple[Check, ...] = ()  # the checks of `finding` that make the claim's pattern (`Mapped.pattern`)

    @property
    def answer(self) -> Answer:
        """Whether the cell compares, prevents learning, or cannot answer (both learned where not tested)."""
        return self.finding.arms.answer if self.finding.arms is not None else Answer.COMPARES

    @property
    def outcome(self) -> Outcome:
        """The pattern shows (every check's own 95% interval beyond its threshold), does not, or is unclear;
        unclear where the control did not learn (nothing to compare).
        """
        return Outcome.UNDECIDED if self.finding.cannot_answer() else all_of(c.outcome() for c in self.checks)

    def word(self) -> str:
        """Its word in tables/maps.csv's cell column: "shows it", ..., "prevents learning", "control did not learn"."""
        return self.outcome.words.cell if self.answer is Answer.COMPARES else self.answer.value

    def label(self) -> str:
        return ", ".join(f"{short(k)}={shown(v)}" for k, v in self.conditions) or "the only setting"


@dataclass(frozen=True)
class ConditionMap:
    claim: Claim
    mapped: Mapped
    source: str  # the results folder the cells come from
    cells: tuple[Cell, ...]

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.cells[0].conditions) if self.cells else ()

    def comparing(self) -> tuple[Cell, ...]:
        """The cells whose arms both learned: those the claim's pattern can show at or not."""
        return self.answering(Answer.COMPARES)

    def answering(self, answer: Answer) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if c.answer is answer)

    def seeds(self) -> str:
        counts = sorted({int(c.checks[0].estimate.n) for c in self.cells if c.checks}) or [0]
        return "-".join(str(n) for n in (counts[0], counts[-1])) if counts[0] != counts[-1] else str(counts[0])

    def summary(self) -> str:
        """ "shows the post's pattern at A; does not at B; unclear at C", each part only where it has cells,
        then where the compared value prevents learning and where the reference did not learn.
        """
        parts = []
        for outcome in Outcome:
            chosen = [c for c in self.comparing() if c.outcome is outcome]
            if chosen:
                parts.append(f"{outcome.words.cells_at} {where(self.cells, chosen)}")
        prevents = self.answering(Answer.PREVENTS_LEARNING)
        if prevents:
            sides = " or ".join(dict.fromkeys(c.finding.arms.treatment for c in prevents if c.finding.arms))
            parts.append(f"{sides} prevents learning at {where(self.cells, prevents)}")
        blind = self.answering(Answer.CANNOT_ANSWER)
        if blind:
            parts.append(f"the control did not learn (cannot answer) at {where(self.cells, blind)}")
        return "; ".join(parts)

    def counts(self) -> str:
        """The tally: "2 show it, 0 do not, 1 unclear, 3 prevent learning, 1 cannot answer (control did not
        learn) of 7 settings"; the last two only where there are such cells.
        """
        tally = [sum(c.outcome is o for c in self.comparing()) for o in Outcome]
        prevents, blind = (len(self.answering(a)) for a in (Answer.PREVENTS_LEARNING, Answer.CANNOT_ANSWER))
        more = f", {prevents} prevent learning" if prevents else ""
        more += f", {blind} cannot answer (control did not learn)" if blind else ""
        return f"{tally[0]} show it, {tally[1]} do not, {tally[2]} unclear{more} of {len(self.cells)} settings"


def short(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def shown(value: Any) -> str:
    """A condition's value in words: an empty cell (a key left at its null default) is "none"."""
    return "none" if value is None or (isinstance(value, float) and value != value) else fmt_value(value)


def maps(table: pd.DataFrame) -> list[ConditionMap]:
    """Every mapped claim's map, where a results folder has at least MIN_CELLS cells for it."""
    found = []
    for mapped in MAPPED:
        chosen = condition_map(by_id(mapped.claim_id), mapped, table)
        if chosen is not None:
            found.append(chosen)
    return found


def condition_map(claim: Claim, mapped: Mapped, table: pd.DataFrame) -> ConditionMap | None:
    """The claim's map: its own shipped grids' folders together (`Mapped.sweeps`), else the results folder
    with the most cells (ties: the earliest on the command line).

    A cell belongs to the folder of its compared runs (C3: the unshuffled ones); its reference runs may
    have been kept from another folder, where the same run was stored too (one copy per run is read).
    """
    rows = _at_epoch_two(claim, table)
    if rows is None:
        return None
    found, others = _groups(claim, rows)
    by_folder: dict[int, list[tuple[Any, Selection]]] = {}
    for value, sel in found:
        by_folder.setdefault(_folder_of(sel, value), []).append((value, sel))
    designed = [cells for cells in by_folder.values() if _sweep_of(cells) in mapped.sweeps]
    if designed:  # the map's own grids, together, in command-line order
        best = [cell for folder in sorted(by_folder) if by_folder[folder] in designed for cell in by_folder[folder]]
    else:
        best = min(by_folder.items(), key=lambda kv: (-len(kv[1]), kv[0]), default=(0, []))[1]
    if len(best) < MIN_CELLS:
        return None
    cells = _judged(claim, mapped, _with_conditions(best, others))
    sources = dict.fromkeys(str(_source_of(sel, value)) for value, sel in best)
    return ConditionMap(claim, mapped, " and ".join(s for s in sources if s), cells)


def _source_of(sel: Selection, value: Any) -> str:
    compared = rows_at(sel.rows, sel.axis, value)
    return str(compared[SOURCE].iloc[0]) if SOURCE in compared else ""


def _sweep_of(cells: list[tuple[Any, Selection]]) -> str:
    """The sweep (runs.csv's name for the grid) a folder's cells ran in; "" where the table does not say."""
    value, sel = cells[0]
    compared = rows_at(sel.rows, sel.axis, value)
    return str(compared[vocab.SWEEP].iloc[0]) if vocab.SWEEP in compared else ""


def _folder_of(sel: Selection, value: Any) -> int:
    compared = rows_at(sel.rows, sel.axis, value)
    return int(compared[SOURCE_RANK].min()) if SOURCE_RANK in compared else 0


def groups_everywhere(claim: Claim, table: pd.DataFrame) -> list[tuple[Any, Selection]]:
    """Every (compared value, group of runs) at epoch 2 from every results folder, named by what sets it apart."""
    rows = _at_epoch_two(claim, table)
    return [] if rows is None else _with_conditions(*_groups(claim, rows))


def _at_epoch_two(claim: Claim, table: pd.DataFrame) -> pd.DataFrame | None:
    """The runs that reached epoch 2 (one epoch cannot show it), or None when the claim's axis is absent."""
    gap2 = column(vocab.GAP, "epoch2")
    if table.empty or gap2 not in table or claim.needs.axes[0] not in table:
        return None
    return table.dropna(subset=[gap2])


def _groups(claim: Claim, rows: pd.DataFrame) -> tuple[list[tuple[Any, Selection]], list[str]]:
    """Every (compared value, group of runs) that has the claim's reference and that value, and the settings
    that may set groups apart.
    """
    axis = claim.needs.axes[0]
    reference, named = _reference(claim)
    others = [c for c in setting_columns(rows) if c != axis and c not in RECORDING_KEYS]
    keyed = rows.assign(_cell=settings_key(rows, others))
    found = []
    for _, group in keyed.groupby("_cell", sort=True):
        if not matches(group[axis], reference).any():
            continue
        for value in named or toggle_values(group, axis)[1:]:
            if matches(group[axis], value).any():
                part = group[matches(group[axis], reference) | matches(group[axis], value)].drop(columns="_cell")
                found.append((value, Selection(axis, part.reset_index(drop=True), {}, 1)))
    return found, others


def _reference(claim: Claim) -> tuple[Any, tuple[Any, ...]]:
    """The value every cell compares with, and the compared values when the claim names them."""
    if claim.needs.axes[0] == BATCH_SIZE:
        return claim.needs.values[0], claim.needs.values[1:]
    return claim.needs.reference, ()


def _with_conditions(found: list[tuple[Any, Selection]], others: Sequence[str]) -> list[tuple[Any, Selection]]:
    """Each selection's context: the settings that differ between cells (the axis too, when it takes several values)."""
    if not found:
        return []
    both = pd.concat([s.rows for _, s in found], ignore_index=True)
    filled = with_defaults(both, others)
    differing = _distinct([c for c in others if filled[c].nunique(dropna=False) > 1], found)
    axis = found[0][1].axis
    several = len({fmt_value(v) for v, _ in found}) > 1
    out = []
    for value, sel in found:
        first = with_defaults(sel.rows, differing).iloc[0]
        context = {c: INERT if _inert(c, first) else first[c] for c in differing} | ({axis: value} if several else {})
        out.append((value, Selection(axis, sel.rows, context, 1)))
    return out


INERT = "-"  # a setting the cell does not use (bn_momentum without BatchNorm)


def _inert(key: str, row: pd.Series) -> bool:
    """Whether the cell does not use `key`: its declaration names where it is used, and this is not there."""
    only = declared.declarations()[key].only if key in declared.declarations() else None
    if only is None or only.on not in row.index:
        return False
    return not any(matches(pd.Series([row[only.on]]), v).iloc[0] for v in only.values)


def _distinct(keys: Sequence[str], found: list[tuple[Any, Selection]]) -> list[str]:
    """The keys that split the cells differently from every earlier key: a companion that always moves
    with its control (train.steps with train.budget) adds nothing to a cell's name.
    """
    kept, seen = [], set()
    for k in keys:
        split = tuple(fmt_value(with_defaults(s.rows, [k])[k].iloc[0]) for _, s in found)
        partition = tuple(split.index(v) for v in split)  # the same partition, whatever the values
        if partition not in seen:
            kept.append(k)
            seen.add(partition)
    return kept


def _judged(claim: Claim, mapped: Mapped, found: list[tuple[Any, Selection]]) -> tuple[Cell, ...]:
    """Every cell's checks on its runs, each described by its own 95% interval (no correction: a map decides
    nothing), and its arms against chance.
    """
    reference = _reference(claim)[0]
    cells = []
    for value, sel in found:
        finding = mapped.judge(claim, sel, value)
        cells.append(Cell(tuple(sel.context.items()), value, reference, finding, sel.rows, mapped.pattern(finding)))
    return tuple(sorted(cells, key=lambda c: [_order(v) for _, v in c.conditions]))


def _order(value: Any) -> tuple[int, Any]:
    """Numbers (numpy's too) in numeric order, False before True, then words."""
    return (0, float(value)) if isinstance(value, (numbers.Real, np.bool_)) else (1, str(value))


def where(cells: Sequence[Cell], chosen: Sequence[Cell]) -> str:
    """The chosen cells in the fewest settings: a greedy cover by patterns (each key fixed or free)
    whose every cell is chosen, largest first.
    """
    if not cells:
        return ""
    keys = [k for k, _ in cells[0].conditions]
    named = {c.conditions: tuple(shown(v) for _, v in c.conditions) for c in cells}
    values = [list(dict.fromkeys(n[i] for n in sorted(named.values(), key=_natural))) for i in range(len(keys))]
    inside = {c.conditions for c in chosen}
    patterns = []
    for pattern in itertools.product(*[[FREE, *vs] for vs in values]):
        matched = {cond for cond, n in named.items() if all(p in (FREE, v) for p, v in zip(pattern, n, strict=True))}
        if matched and matched <= inside:
            patterns.append((pattern, matched))
    left, words = set(inside), []
    while left:
        pattern, matched = max(
            patterns, key=lambda pm: (len(pm[1] & left), -sum(v != FREE for v in pm[0]), INERT not in pm[0])
        )
        fixed = [f"{short(k)}={v}" for k, v in zip(keys, pattern, strict=True) if v != FREE]
        words.append(fixed)
        left -= matched
    if len(words) == 1:
        return ", ".join(words[0]) or f"every setting mapped ({_spans(keys, values)})"
    return " or ".join(f"({', '.join(w)})" if len(w) > 1 else w[0] for w in words)  # "(a=1, b=2) or c=3"


FREE = "*"  # a pattern's free key


def _spans(keys: Sequence[str], values: Sequence[Sequence[str]]) -> str:
    """What "every setting" covers: "optimizer adam or momentum; lr 0.001, 0.01 or 0.1"."""
    return "; ".join(
        f"{short(k)} {_either(vs)}" for k, vs in zip(keys, values, strict=True) if any(v != INERT for v in vs)
    )


def _either(values: Sequence[str]) -> str:
    shown_values = [v for v in values if v != INERT]
    return shown_values[0] if len(shown_values) == 1 else f"{', '.join(shown_values[:-1])} or {shown_values[-1]}"


def _natural(names: tuple[str, ...]) -> list[tuple[int, Any]]:
    """Numbers in numeric order, then words."""
    out: list[tuple[int, Any]] = []
    for name in names:
        try:
            out.append((0, float(name)))
        except ValueError:
            out.append((1, name))
    return out


# tables/maps.csv's columns every map has (a map's condition keys come between source and check); the header a
# report without maps writes, so the file is a table with no rows, not an empty file.
TABLE_COLUMNS = (
    "claim",
    "source",
    "check",
    "panel",
    "mean",
    "ci_low",
    "ci_high",
    "n",
    "pattern_when",
    "interval",
    "cell",
)


def table(found: Sequence[ConditionMap]) -> pd.DataFrame:
    """One row per cell and check of every map: for tables/maps.csv."""
    rows = []
    for m in found:
        for cell in m.cells:
            for i, check in enumerate(cell.checks):
                e = check.estimate
                rows.append(
                    {
                        "claim": m.claim.id,
                        "source": m.source,
                        **{short(k): v for k, v in cell.conditions},
                        "check": check.label,
                        "panel": m.mapped.panels[i],
                        "mean": e.mean,
                        "ci_low": e.low,
                        "ci_high": e.high,
                        "n": e.n,
                        "pattern_when": check.region(),
                        "interval": check.outcome().words.interval,
                        "cell": cell.word(),
                    }
                )
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=list(TABLE_COLUMNS))
