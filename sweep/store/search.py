"""The learning-rate-search lifecycle: each search's study, its trial slots, drawing a trial's lr,
the best lr of a finished search, and its tuned re-runs. No TensorFlow.

A search (the grid file's ``search:``) is one study per grid point, ``<sweep>:lr_search:<group>``,
listed in the sweep study's user attribute ``lr_searches`` with its settings, so a worker on
another machine finds it without the grid file. Its slots are enqueued like runs (``run_id`` =
``<group>-t<k>``); the worker that claims one draws ``lr`` with the study's sampler
(``trial.suggest_float``, so Optuna's dashboard shows lr against the metric) and the trial may
end PRUNED. Its objective is the search's metric (``search.metric``, e.g. ``val_acc_recal``) read
from each record (`queue.record_epoch` reports it, `endings.end_run` ends the trial with it). The
best lr of a finished search is re-run at every seed in the sweep study, as runs with ``role`` =
``tuned``.

A finished search whose best lr sits at an edge of its range (`sweep.config.lr_range`) is widened before
its best lr is re-run: the range reaches a decade past that edge, kept on the search's study
(``lr_ranges``, every range it drew from, the grid's first), and half as many trials again are
queued, drawn by the same sampler from the wider range; at most ``search.widen`` times. The searches of a
sweep go in rounds: they widen only once every one has settled, and a round gives every search the same
trials (``lr_rounds``; those inside their range draw them there), so every point is tuned with the same
number of trials, and no best lr is re-run until every search has settled with none to widen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from sweep import vocab
from sweep.base.seeds import derive_seed
from sweep.config import SEARCH_METRICS, lr_range
from sweep.config.plan import RunSpec, SearchGroup, at_lr
from sweep.store import queue
from sweep.vocab import RunStatus

SEARCHES_ATTR = "lr_searches"  # on the sweep study: group id -> the search's settings, for every worker
SETTINGS = ("lr_low", "lr_high", "lr_log", "trials", "metric", "seed", "prune", "widen")
LR_PARAM = "lr"
TIE_BREAKERS = {
    "val_acc": "val_loss",
    "val_loss": "val_acc",
    "val_acc_recal": "val_loss_recal",
    "val_loss_recal": "val_acc_recal",
}
RANGES_ATTR = "lr_ranges"  # on a search's study: every range it drew from, the grid's first
ROUNDS_ATTR = "lr_rounds"  # on a search's study: the rounds of extra trials queued (widened or not)


@dataclass(frozen=True)
class Search:
    """A learning-rate search as workers see it: its study and settings."""

    group_id: str
    study: optuna.Study
    settings: dict[str, Any]  # SETTINGS, and the study's name

    def sample_lr(self, trial: optuna.Trial) -> float:
        """Draw this trial's lr with TPE, seeded per trial so a search is reproducible.

        TPE (Optuna's default sampler) models good and bad learning rates separately;
        it needs a few observations first, so the first half of the trials are random
        (log-uniform). A Gaussian process would suit a 1-D search of ~8 trials as well,
        but Optuna's GPSampler needs PyTorch. constant_liar keeps parallel workers from
        drawing the same lr while earlier trials are still running.
        """
        s = self.settings
        self.study.sampler = optuna.samplers.TPESampler(
            n_startup_trials=max(1, s["trials"] // 2),
            constant_liar=True,
            seed=derive_seed(s["seed"], "lr_search", self.group_id, trial.number),
        )
        low, high = self.lr_range
        return trial.suggest_float(LR_PARAM, low, high, log=s["lr_log"])

    def ranges(self) -> list[tuple[float, float]]:
        """Every range this search drew from: the grid's, then each widening's."""
        kept = self.study.user_attrs.get(RANGES_ATTR) or [(self.settings["lr_low"], self.settings["lr_high"])]
        return [(float(lo), float(hi)) for lo, hi in kept]

    @property
    def lr_range(self) -> tuple[float, float]:
        """The range trials are drawn from now: the last widening's, or the grid's."""
        return self.ranges()[-1]

    def start(self, lease: queue.Lease) -> queue.Lease:
        """A claimed slot becomes a run: draw its lr, and keep the run's own spec on the trial."""
        spec = at_lr(lease.spec, self.sample_lr(lease.trial))
        lease.trial.set_user_attr(queue.SPEC, spec.to_json())
        return replace(lease, spec=spec)

    def rounds(self) -> int:
        """Rounds of extra trials queued; a store from before rounds had one per widening."""
        return int(self.study.user_attrs.get(ROUNDS_ATTR, len(self.ranges()) - 1))

    def slot_ids(self) -> list[str]:
        trials = self.settings["trials"]
        total = trials + self.rounds() * lr_range.extra_trials(trials)
        return [f"{self.group_id}-t{k}" for k in range(1, total + 1)]


def settings_of(group: SearchGroup) -> dict[str, Any]:
    return {**{k: getattr(group.search, k) for k in SETTINGS}, "study": group.study_name()}


def listed(sweep: optuna.Study) -> dict[str, dict[str, Any]]:
    """group id -> settings, of every search the sweep study lists."""
    return dict(sweep.user_attrs.get(SEARCHES_ATTR, {}))


def list_searches(sweep: optuna.Study, groups: list[SearchGroup]) -> dict[str, dict[str, Any]]:
    """Record the groups' settings on the sweep study (so any worker finds them); return them all."""
    known = listed(sweep)
    known.update({g.group_id: settings_of(g) for g in groups})
    if groups:
        sweep.set_user_attr(SEARCHES_ATTR, known)
    return known


def open_search(storage: optuna.storages.BaseStorage, group_id: str, settings: dict[str, Any]) -> Search:
    """The search's study (created if new), with the search's pruner: median of earlier trials
    at the same epoch, from epoch 2 on, after 2 finished trials.
    """
    pruner = (
        optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=2)
        if settings["prune"]
        else optuna.pruners.NopPruner()
    )
    try:  # load first: on a journal, create_study(load_if_exists=True) appends a line every time
        study = optuna.load_study(study_name=settings["study"], storage=storage, pruner=pruner)
    except KeyError:
        study = optuna.create_study(
            study_name=settings["study"], storage=storage, pruner=pruner, direction=SEARCH_METRICS[settings["metric"]]
        )
    return Search(group_id, study, settings)


