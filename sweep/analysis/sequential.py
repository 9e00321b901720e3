"""Seeds until decided: when adding seeds to undecided checks may stop, with the error rate kept (issue 14).

Pure statistics (the t-tests are `sweep.analysis.estimates`'): checks in, decisions out. The orchestrator
that trains the seeds keeps the family's checks at every look and calls `decide`.

- Looks are planned before any data is seen (`schedule`): the starting seed count, then about
  x1.5 per look, always ending at the cap. Only these looks may decide a check; looking after
  every seed would spend the error rate on many small steps that change little.
- ALPHA is split over the looks (`spending`): each look's share is the fraction of the cap's
  seeds it adds (linear alpha spending). A look's test is the check's own exact Student-t test
  at that look's n (`Check.p_value`: unknown sd, valid from 2 seeds), so no asymptotics.
- A check's sequential p-value after look k is min over looks j <= k of p_j / share_j, capped at 1.
  By the union bound, P(some p_j <= u * share_j) <= u * sum(shares) <= u under the check's null,
  whatever the dependence between looks (they share seeds), whatever their actual n, and whenever
  the sweep stops: it is a valid p-value under optional stopping. A look that added no seeds to a
  check (its n unchanged: C6's timing repeats, a claim whose points did not grow) repeats the same
  test, so it spends nothing: its share joins the earlier test's (p / (share_j + share_k)), which the
  union bound allows, since the two events are one. An anytime-valid confidence
  sequence exact with an unknown sd (Lai's t-mixture) is valid at every seed count, which the sweep
  does not need, and pays for it at the cap: whatever its tuning it needs |t| > 3.26 at 30 seeds,
  where this plan's last look from 3 to 30 needs 2.46.
- Each check is decided at its own claim's levels (`Check.level_holds`, `level_fails`: error control
  per claim, `sweep.claims.family`), never by which other checks are in the sweep; a look without a
  p-value counts as p = 1.
- A check is decided at the first look where its sequential p is below the level of the side the
  look that gave it points to. It is then frozen (later looks of it are not read), so it stays
  decided and its direction cannot flip. The sequential p-values never rise, so every decision is
  one the same rule would also make with every check run to the cap (see docs/report.md, "Seeds
  until decided").
- Everything is a function of the per-look checks alone: a killed sweep resumes by recomputing.
  The plan (start, cap) belongs to the sweep and must not change on resume.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from sweep.analysis.estimates import ALPHA, Check, Key
from sweep.analysis.outcome import Outcome

RATIO = 1.5  # seeds grow about this much from one look to the next


@dataclass(frozen=True)
class Plan:
    """The seed counts at which checks are looked at, and each look's share of ALPHA (summing to <= 1)."""

    looks: tuple[int, ...]
    shares: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.looks or self.looks[0] < 2 or any(b <= a for a, b in pairwise(self.looks)):
            raise ValueError(f"looks must be increasing seed counts from 2 on, got {self.looks}")
        if len(self.shares) != len(self.looks) or min(self.shares) <= 0 or sum(self.shares) > 1 + 1e-9:
            raise ValueError(f"shares must be one positive share per look summing to at most 1, got {self.shares}")

    @classmethod
    def between(cls, start: int, cap: int) -> Plan:
        """The plan from `start` seeds to `cap`: `schedule`'s looks with `spending`'s shares."""
        looks = schedule(start, cap)
        return cls(looks, spending(looks))

    @property
    def cap(self) -> int:
        return self.looks[-1]


def schedule(start: int, cap: int, ratio: float = RATIO) -> tuple[int, ...]:
    """Seed counts of the looks: start, then x ratio (rounded up) per look, then the cap.

    3 to 30: (3, 5, 8, 12, 18, 30). A look is kept only when ratio times it is still within the
    cap, so the last step is never a sliver (18, 27, 30 would spend a share on 3 seeds).
    """
    if start < 2 or cap < start or ratio <= 1:
        raise ValueError(f"need 2 <= start <= cap and ratio > 1, got start={start}, cap={cap}, ratio={ratio}")
    looks = [start]
    while (following := max(looks[-1] + 1, math.ceil(looks[-1] * ratio))) * ratio <= cap:
        looks.append(following)
    return tuple(looks) if looks[-1] == cap else (*looks, cap)


def spending(looks: Sequence[int]) -> tuple[float, ...]:
    """Each look's share of ALPHA: the fraction of the cap's seeds it adds (3 to 30: 0.1, 0.067, ..., 0.4).

    Spending in proportion to the seeds is a middle way between equal shares (more early decisions,
    less power at the cap) and shares growing faster (O'Brien-Fleming-like: a t-test at 3 seeds
    with a tiny share decides almost nothing, and the early looks are there to stop early).
    """
    return tuple((b - a) / looks[-1] for a, b in pairwise((0, *looks)))


