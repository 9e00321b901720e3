"""`sweep run GRID --until-decided --max-seeds N`: train the grid, then add seeds only where checks are undecided.

The statistics are `sweep.analysis.sequential`'s (planned looks, alpha spent over them, each claim's levels);
this module decides which runs each look needs and trains them through `orchestrate.train_runs`.

- The plan is `Plan.between(len(grid.seeds), N)`. Seed values come in one fixed order: the grid's seeds
  sorted, then max + 1, max + 2, ... (new values, never re-used), so the first `looks[k]` seeds of a point
  are always the same list.
- Look k's checks are `claims.evaluate` on the claims' run summary (`health.claims_summary`, as the
  report builds it: runs at chance in it) restricted to the runs of the first `looks[k]` seeds. The family
  is every check of every claim with a finding that can answer at the first look, fixed for the whole
  sweep; a check missing at a later look counts there as a check without a p-value (p = 1).
- After look k, the grid points read by every claim with a check that needs more seeds
  (`Status.more_seeds`: the runs in its `Finding.run_ids`) get look k + 1's seeds. That choice reads
  looks <= k only, and a look is used only when all its runs are finished (done or diverged), so a
  killed sweep, run again, recomputes the same looks from the store and trains only what is missing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pandas as pd

from sweep import analysis, vocab
from sweep.analysis import decisions, health
from sweep.analysis.estimates import Check, Estimate
from sweep.analysis.selection import seed_count
from sweep.analysis.sequential import Plan, Status, decide
from sweep.config import GridFile
from sweep.config.plan import RunSpec, plan
from sweep.run.orchestrate import (
    EXIT_FAILED,
    EXIT_OK,
    Console,
    Ended,
    Options,
    UsageError,
    run_sweep,
    train_runs,
    worker_session,
    write_report,
)
from sweep.run.stores import locations, open_store
from sweep.store import status_of

if TYPE_CHECKING:
    from sweep.train.session import Session

DEFAULT_MAX_SEEDS = 30
PLAN_ATTR = "until_decided_plan"  # the sweep study's record of the plan, so a resumed sweep keeps it


def check_input(grid: GridFile, max_seeds: int) -> None:
    """UsageError (one line) when the grid and the cap cannot make a plan; called before anything is written."""
    if grid.search is not None:
        raise UsageError(
            f"{grid.source}: --until-decided with a learning-rate search (search:) is not supported yet; "
            "remove the search: block or run without --until-decided"
        )
    if max_seeds < len(grid.seeds):
        raise UsageError(
            f"--max-seeds {max_seeds}: must be at least the grid's {len(grid.seeds)} seeds ({list(grid.seeds)})"
        )


def seed_order(seeds: Sequence[int], cap: int) -> tuple[int, ...]:
    """The seed values in the order looks take them: the grid's sorted, then new values above the largest."""
    first = sorted(seeds)
    return (*first, *range(first[-1] + 1, first[-1] + 1 + cap - len(first)))


@dataclass(frozen=True)
class Layout:
    """The plan and every run it could train: runs[i][j] is grid point i at order[j]."""

    plan: Plan
    order: tuple[int, ...]
    runs: tuple[tuple[RunSpec, ...], ...]

    @classmethod
    def of(cls, grid: GridFile, cap: int) -> Layout:
        order = seed_order(grid.seeds, cap)
        specs = plan(replace(grid, seeds=order))  # the ids a grid file with these seeds would give
        width = len(order)
        return cls(
            Plan.between(len(grid.seeds), cap),
            order,
            tuple(tuple(specs[i : i + width]) for i in range(0, len(specs), width)),
        )

    def point_of(self) -> dict[str, int]:
        """spec hash -> grid point index."""
        return {spec.spec_hash: i for i, runs in enumerate(self.runs) for spec in runs}

    def hashes_at(self, k: int) -> set[str]:
        """The spec hashes of every run look k may read: every point at the first looks[k] seeds."""
        return {spec.spec_hash for runs in self.runs for spec in runs[: self.plan.looks[k]]}

    def new_runs(self, points: Sequence[int], k: int) -> list[RunSpec]:
        """Look k's added runs at the given points: their seeds looks[k - 1] .. looks[k] - 1 of the order."""
        start, stop = self.plan.looks[k - 1], self.plan.looks[k]
        return [spec for i in sorted(points) for spec in self.runs[i][start:stop]]


