"""Seeds until decided (issue 14): the look schedule, alpha spending over looks (a look that adds a check no
seeds spends nothing), each claim's levels, and the false-decision rate under optional stopping, simulated
(pure statistics, no training).

Monte Carlo error is allowed for explicitly: a rate "stays at or below ALPHA" when the upper end of
its one-sided 99% Clopper-Pearson interval is <= ALPHA, so an observed rate just under ALPHA is not
enough; "clearly above" means the lower end of that interval is above 2 x ALPHA.
"""

from __future__ import annotations

import math
from functools import cache
from itertools import pairwise

import numpy as np
import pytest
from scipy import stats
from scipy.special import stdtr

from sweep.analysis.estimates import ALPHA, Check, estimate
from sweep.analysis.outcome import Outcome
from sweep.analysis.sequential import LookResult, Plan, Status, decide, decide_looks, look_result, schedule, spending

pytestmark = pytest.mark.unit

PLAN = Plan.between(3, 30)
REPLICATIONS = 20_000


def upper99(events: int, trials: int) -> float:
    return 1.0 if events == trials else float(stats.beta.ppf(0.99, events + 1, trials - events))


def lower99(events: int, trials: int) -> float:
    return 0.0 if events == 0 else float(stats.beta.ppf(0.01, events, trials - events + 1))


def t_readings(x: np.ndarray, bound: float) -> tuple[np.ndarray, np.ndarray]:
    """The check "mean > bound" at every look of PLAN, vectorised: x (..., seeds) -> p, side (..., looks).

    The same t-test as `Check.p_value` (twice the smaller one-sided p; side True: holds).
    """
    ps, sides = [], []
    for n in PLAN.looks:
        y = x[..., :n]
        t = (y.mean(axis=-1) - bound) / (y.std(axis=-1, ddof=1) / math.sqrt(n))
        holds, fails = stdtr(n - 1, -t), stdtr(n - 1, t)
        ps.append(np.minimum(1.0, 2 * np.minimum(holds, fails)))
        sides.append(holds < fails)
    return np.stack(ps, axis=-1), np.stack(sides, axis=-1)


SIDE = {True: Outcome.HOLDS, False: Outcome.FAILS}  # the simulation's side (True: holds) as an outcome


