"""What a claim is and what the data says about it: thresholds, the runs a claim needs, findings,
and their words for the report and tables/claims.csv.

A claim's verdict comes from checks: numbers with 95% t-intervals over seeds and a region where
the claim needs them to lie (`sweep.analysis.estimates.Check`). The claims themselves are in
`sweep.claims.registry`, their check functions in `sweep.claims.checks`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple

import pandas as pd

from sweep.analysis import reach
from sweep.analysis.chance import Answer, Arms
from sweep.analysis.estimates import ALPHA, Check, Estimate, Key, q_values
from sweep.analysis.outcome import NOT_TESTED, Outcome, all_of, any_of
from sweep.analysis.power import SeedsNeeded, seeds_needed


@dataclass(frozen=True)
class Threshold:
    """A number a check compares with (accuracies as fractions: 0.20 = 20 percentage points)."""

    value: float
    wording: str  # how the report's "Thresholds" sentence names it, with {} for the value

    def words(self) -> str:
        return self.wording.format(self.value)


# Sizes from the post where it gives numbers, else stated with their reason (docs/report.md, "Thresholds").
POST_GAP = Threshold(0.50, "the post's size at batch 64 = gap > {:g} (its 80% - 6% = 0.74)")  # C1
FAR_GAP = Threshold(0.20, "far above = gap > {:g}")  # C2, C3, the maps: "train_acc far above val_acc"
CLOSE_GAP = Threshold(0.10, "close = |gap| < {:g}")  # C1: "the two are close" (the post: both 60%)
VAL_DROP = Threshold(0.10, "a mismatch must lower val_acc by > {:g}")  # C4, paired
CAPACITY_MARGIN = Threshold(0.02, "no overfitting = eval_gap grows by < {:g}")  # C5, paired: equivalence margin
LAG_MARGIN = Threshold(0.03, "BatchNorm's lag = recalibrated eval_gap differs by < {:g}")  # C1's mechanism
SPEEDUP = Threshold(0.10, "faster = at least {:.0%} less time to the target")  # C6: largest vs smallest batch
TIME_TARGET = Threshold(reach.TIME_TARGET, "C6's target = val_acc_recal {:g}, fixed in advance")
SAME_VAL = Threshold(0.02, "the same = within +-{:g} val_acc")  # C9: final val_acc, paired


def shows_pattern(gap_large: float, gap_small: float, far: Threshold = FAR_GAP) -> bool:
    """The post's epoch-2 picture in two numbers: the large batch's gap far above, the small one's close."""
    return gap_large > far.value and abs(gap_small) < CLOSE_GAP.value


class Budget(Enum):
    """What the compared runs were given alike (tables/claims.csv's budget column): the sign of a batch-size
    comparison can flip between budgets, so every verdict names its own.
    """

    EPOCHS = "equal epochs"
    STEPS = "equal optimizer steps"
    TIME = "equal wall time"
    TARGET = "to a target fixed in advance"


@dataclass(frozen=True)
class Needs:
    """The runs a claim needs: a sweep like `experiments` that compares the `axes`."""

    experiments: str  # the experiments file that tests it
    axes: tuple[str, ...]  # the settings it compares
    values: tuple[Any, ...] = ()  # the values it names (C1: batch 8 and 64); empty: whichever the runs have
    reference: Any = None  # the value the others are compared with (C2: balanced)
    also: tuple[str, ...] = ()  # other shipped experiments files whose runs answer it (C5: the capacity ladder)


class Rule(Enum):
    """How a claim's checks combine."""

    ALL = "all"  # every one must hold
    ANY = "any"  # one is enough (C4: one kind of mismatch)


CANNOT_ANSWER = "cannot answer: its control arm did not learn"  # a verdict in words (`Finding.verdict`)


class Reads(Enum):
    """Which numbers decide a claim (docs/report.md, "How each claim is read")."""

    SYMPTOM = "symptom"  # the symptom as the post saw it: running training-mode train_acc against val_acc
    # generalisation and fit: the same weights with BatchNorm's statistics recomputed (the *_recal columns),
    # so that BatchNorm's lag after few steps is not read as worse generalisation; raw where not recorded
    GENERALISATION = "generalisation"
    TIME = "time"  # epoch seconds


class ReadFrom(Enum):
    """The numbers a finding was read from, in words (tables/claims.csv's reading column)."""

    SYMPTOM = "the post's reading: running train_acc vs val_acc (raw)"
    RECAL = "recalibrated BatchNorm (*_recal: without BatchNorm's lag)"
    RAW = "raw inference mode (these runs did not record recalibrated numbers)"
    TIME = "in-run seconds (on a machine shared with other work; no quiet `sweep time` measurement)"
    QUIET = "quiet seconds (`sweep time`, timing.csv: alternating repeats, training only) x optimizer steps"


# Batch-size advice (`Claim.tuned_first`) is read with each batch size at its own tuned learning rate where
# the results have one (Shallue et al. 2019; the tuning playbook): at one fixed lr a batch size is judged at
# another's best lr.
READ_TUNED = "each batch size at its own tuned lr (the search's best, re-run at every seed)"