@dataclass(frozen=True)
class Look:
    """The decisions after looks 0..k, and which points the next look's seeds go to."""

    index: int
    claims: tuple[str, ...]  # the claim of each status
    statuses: tuple[Status, ...]
    grow: tuple[int, ...]  # point indices that get look index + 1's seeds (empty: stop)

    @property
    def open(self) -> list[tuple[str, Status]]:
        return [(c, s) for c, s in zip(self.claims, self.statuses, strict=True) if s.more_seeds]


def evaluate_at(table: pd.DataFrame, layout: Layout, k: int) -> dict[str, tuple[tuple[Check, ...], tuple[str, ...]]]:
    """claim id -> (its checks, the run ids it read) at look k, for the claims with a finding there that can
    answer (a claim whose control arm did not learn gets no seeds: more runs at chance compare nothing).
    """
    from sweep.claims.registry import evaluate

    if not table.empty:
        table = table[analysis.spec_hash(table[vocab.RUN_ID]).isin(layout.hashes_at(k))]
    return {claim.id: (f.checks, f.run_ids) for claim, f in evaluate(table) if f is not None and not f.cannot_answer()}


def look(table: pd.DataFrame, layout: Layout, k: int) -> Look:
    """Decide after looks 0..k from the claims' run summary `table` (it may hold later looks' runs: unread)."""
    per_look = [evaluate_at(table, layout, j) for j in range(k + 1)]
    family = [(claim, check) for claim, (checks, _) in per_look[0].items() for check in checks]
    if not family:
        return Look(k, (), (), ())
    history = [[_same_check(found, claim, check) for claim, check in family] for found in per_look]
    statuses = decide(layout.plan, history)
    claims = tuple(claim for claim, _ in family)
    needing = {claim for claim, s in zip(claims, statuses, strict=True) if s.more_seeds}
    point_of = layout.point_of()
    grow = {
        point_of[h]
        for claim in needing
        for h in analysis.spec_hash(pd.Series(_read_by(per_look, claim), dtype=object))
        if h in point_of
    }
    return Look(k, claims, statuses, tuple(sorted(grow)))


def _same_check(found: dict[str, tuple[tuple[Check, ...], tuple[str, ...]]], claim: str, first: Check) -> Check:
    """The family member `first` at a look: the claim's check with its key and region, else one without a p-value."""
    for check in found.get(claim, ((), ()))[0]:
        if (check.ident, check.low, check.high) == (first.ident, first.low, first.high):
            return check
    return replace(first, estimate=Estimate(math.nan, math.nan, 0, math.nan, math.nan))


def _read_by(per_look: list[dict[str, tuple[tuple[Check, ...], tuple[str, ...]]]], claim: str) -> tuple[str, ...]:
    """The runs the claim read at the latest look where it had a finding."""
    return next((found[claim][1] for found in reversed(per_look) if claim in found), ())


# --- the loop