@dataclass(frozen=True)
class LookResult:
    """One check at one look: its two-sided p-value, the side it points to, its n."""

    p: float
    side: Outcome
    n: int


def look_result(check: Check) -> LookResult:
    p, side = check.p_value()
    return LookResult(p, side, check.estimate.n)


@dataclass(frozen=True)
class Status:
    """A check after the looks so far; a decided one is as it was at the look that decided it."""

    label: str
    side: Outcome  # HOLDS or FAILS once decided, else UNDECIDED
    look: int  # index into Plan.looks: the deciding look, or the latest one
    n: int  # seeds (or pairs) of the check at that look
    p_seq: float  # sequential p-value: min over its looks of p / share
    level: float  # the level of the side it points to (its claim's); decided when p_seq < level
    more_seeds: bool  # undecided and the cap not reached: its groups need the next look's seeds
    cap: int

    key: Key | None = None  # the check's key (`Check.key`): decisions.csv's check_id

    @property
    def decided(self) -> bool:
        return self.side.decided

    def words(self) -> str:
        """ "holds (decided at 8 seeds)", "undecided after 8 seeds", "undecided at the 30-seed cap"."""
        if self.side.decided:
            return f"{self.side.words.check} (decided at {self.n} seeds)"
        if self.more_seeds:
            return f"undecided after {self.n} seeds"
        return f"undecided at the {self.cap}-seed cap"


def decide(plan: Plan, history: Sequence[Sequence[Check]]) -> tuple[Status, ...]:
    """Every check's status after the looks so far; history[k] is the family's checks at look k.

    Every look must hold the same checks (`Check.ident` and region) in the same order. A decided check's
    later entries are not read, so a look may repeat the check as it was when decided.
    """
    if history:
        first = [(c.ident, c.low, c.high) for c in history[0]]
        if any([(c.ident, c.low, c.high) for c in look] != first for look in history):
            raise ValueError("every look must hold the same checks, with the same regions, in the same order")
    labels = [c.label for c in history[0]] if history else []
    levels = [(c.level_holds, c.level_fails) for c in history[0]] if history else []
    statuses = decide_looks(plan, labels, [[look_result(c) for c in look] for look in history], levels)
    keys = [c.key for c in history[0]] if history else []
    return tuple(dataclasses.replace(s, key=k) for s, k in zip(statuses, keys, strict=True))


def decide_looks(
    plan: Plan,
    labels: Sequence[str],
    history: Sequence[Sequence[LookResult]],
    levels: Sequence[tuple[float, float]] | None = None,
) -> tuple[Status, ...]:
    """`decide` on the checks' readings (p-value, side, n), history[k][i] being check i at look k; levels[i] is
    check i's (holds, fails) levels (ALPHA for both where not given).
    """
    looks, m = len(history), len(labels)
    if not 1 <= looks <= len(plan.looks) or any(len(look) != m for look in history):
        raise ValueError(f"need 1 to {len(plan.looks)} looks of {m} readings each, got {looks} looks")
    levels = list(levels) if levels is not None else [(ALPHA, ALPHA)] * m
    best = [math.inf] * m  # the smallest p / share so far
    gave = [0] * m  # the look that gave it, the earliest on ties
    bank = [0.0] * m  # the share of the check's current test: looks that added it no seeds join the last one's
    p_seq = [1.0] * m
    decided_at: list[int | None] = [None] * m
    for k, look in enumerate(history):
        for i, r in enumerate(look):
            if decided_at[i] is not None:  # a decided check is frozen: its later looks are not read
                continue
            same = k > 0 and r.n == history[k - 1][i].n and r.n > 0
            bank[i] = bank[i] + plan.shares[k] if same else plan.shares[k]
            ratio = (r.p if math.isfinite(r.p) else 1.0) / bank[i]
            if ratio < best[i]:
                best[i], gave[i] = ratio, k
            p_seq[i] = min(1.0, best[i])
            side = history[gave[i]][i].side
            if side.decided and p_seq[i] < _level(levels[i], side):
                decided_at[i] = k
    more = looks < len(plan.looks)
    statuses = []
    for i, label in enumerate(labels):
        at = decided_at[i]
        side = Outcome.UNDECIDED if at is None else history[gave[i]][i].side
        k = looks - 1 if at is None else at
        level = _level(levels[i], history[gave[i]][i].side)
        statuses.append(Status(label, side, k, history[k][i].n, p_seq[i], level, more and at is None, plan.cap))
    return tuple(statuses)


def _level(levels: tuple[float, float], side: Outcome) -> float:
    holds, fails = levels
    return holds if side is Outcome.HOLDS else fails