def run_procedure(
    p: np.ndarray, side: np.ndarray, levels: list[tuple[float, float]] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Every replication through `decide_looks` over all of PLAN's looks: p, side (reps, checks, looks)
    -> the decided side (1 holds, 0 fails, -1 undecided) and the seeds at the deciding look, (reps, checks).
    """
    reps, m, looks = p.shape
    labels = [f"c{i}" for i in range(m)]
    decided, seeds = np.full((reps, m), -1), np.zeros((reps, m), dtype=int)
    p_list, side_list = p.tolist(), side.tolist()
    for r in range(reps):
        history = [
            [LookResult(p_list[r][i][k], SIDE[side_list[r][i][k]], PLAN.looks[k]) for i in range(m)]
            for k in range(looks)
        ]
        for i, status in enumerate(decide_looks(PLAN, labels, history, levels)):
            if status.decided:
                decided[r, i], seeds[r, i] = int(status.side is Outcome.HOLDS), status.n
    return decided, seeds


@cache
def boundary_single() -> tuple[np.ndarray, np.ndarray]:
    """One check whose true mean lies exactly on its threshold (the hardest null): its p, side, decisions."""
    x = np.random.default_rng(14).normal(0.0, 1.0, size=(REPLICATIONS, 1, PLAN.cap))
    p, side = t_readings(x, bound=0.0)
    return p, run_procedure(p, side)[0]


def test_schedule_grows_about_one_and_a_half_per_look_and_ends_at_the_cap() -> None:
    assert schedule(3, 30) == (3, 5, 8, 12, 18, 30)
    assert schedule(2, 30) == (2, 3, 5, 8, 12, 18, 30)
    assert schedule(3, 3) == (3,) and schedule(2, 3) == (2, 3)
    for start in range(2, 12):
        for cap in range(start, 80):
            looks = schedule(start, cap)
            assert looks[0] == start and looks[-1] == cap and all(b > a for a, b in pairwise(looks))
            shares = spending(looks)
            assert min(shares) > 0 and sum(shares) == pytest.approx(1.0)
    assert PLAN.shares == pytest.approx((3 / 30, 2 / 30, 3 / 30, 4 / 30, 6 / 30, 12 / 30))
    for start, cap in ((1, 30), (5, 4)):
        with pytest.raises(ValueError):
            schedule(start, cap)


def test_sequential_p_is_the_smallest_p_over_share_so_far() -> None:
    # shares 0.1, 0.0667, 0.1: p / share = 0.2, 0.15, 0.5 -> 0.2, 0.15, 0.15
    history = [[LookResult(p, Outcome.HOLDS, n)] for p, n in ((0.02, 3), (0.01, 5), (0.05, 8))]
    assert [decide_looks(PLAN, ["c"], history[:k])[0].p_seq for k in (1, 2, 3)] == pytest.approx([0.2, 0.15, 0.15])
    assert decide_looks(PLAN, ["c"], [[LookResult(math.nan, Outcome.UNDECIDED, 1)]])[0].p_seq == 1.0  # no p-value yet


def test_a_null_check_is_decided_at_most_alpha_of_the_time_under_optional_stopping() -> None:
    _, decided = boundary_single()
    false = int((decided[:, 0] >= 0).sum())  # on the threshold, either decision is wrong
    assert upper99(false, REPLICATIONS) <= ALPHA, (false / REPLICATIONS, upper99(false, REPLICATIONS))
    # a mean deep in the "fails" region (1 sd below the threshold): deciding "holds" is the error
    x = np.random.default_rng(15).normal(-1.0, 1.0, size=(REPLICATIONS, 1, PLAN.cap))
    decided, _ = run_procedure(*t_readings(x, bound=0.0))
    wrong = int((decided[:, 0] == 1).sum())
    assert upper99(wrong, REPLICATIONS) <= ALPHA, wrong / REPLICATIONS
    assert (decided[:, 0] == 0).mean() > 0.9  # and it is decided the right way almost always


def test_naive_repeated_testing_at_plain_alpha_is_decided_far_more_often_than_alpha() -> None:
    p, decided = boundary_single()
    naive = int((p[:, 0, :] < ALPHA).any(axis=1).sum())  # every look tested at 0.05
    assert lower99(naive, REPLICATIONS) > 2 * ALPHA, naive / REPLICATIONS
    procedure = int((decided[:, 0] >= 0).sum())  # the same data through the spending rule
    assert procedure < naive / 3, (procedure / REPLICATIONS, naive / REPLICATIONS)


def test_a_claims_two_checks_keep_its_error_rates_at_its_own_levels() -> None:
    """A claim of two checks that must both hold, sharing half their seed-to-seed variation (they read the same
    runs), at the claim's levels (holds 0.05, fails 0.025: `family.levels`). Supported wrongly: one check on
    its threshold, the other a real effect; the claim is supported only when both hold, so at most ALPHA
    (intersection-union). Contradicted wrongly: both on their thresholds (the claim is just true); one failing
    check at 0.025 contradicts it, so at most 2 x 0.025 = ALPHA (Bonferroni).
    """
    from sweep.claims.family import levels
    from sweep.claims.findings import Rule

    rng = np.random.default_rng(16)
    claim_levels = [levels([Check("a", estimate([0.0])), Check("b", estimate([0.0]))], Rule.ALL)] * 2
    assert claim_levels[0] == (0.05, 0.025)

    def correlated(means: list[float]) -> np.ndarray:
        shared = rng.normal(size=(REPLICATIONS, 1, PLAN.cap))
        own = rng.normal(size=(REPLICATIONS, 2, PLAN.cap))
        return np.array(means)[None, :, None] + math.sqrt(0.5) * shared + math.sqrt(0.5) * own

    decided, _ = run_procedure(*t_readings(correlated([0.0, 1.5]), bound=0.0), claim_levels)
    supported = (decided == 1).all(axis=1)
    assert upper99(int(supported.sum()), REPLICATIONS) <= ALPHA, supported.mean()
    assert (decided[:, 1] == 1).mean() > 0.9  # the real effect still holds
    decided, _ = run_procedure(*t_readings(correlated([0.0, 0.0]), bound=0.0), claim_levels)
    contradicted = (decided == 0).any(axis=1)
    assert upper99(int(contradicted.sum()), REPLICATIONS) <= ALPHA, contradicted.mean()


def test_a_look_that_adds_a_check_no_seeds_spends_nothing() -> None:
    """C6's timing repeats do not change between looks: the same test repeated. Its share joins the earlier one's:
    p 0.006 at 3 seeds, then again at 3, gives 0.006 / (0.1 + 0.0667) = 0.036, decided; counted as two looks it
    would stay at 0.006 / 0.1 = 0.06, undecided (by hand, PLAN's shares).
    """
    same = [[LookResult(0.006, Outcome.HOLDS, 3)], [LookResult(0.006, Outcome.HOLDS, 3)]]
    (status,) = decide_looks(PLAN, ["c"], same)
    assert status.p_seq == pytest.approx(0.006 / (3 / 30 + 2 / 30)) and status.decided
    grown = [[LookResult(0.006, Outcome.HOLDS, 3)], [LookResult(0.006, Outcome.HOLDS, 5)]]
    (status,) = decide_looks(PLAN, ["c"], grown)
    assert status.p_seq == pytest.approx(0.06) and not status.decided  # new seeds: a new test, its own share


def test_a_real_effect_is_decided_before_the_cap_in_most_replications() -> None:
    reps = 2_000
    x = np.random.default_rng(17).normal(1.0, 1.0, size=(reps, 1, PLAN.cap))  # 1 sd above the threshold
    decided, seeds = run_procedure(*t_readings(x, bound=0.0))
    early = (decided[:, 0] == 1) & (seeds[:, 0] < PLAN.cap)
    assert early.mean() > 0.8 and not (decided[:, 0] == 0).any(), (early.mean(), seeds[early, 0].mean())


def test_a_decided_check_stays_decided_and_keeps_its_direction() -> None:
    # decided "holds" at the first look (0.0001 / 0.1 = 0.001); a later look pointing the other way
    # with an even smaller p is not read
    holds, fails = Outcome.HOLDS, Outcome.FAILS
    history = [[LookResult(0.0001, holds, 3)], [LookResult(1e-9, fails, 5)], [LookResult(1e-9, fails, 8)]]
    for k in (1, 2, 3):
        (status,) = decide_looks(PLAN, ["c"], history[:k])
        assert (status.side, status.look, status.n, status.more_seeds) == (holds, 0, 3, False)
    rng = np.random.default_rng(18)
    for _ in range(200):
        means = rng.normal(0.0, 0.7, size=(3, 1))
        p, side = t_readings(means + rng.normal(size=(3, PLAN.cap)), bound=0.0)
        history = [
            [LookResult(float(p[i, k]), SIDE[bool(side[i, k])], PLAN.looks[k]) for i in range(3)] for k in range(6)
        ]
        first: dict[int, Status] = {}
        for k in range(1, 7):
            for i, status in enumerate(decide_looks(PLAN, ["a", "b", "c"], history[:k])):
                if i in first:
                    assert status == first[i]
                elif status.decided:
                    first[i] = status


def test_undecided_at_the_cap_is_said_so_and_asks_for_no_more_seeds() -> None:
    history = [[LookResult(0.9, Outcome.HOLDS, n)] for n in PLAN.looks]
    for k in range(1, 6):
        (status,) = decide_looks(PLAN, ["c"], history[:k])
        assert status.more_seeds and status.words() == f"undecided after {PLAN.looks[k - 1]} seeds"
    (status,) = decide_looks(PLAN, ["c"], history)
    assert not status.decided and not status.more_seeds
    assert status.words() == "undecided at the 30-seed cap"
    with pytest.raises(ValueError):
        decide_looks(PLAN, ["c"], [*history, history[-1]])  # more looks than planned


def stored_family(seed: int) -> dict[str, tuple[np.ndarray, float, float]]:
    """Per-seed values of a family as a results folder would hold them, with each check's region."""
    rng = np.random.default_rng(seed)
    return {
        "gap": (rng.normal(0.35, 0.1, PLAN.cap), 0.2, math.inf),
        "drop": (rng.normal(-0.02, 0.05, PLAN.cap), -math.inf, -0.1),
        "band": (rng.normal(0.003, 0.01, PLAN.cap), -0.02, 0.02),
    }


def looks_of(family: dict[str, tuple[np.ndarray, float, float]], labels: list[str]) -> list[list[Check]]:
    """The family's checks at every look, recomputed from the stored values (first n seeds)."""
    return [
        [Check(label, estimate(family[label][0][:n]), family[label][1], family[label][2]) for label in labels]
        for n in PLAN.looks
    ]


def test_the_same_stored_values_give_the_same_decisions() -> None:
    labels = ["gap", "drop", "band"]
    history = looks_of(stored_family(19), labels)
    first = decide(PLAN, history)
    decide(PLAN, looks_of(stored_family(20), labels))  # another sweep in between
    assert decide(PLAN, looks_of(stored_family(19), labels)) == first  # recomputed from the stored values
    assert decide(PLAN, history[:4]) == decide(PLAN, looks_of(stored_family(19), labels)[:4])
    shuffled = decide(PLAN, looks_of(stored_family(19), labels[::-1]))
    assert {s.label: s for s in shuffled} == {s.label: s for s in first}  # the family's order does not matter
    assert [s.words() for s in first] == [f"{side} (decided at 8 seeds)" for side in ("holds", "fails", "holds")]
    readings = [[look_result(c) for c in look] for look in history]
    assert decide_looks(PLAN, labels, readings) == first
    with pytest.raises(ValueError):  # a look whose checks are not the family's, in its order
        decide(PLAN, [history[0], history[1][::-1]])


def test_the_simulation_uses_the_checks_own_t_test() -> None:
    x = np.random.default_rng(21).normal(0.2, 1.0, size=(40, PLAN.cap))
    p, side = t_readings(x, bound=0.0)
    for r in range(40):
        for k, n in enumerate(PLAN.looks):
            got = Check("c", estimate(x[r, :n]), 0.0).p_value()
            assert got[0] == pytest.approx(p[r, k], rel=1e-9) and got[1] is SIDE[bool(side[r, k])]