def run_until_decided(
    grid: GridFile,
    options: Options | None = None,
    max_seeds: int = DEFAULT_MAX_SEEDS,
    console: Console | None = None,
    session: Session | None = None,
) -> Ended:
    """Train the grid, then each planned look's seeds at the points whose claims are undecided; write
    decisions.csv and looks.csv, then the report. In this process, every look trains in one worker
    session (`orchestrate.run_sweep`'s `session`).
    """
    options, console = options or Options(), console or Console()
    session = worker_session(options, session)
    if len(grid.seeds) == 1:  # a t-test needs two: the next seed joins the first look
        grid = replace(grid, seeds=seed_order(grid.seeds, 2))
        console.say(f"{grid.name}: one seed in the grid file; until decided starts from two, {list(grid.seeds)}")
    check_input(grid, max_seeds)
    layout = Layout.of(grid, max_seeds)
    results, target = locations(grid, options)
    _check_plan(grid, target, layout.plan)
    looks = " -> ".join(str(n) for n in layout.plan.looks)
    console.say(f"{grid.name}: until decided, seeds per setting {looks} (the cap), new seeds {_seeds_text(layout)}")
    outcome = run_sweep(grid, replace(options, report=None), console, session)
    if outcome.exit_code:
        console.warn("the grid's runs are not all finished; run the same command again before any seeds are added")
        return outcome
    store = open_store(target, grid.name, create=False)
    store.sweep.set_user_attr(PLAN_ATTR, list(layout.plan.looks))
    trained = outcome.trained
    rows = []
    k = 0
    points = len(layout.runs)
    while True:
        table = health.claims_summary(analysis.load([results]))
        now = look(table, layout, k)
        added = layout.new_runs(now.grow, k + 1) if now.grow else []
        rows.append(_look_row(layout, now, points))
        console.say(_progress(layout, now, len(added)))
        if not added:
            break
        code, done = train_runs(store, added, options, results, console, session)
        trained += done
        current = store.current()
        unfinished = [s.run_id for s in added if s.run_id not in current or not status_of(current[s.run_id]).final]
        if code or unfinished:
            console.warn(
                f"{len(unfinished)} run(s) of look {k + 2} not finished; the next look needs all of them: "
                "run the same command again"
            )
            return replace(outcome, exit_code=EXIT_FAILED, trained=trained)
        k, points = k + 1, len(now.grow)
    paths = decisions.write(results, layout.plan, now.claims, now.statuses, rows)
    for claim, status in zip(now.claims, now.statuses, strict=True):
        console.say(f"  {claim} {status.label}: {status.words()}")
    console.say(f"decisions: {paths[0]} and {paths[1]}")
    runs_csv, epochs_csv = store.export_csv(results)
    written = write_report(results, options.report, console) if options.report else None
    return replace(
        outcome,
        exit_code=EXIT_OK,
        counts=store.counts(),
        runs_csv=runs_csv,
        epochs_csv=epochs_csv,
        report_md=written[0] if written else None,
        report_html=written[1] if written else None,
        trained=trained,
    )


def _check_plan(grid: GridFile, target: str, plan_: Plan) -> None:
    """A sweep started with another plan (another --max-seeds) must keep it: its looks were spent on it."""
    from pathlib import Path

    from sweep.store import storage

    if not storage.is_database(target) and not Path(target).exists():
        return
    try:
        store = open_store(target, grid.name, create=False)
    except UsageError:
        return  # no such sweep yet: run_sweep starts it, or says why not
    with store:
        recorded = store.sweep.user_attrs.get(PLAN_ATTR)
    if recorded is not None and tuple(recorded) != plan_.looks:
        raise UsageError(
            f"{grid.name} was started until decided with looks at {recorded[0]}..{recorded[-1]} seeds "
            f"(--max-seeds {recorded[-1]}); rerun with --max-seeds {recorded[-1]}: a plan cannot change once its "
            "looks have been spent"
        )


def _seeds_text(layout: Layout) -> str:
    start, cap = layout.plan.looks[0], layout.plan.cap
    new = layout.order[start:cap]
    if not new:
        return "none (the cap is the grid's seed count)"
    return f"{new[0]}..{new[-1]}" if len(new) > 2 else " and ".join(str(s) for s in new)


def _look_row(layout: Layout, now: Look, points: int) -> decisions.LookRow:
    """Look k as a row of looks.csv: the seeds it added (at the first look, the grid's) and at how many points."""
    plan_, k = layout.plan, now.index
    added = layout.order[plan_.looks[k - 1] if k else 0 : plan_.looks[k]]
    return decisions.LookRow(k, plan_.looks[k], plan_.shares[k], added, points, points * len(added), len(now.open))


def _progress(layout: Layout, now: Look, adding: int) -> str:
    """ "look 2 of 6 (5 seeds): 3 checks open: C1 gap ... (5 seeds), ...; training 8 more runs (8 seeds)"."""
    plan_, k = layout.plan, now.index
    head = f"look {k + 1} of {len(plan_.looks)} ({plan_.looks[k]} seeds)"
    if not now.statuses:
        return f"{head}: no claim can be checked on these runs; nothing to decide"
    opened = now.open
    if not opened:
        undecided = sum(not s.decided for s in now.statuses)
        tail = f"{undecided} undecided at the {plan_.cap}-seed cap" if undecided else "every check decided"
        return f"{head}: {tail}; done"
    listed = ", ".join(f"{claim} {s.label} ({seed_count(s.n)})" for claim, s in opened)
    return (
        f"{head}: {len(opened)} check(s) open: {listed}; training {adding} more run(s) at {len(now.grow)} "
        f"point(s) ({plan_.looks[k + 1]} seeds)"
    )