class Evidence(NamedTuple):
    """An informative number that decides nothing; `key` where code looks it up (the answer quotes C1's eval_gap)."""

    label: str
    estimate: Estimate
    key: Key | None = None


@dataclass(frozen=True)
class Finding:
    """What the data says about one claim; its outcome follows its checks (after correction, once corrected)."""

    checks: tuple[Check, ...]
    selection: str
    evidence: tuple[Evidence, ...] = ()  # informative numbers that do not decide
    notes: tuple[str, ...] = ()
    rule: Rule = Rule.ALL
    run_ids: tuple[str, ...] = ()  # the runs its selection(s) read (the run summary's run_id), sorted
    folders: str = ""  # the results folders those runs came from: "results/causes | results/map_c3"
    tested_at: str = ""  # the settings its runs ran at, in a few words (`Selection.tested_at`)
    optimizer: str = ""  # the optimizer(s) its runs trained with: "adam"
    lr: str = ""  # their learning rate: "0.001", or "tuned per batch size over [0.0001, 0.03]"
    read_from: ReadFrom | None = None  # which numbers decide (None: not yet said, `basis.read` says it)
    tuned: bool = False  # read with each batch size at its own tuned lr (READ_TUNED)
    arms: Arms | None = None  # the compared arms against chance (C1-C3); None: not tested
    # statements of their own, each at ALPHA, beside the deciding checks: whether the post's size is reproduced
    # (combined by `rule`, as the checks are), and mechanisms tested by equivalence (C1: BatchNorm's lag)
    size: tuple[Check, ...] = ()
    mechanism: tuple[Check, ...] = ()

    @property
    def outcome(self) -> Outcome:
        """The claim's direction: its deciding checks combined by its rule; undecided where its control arm did not
        learn (nothing to compare).
        """
        if self.cannot_answer():
            return Outcome.UNDECIDED
        combine = any_of if self.rule is Rule.ANY else all_of
        return combine(c.outcome() for c in self.checks)

    def cannot_answer(self) -> bool:
        """Its control arm did not learn: a difference from it says nothing about the cause."""
        return self.arms is not None and self.arms.answer is Answer.CANNOT_ANSWER

    def prevents_learning(self) -> bool:
        """Its treatment arm sits at chance while its control learned: the cause prevents learning."""
        return self.arms is not None and self.arms.answer is Answer.PREVENTS_LEARNING

    @property
    def named_outcome(self) -> str:
        """What the arms say before the checks, in a sentence with its numbers ("" where both learned)."""
        return self.arms.words() if self.arms is not None else ""

    @property
    def size_outcome(self) -> Outcome | None:
        """Whether the post's size is reproduced (None: the claim states no size beyond its direction)."""
        if not self.size:
            return None
        combine = any_of if self.rule is Rule.ANY else all_of
        return combine(c.outcome() for c in self.size)

    @property
    def size_not_shown(self) -> bool:
        """The direction holds but the size is not (yet) shown: "direction shown, size not"."""
        return self.outcome is Outcome.HOLDS and self.size_outcome not in (None, Outcome.HOLDS)

    @property
    def reading(self) -> str:
        """The numbers it was read from, in words: tables/claims.csv's reading column."""
        if self.read_from is None:
            return ""
        return f"{self.read_from.value}; {READ_TUNED}" if self.tuned else self.read_from.value

    @property
    def verdict(self) -> str:
        """The verdict in a word, as tables/claims.csv writes it."""
        if self.cannot_answer():
            return CANNOT_ANSWER
        if self.size_not_shown:
            return size_words(self.size_outcome)
        return self.outcome.words.table

    def undecided(self) -> list[Check]:
        """The checks more seeds could decide: none where the control did not learn (nothing to compare)."""
        if self.cannot_answer():
            return []
        return [c for c in self.checks if not c.outcome().decided and c.seeds_can_decide()]

    def seeds_needed(self) -> SeedsNeeded | None:
        """Seeds per setting for 80% power on the undecided checks: the most any of them needs
        (all must hold), or the fewest (C4: one kind is enough). None: every check is decided.
        """
        needed = [seeds_needed(c) for c in self.undecided()]
        if not needed:
            return None
        pick = min if self.rule is Rule.ANY else max
        return pick(needed, key=lambda s: s.sort_key())


DIRECTION_SHOWN = "direction shown"


def size_words(size: Outcome | None) -> str:
    """ "direction shown, size not" (the size fails) or "direction shown, size undecided"."""
    return f"{DIRECTION_SHOWN}, size {'not' if size is Outcome.FAILS else 'undecided'}"


class Part(Enum):
    """What a claim is in the answer (`Claim.part`): the first screen and the answer find claims by it, not by id."""

    PICTURE = "the post's picture"  # its train/val numbers at two batch sizes
    CAUSE = "a suspected cause"  # of high train / low val accuracy, other than the batch size
    SPEED = "speed"
    SCALING = "fit and generalisation across batch sizes"
    ADVICE = "the advice"  # keep batch_size <= 32
    REPLICAS = "replicas"