def enqueue_slots(search: Search, template: RunSpec) -> int:
    """A WAITING trial per slot that has none pending, running or finished."""
    slots = [(slot, template.to_json()) for slot in search.slot_ids()]
    return queue.enqueue_items(search.study, slots, {vocab.ROLE: vocab.SEARCH, vocab.SEARCH_GROUP: search.group_id})


def settled(search: Search) -> bool:
    """None of its trials is pending or running, or may come back."""
    return _settled(_latest(search))


def _latest(search: Search) -> list[FrozenTrial]:
    """The attempt that speaks for each of its slots."""
    return list(queue.latest_by_run(search.study.get_trials(deepcopy=False)).values())


def _settled(trials: list[FrozenTrial]) -> bool:
    return not any(not s.ended or s is RunStatus.INTERRUPTED for s in map(queue.status_of, trials))


def best_lr(search: Search) -> float | None:
    """The search's best lr once none of its trials is pending or running; None before (or if none finished)."""
    ranked = ranked_lrs(search)
    return ranked[0] if ranked else None


def ranked_lrs(search: Search) -> list[float]:
    """The lrs of a settled search's finished trials, best first (none before it settles)."""
    trials = _latest(search)  # read once: on a database every read is a query
    if not _settled(trials):
        return []
    complete = [t for t in trials if t.state == TrialState.COMPLETE and LR_PARAM in t.params and t.value is not None]
    metric = search.settings["metric"]
    sign = 1.0 if SEARCH_METRICS[metric] == "maximize" else -1.0  # as the study's direction
    complete.sort(key=lambda t: (sign * float(t.values[0]), _second(t, metric), -t.number), reverse=True)
    return list(dict.fromkeys(float(t.params[LR_PARAM]) for t in complete))


def _second(trial: FrozenTrial, metric: str) -> float:
    """What breaks a tie of the search's metric (common at the ceiling: several lrs at accuracy 1.0): the other
    reading of the same evaluation, the loss for an accuracy (lower is better), the accuracy for a loss; a trial
    without it ranks last among the tied. Trial order only where both are equal.
    """
    other = TIE_BREAKERS[metric]
    records = queue.epochs_of(trial)
    value = records[-1].get(other) if records else None
    if value is None:
        return -math.inf
    return -float(value) if SEARCH_METRICS[other] == "minimize" else float(value)


def widen(search: Search) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """Widen a finished search whose best lr sits at an edge of its range, if `widen` allows another:
    record the wider range and return (old range, new range); the caller queues the new slots.
    None when the search is unfinished, its best lr is inside the range, or its widenings are spent.
    """
    best = best_lr(search)
    ranges = search.ranges()
    if best is None or len(ranges) > search.settings.get("widen", 0):
        return None
    drawn = [t.params[LR_PARAM] for t in search.study.get_trials(deepcopy=False) if LR_PARAM in t.params]
    low, high = ranges[-1]
    side = lr_range.edge_side(best, drawn, low, high)
    if not side:
        return None
    new = lr_range.widened(low, high, side)
    search.study.set_user_attr(RANGES_ATTR, [list(r) for r in (*ranges, new)])
    return (low, high), new


def set_rounds(search: Search, rounds: int) -> None:
    """The rounds of extra trials it has now (the caller queues their slots)."""
    search.study.set_user_attr(ROUNDS_ATTR, rounds)