@dataclass(frozen=True)
class Claim:
    id: str
    quote: str  # the post's words
    test: str  # what is checked, in words, with the thresholds
    needs: Needs
    thresholds: tuple[Threshold, ...]
    check: Callable[[Claim, pd.DataFrame], Finding | None]  # None: these runs cannot test it
    reads: Reads = Reads.GENERALISATION  # which numbers decide
    brief: str = ""  # the claim in a few words, for the first screen's verdict table
    part: Part | None = None  # its part in the answer; None: none (a claim of the user's)
    cause: str = ""  # a CAUSE's name in the answer ("class imbalance")
    steps_differ: bool = False  # compares runs that take different numbers of steps: read at equal steps, fit, time
    tuned_first: bool = False  # batch-size advice: read at each batch size's own tuned lr where results have one
    budget: Budget = Budget.EPOCHS  # what its compared runs were given alike
    read_at: str = "the last epoch"  # where along training its numbers are read

    @property
    def budget_words(self) -> str:
        """ "equal epochs, read at epoch 2": tables/claims.csv's budget column and the verdict's words."""
        return f"{self.budget.value}, read at {self.read_at}"

    @property
    def experiments(self) -> str:
        return self.needs.experiments

    def evaluate(self, table: pd.DataFrame) -> Finding | None:
        return self.check(self, table)


# --- words for checks


def fmt_p(check: Check) -> str:
    """ "0.026 (at 0.025)": the p-value and, where it is not ALPHA, the level its side is decided at; "-": none."""
    p, side = check.p_value()
    if not math.isfinite(p):
        return "-"
    level = check.level(side)
    return f"{p:.2g}" if level == ALPHA else f"{p:.2g} (at {level:.2g})"


def outcome_text(check: Check) -> str:
    outcome = check.outcome()
    if not outcome.decided and check.estimate.n < 2:  # no spread to plan from: the seeds needed are unknown
        return f"{outcome.words.check} (no interval from fewer than 2 seeds)"
    if not outcome.decided and not check.seeds_can_decide():
        return f"{outcome.words.check} (its values are {check.bound.value}: more seeds cannot show this side)"
    if not outcome.decided:
        return f"{outcome.words.check} (~{seeds_needed(check).words()} seeds)"
    return outcome.words.check


class Role(Enum):
    """What a check is for in its claim's verdict (tables/claims.csv's role column)."""

    DECIDES = "decides"  # the claim's direction (or, for "no effect" claims, its equivalence): the verdict
    SIZE = "size"  # whether the post's size is reproduced: a statement of its own
    MECHANISM = "mechanism"  # an equivalence that says what causes it: a statement of its own


def claims_table(findings: list[tuple[Claim, Finding | None]]) -> pd.DataFrame:
    """One row per check (or one per untested claim): for tables/claims.csv, with Benjamini-Hochberg q-values over
    every deciding check of the table (q_bh: the false-discovery view beside the verdicts, which do not use it).
    """
    rows: list[dict[str, Any]] = []
    for claim, finding in findings:
        head: dict[str, Any] = {
            "claim": claim.id,
            "verdict": finding.verdict if finding else NOT_TESTED,
            "experiments": claim.experiments,
            "folders": finding.folders if finding else "",
            "budget": claim.budget_words if finding else "",
            "optimizer": finding.optimizer if finding else "",
            "lr": finding.lr if finding else "",
            "reading": finding.reading if finding else "",
            "named_outcome": finding.named_outcome if finding else "",
        }
        if finding is None or not finding.checks:
            rows.append(head)
        if finding is None:
            continue
        parts = ((Role.DECIDES, finding.checks), (Role.SIZE, finding.size), (Role.MECHANISM, finding.mechanism))
        for role, checks in parts:
            rows.extend({**head, "role": role.value, **_check_columns(check)} for check in checks)
    table = pd.DataFrame(rows)
    if "p_value" in table:
        deciding = table["role"] == Role.DECIDES.value
        table.loc[deciding, "q_bh"] = q_values(table.loc[deciding, "p_value"].astype(float).tolist())
    return table


def _check_columns(check: Check) -> dict[str, Any]:
    e, (p, side) = check.estimate, check.p_value()
    return {
        "check": check.label,
        "mean": e.mean,
        "ci_low": e.low,
        "ci_high": e.high,
        "n": e.n,
        "sd": e.sd,
        "holds_when": check.region(),
        "p_value": p,
        "p_side": side.words.side,
        "level": check.level(side),
        "outcome_alone": check.alone().words.check,
        "outcome": check.outcome().words.check,
        **_seeds_columns(check),
    }


def _seeds_columns(check: Check) -> dict[str, Any]:
    """Seeds for 80% power and its range, for an undecided check only (empty: decided)."""
    if check.outcome().decided or not check.seeds_can_decide():
        return {"seeds_needed": None, "seeds_needed_low": None, "seeds_needed_high": None}
    s = seeds_needed(check)
    return {"seeds_needed": s.n, "seeds_needed_low": s.low, "seeds_needed_high": s.high}
