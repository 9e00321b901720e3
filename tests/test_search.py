"""Learning-rate search per grid point: the search: block, its Optuna studies, pruning, the tuned re-runs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
from conftest import REPO, sweep_here, write_grid

from sweep import analysis, cli, vocab
from sweep.analysis import tuning
from sweep.config import ConfigError, load_grid
from sweep.config.plan import search_groups
from sweep.run import resume
from sweep.store import Search, Store, status_of
from sweep.vocab import RunStatus

SEARCH_GRID = """\
    name: s
    seeds: [0, 1]
    base:
      data: {dataset: glyphs120, classes: 4, samples_per_class: 10, image_size: 12}
      train: {epochs: 2, batch_size: 8, lr: 0.001}
    grid:
      train.batch_size: [4, 8]
    search:
      lr: {low: 1e-4, high: 1e-1}
      trials: 4
      seed: 7
"""


def _grid(tmp_path: Path, text: str = SEARCH_GRID):
    return load_grid(write_grid(tmp_path, text))


# --- the search: block (no TensorFlow)


@pytest.mark.unit
def test_search_block_is_read_with_defaults(tmp_path: Path) -> None:
    search = _grid(tmp_path).search
    assert (search.lr_low, search.lr_high, search.lr_log) == (1e-4, 1e-1, True)  # 1e-4 is a number, not a string
    assert (search.trials, search.metric, search.seed, search.prune) == (4, "val_acc", 7, True)


@pytest.mark.unit
@pytest.mark.parametrize(
    "search, expected",
    [
        ("{lr: {low: 0.1, high: 0.01}}", "grid.yaml: search.lr: low must be less than high, got low=0.1, high=0.01"),
        ("{lr: {low: 0, high: 0.1}}", "grid.yaml: search.lr.low: must be a number in (0, inf), got 0"),
        (
            "{lr: {low: 1e-4, high: 0.1}, trails: 8}",
            "grid.yaml: search.trails: unknown key; did you mean 'trials'? "
            "valid keys: lr, trials, metric, seed, data_seed, prune, widen, rerun",
        ),
        (
            "{lr: {low: 1e-4, high: 0.1}, metric: acc}",
            "grid.yaml: search.metric: must be one of val_acc | val_loss | val_acc_recal | val_loss_recal, got 'acc'; "
            "did you mean 'val_acc'?",
        ),
        (
            "{trials: 8}",
            "grid.yaml: search: must be a mapping with at least lr: {low, high}, "
            "e.g. {lr: {low: 1e-4, high: 1e-1}, trials: 8}; got {'trials': 8}",
        ),
    ],
)
def test_bad_search_blocks_get_one_precise_line(tmp_path: Path, search: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_grid(write_grid(tmp_path, f"name: x\nsearch: {search}\n"))
    assert str(err.value) == expected


RECAL_SEARCH = "search: {lr: {low: 1e-4, high: 0.1}, metric: val_acc_recal}\n"


@pytest.mark.unit
@pytest.mark.parametrize(
    "grid, where",
    [
        ("", "base"),
        ("base: {train: {recalibrate_bn: false}}\n", "base"),
        ("grid: {train.recalibrate_bn: [true, false]}\n", "grid point train.recalibrate_bn=False"),
    ],
)
def test_a_recalibrated_search_metric_needs_recalibrate_bn(tmp_path: Path, grid: str, where: str) -> None:
    """val_acc_recal is in a run's records only with train.recalibrate_bn: true: refused at load, not after training."""
    with pytest.raises(ConfigError) as err:
        load_grid(write_grid(tmp_path, f"name: x\n{grid}{RECAL_SEARCH}"))
    assert str(err.value) == (
        f"grid.yaml: search.metric: val_acc_recal is recorded only with train.recalibrate_bn: true, which {where} "
        "does not set; set it, or use val_acc | val_loss"
    )
    fine = load_grid(write_grid(tmp_path, f"name: x\nbase: {{train: {{recalibrate_bn: true}}}}\n{RECAL_SEARCH}"))
    assert fine.search is not None and fine.search.metric == "val_acc_recal"


@pytest.mark.unit
def test_cli_plan_refuses_a_recalibrated_search_metric_without_recalibrate_bn_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    write_grid(tmp_path, "name: x\nsearch: {lr: {low: 1e-4, high: 0.1}, metric: val_loss_recal}\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["plan", "grid.yaml"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (
        "error: grid.yaml: search.metric: val_loss_recal is recorded only with train.recalibrate_bn: true, which "
        "base does not set; set it, or use val_acc | val_loss\n"
    )


@pytest.mark.unit
def test_the_searched_lr_cannot_also_be_varied_or_scaled(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="train.lr is tuned by search.lr; remove it from grid"):
        load_grid(
            write_grid(tmp_path, "name: x\ngrid: {train.lr: [0.1, 0.01]}\nsearch: {lr: {low: 1e-4, high: 0.1}}\n")
        )
    with pytest.raises(ConfigError, match="train.lr_scaling must be none with search"):
        load_grid(
            write_grid(
                tmp_path,
                "name: x\nbase: {train: {lr_scaling: sqrt, reference_batch_size: 8}}\n"
                "search: {lr: {low: 1e-4, high: 0.1}}\n",
            )
        )


@pytest.mark.unit
def test_one_search_per_point_with_ids_that_survive_more_trials(tmp_path: Path) -> None:
    grid = _grid(tmp_path)
    groups = search_groups(grid)
    assert [g.template.point.train.batch_size for g in groups] == [4, 8]
    assert all(g.template.seed == 7 for g in groups)
    more = search_groups(
        _grid(tmp_path, SEARCH_GRID.replace("trials: 4", "trials: 6").replace("lr: 0.001", "lr: 0.003"))
    )
    assert [g.group_id for g in more] == [g.group_id for g in groups]  # more trials continue the same search
    wider = search_groups(_grid(tmp_path, SEARCH_GRID.replace("high: 1e-1", "high: 1")))
    assert {g.group_id for g in wider}.isdisjoint(g.group_id for g in groups)
    tuned = groups[1].tuned_runs(0.0123, (0, 1))
    assert [(r.seed, r.point.train.lr, r.point.train.batch_size) for r in tuned] == [(0, 0.0123, 8), (1, 0.0123, 8)]
    assert tuned[0].run_id.startswith("bs8-lr0.0123-s0-")


@pytest.mark.unit
def test_a_search_on_held_out_data_draws_its_trials_there_and_reruns_the_best_on_the_grids_data(
    tmp_path: Path,
) -> None:
    """search.data_seed: the trials train on another split (other images of a built-in dataset), so the lr is not
    chosen on the validation images its re-runs are read on; without it every id is what it was (the committed
    lr_search results' search groups are the ones its grid plans today).
    """
    grid = _grid(tmp_path, SEARCH_GRID + "      data_seed: 100\n")
    groups = search_groups(grid)
    store = _store(tmp_path)
    store.register_searches(groups)
    slot = store.start(store.claim_next())
    assert slot.spec.point.data.seed == 100 and slot.spec.seed == 7
    assert [r.point.data.seed for r in groups[0].tuned_runs(0.01, (0, 1))] == [0, 0]
    plain = search_groups(_grid(tmp_path))
    assert all(g.slot_template == g.template for g in plain)
    assert {g.group_id for g in plain}.isdisjoint(g.group_id for g in groups)  # a search of other data is another
    committed = pd.read_csv(REPO / "results" / "lr_search" / vocab.RUNS_CSV)[vocab.SEARCH_GROUP].dropna()
    planned = search_groups(load_grid(REPO / "experiments" / "lr_search.yaml"))
    assert {g.group_id for g in planned} == set(committed)


# --- the store: a real journal, trials finished by hand (no TensorFlow)


def _store(tmp_path: Path, name: str = "j") -> Store:
    return Store.open(tmp_path / f"{name}.log", "s")


def _finish_slot(store: Store, search: Search, value: float) -> float:
    """Claim the search's next slot through the store (the sweep's own queue is empty), finish it."""
    lease = store.start(store.claim_next())
    assert lease.search is search
    for epoch in (1, 2):
        store.record_epoch(lease, {vocab.EPOCH: epoch, vocab.STEP: epoch, lease.metric: value})
    store.finish(lease, RunStatus.DONE, value=value)
    return lease.spec.point.train.lr


@pytest.mark.unit
def test_searches_enqueue_once_sample_in_range_and_pick_the_best(tmp_path: Path) -> None:
    from sweep.store.search import best_lr

    grid, store = _grid(tmp_path), _store(tmp_path)
    groups = search_groups(grid)
    searches = store.register_searches(groups)
    store.register_searches(groups)  # again: nothing more
    assert [len(s.study.get_trials()) for s in searches] == [4, 4]
    assert len(store.search_slots()) == 8
    assert len(_store(tmp_path).searches) == 2  # a worker opening the store finds them
    search = searches[0]
    lrs = [_finish_slot(store, search, value) for value in (0.2, 0.6, 0.4)]
    assert all(1e-4 <= lr <= 1e-1 for lr in lrs) and len(set(lrs)) == 3
    assert best_lr(search) is None  # one trial still queued
    assert store.enqueue_tuned(groups, grid.seeds) == []
    last = _finish_slot(store, search, 0.1)
    assert best_lr(search) == pytest.approx(lrs[1])  # the highest val_acc
    # the other search has not settled: a round of extra trials may still come to both, so nothing is re-run yet
    assert store.enqueue_tuned(groups, grid.seeds) == []
    other = [_finish_slot(store, searches[1], value) for value in (0.3, 0.5, 0.2, 0.1)]
    tuned = store.enqueue_tuned(groups, grid.seeds)
    assert [(r.seed, r.point.train.lr) for r in tuned] == [(0, lrs[1]), (1, lrs[1]), (0, other[1]), (1, other[1])]
    assert store.enqueue_tuned(groups, grid.seeds) == tuned  # idempotent
    assert len(store.sweep.get_trials()) == 4
    table = store.runs_table()
    assert table["role"].value_counts().to_dict() == {vocab.SEARCH: 8, vocab.TUNED: 4}
    mine = table[(table.role == vocab.SEARCH) & (table.search_group == search.group_id)]
    assert sorted(mine["train.lr"]) == sorted(lrs + [last])  # each trial's row shows its own lr
    assert store.claim_next().spec.run_id == tuned[0].run_id  # the sweep's own queue comes first


@pytest.mark.unit
@pytest.mark.parametrize("metric, loss", [("val_acc", "val_loss"), ("val_loss", "val_acc")])
def test_a_tie_at_the_top_is_broken_by_the_same_evaluations_other_reading_not_trial_order(
    tmp_path: Path, metric: str, loss: str
) -> None:
    """Two trials tie on the search's metric: the one with the better other reading (lower loss for an accuracy,
    higher accuracy for a loss) is the best, though it came second; a worse trial never wins.
    """
    from sweep.store.search import best_lr

    text = SEARCH_GRID.replace("train.batch_size: [4, 8]", "train.batch_size: [8]").replace(
        "seed: 7", "seed: 7\n      metric: " + metric
    )
    grid, store = _grid(tmp_path, text), _store(tmp_path)
    (search,) = store.register_searches(search_groups(grid))
    tie = 0.6
    lrs = []
    worse = 0.4 if metric == "val_acc" else 0.8
    for value, other in ((tie, 0.9), (tie, 0.5 if metric == "val_acc" else 0.95), (worse, 0.1), (tie, 0.7)):
        lease = store.start(store.claim_next())
        store.record_epoch(lease, {vocab.EPOCH: 1, vocab.STEP: 1, metric: value, loss: other})
        store.finish(lease, RunStatus.DONE, value=value)
        lrs.append(lease.spec.point.train.lr)
    assert best_lr(search) == pytest.approx(lrs[1])


NARROW_GRID = SEARCH_GRID.replace("train.batch_size: [4, 8]", "train.batch_size: [8]").replace(
    "lr: {low: 1e-4, high: 1e-1}", "lr: {low: 1e-3, high: 1.2e-3}"
)  # every lr drawn is within 1.5x of the high end: the best of an increasing curve sits at that edge


def _finish_next(store: Store, value_of) -> float:
    """Claim the next search slot, finish it with `value_of(its lr)`; return the lr."""
    lease = store.start(store.claim_next())
    lr = lease.spec.point.train.lr
    store.finish(lease, RunStatus.DONE, value=value_of(lr))
    return lr


@pytest.mark.unit
def test_a_search_whose_best_lr_sits_at_an_edge_widens_then_reruns_the_best_inside(tmp_path: Path) -> None:
    """Best at the high edge: the range reaches a decade higher and 2 more trials (half of 4) are queued,
    drawn from it; no tuned run is queued meanwhile. Best inside the wider range: no more widening,
    the best lr is re-run, and runs.csv gives the widened range.
    """
    from sweep.store.search import best_lr

    grid, store = _grid(tmp_path, NARROW_GRID), _store(tmp_path)
    groups = search_groups(grid)
    search = store.register_searches(groups)[0]
    peaked = lambda lr: -abs(math.log(lr / 3e-3))  # noqa: E731  (val_acc peaks above the grid's range)
    first = [_finish_next(store, peaked) for _ in range(4)]
    assert best_lr(search) == max(first)  # within the range the curve rises: its highest lr is best
    assert store.widen_searches(groups) == [
        f"{search.group_id}: best lr at the edge of [0.001, 0.0012]; 2 more trial(s) over [0.001, 0.012]"
    ]
    assert store.widen_searches(groups) == []  # unfinished again: nothing more until its new trials end
    assert best_lr(search) is None and store.enqueue_tuned(groups, grid.seeds) == []
    second = [_finish_next(store, peaked) for _ in range(2)]
    assert all(1e-3 <= lr <= 1.2e-2 for lr in second) and max(second) > 1.2e-3  # drawn from the wider range
    best = max(first + second, key=peaked)
    assert best > 1.2e-3  # the widening found a better lr
    assert store.widen_searches(groups) == [] and best_lr(search) == best
    assert [r.point.train.lr for r in store.enqueue_tuned(groups, grid.seeds)] == [best, best]
    table = store.runs_table()
    searched = table[table.search_group == search.group_id]
    assert len(searched) == 8 and searched[vocab.SEARCH_LR_HIGH].tolist() == pytest.approx([1.2e-2] * 8)


@pytest.mark.unit
def test_plan_says_what_a_search_runs_and_how_it_may_widen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_grid(tmp_path, SEARCH_GRID)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["plan", "grid.yaml"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].endswith("each point's best lr is re-run at every seed: 8 search trials + 4 tuned runs")
    assert lines[-1] == (
        "a search whose best lr sits at an edge of its range reaches a decade past it with 2 more trials, "
        "and every other search as many in its own range, at most 2 time(s) (search.widen)"
    )
    write_grid(tmp_path, SEARCH_GRID + "      data_seed: 100\n      rerun: 2\n")
    assert cli.main(["plan", "grid.yaml"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-3:-1] == [
        "the trials train on data.seed 100, the re-runs on the grid's: held-out data",
        "and the 1 runner-up lr(s) of each point at every seed: 4 runner_up runs (search.rerun)",
    ]


@pytest.mark.unit
def test_a_search_with_rerun_2_reruns_its_runner_up_lr_at_every_seed_as_runner_up(tmp_path: Path) -> None:
    """The best lr's runs are role tuned, the second best's role runner_up (tied on the metric: the lower loss
    is the best); none before the search settles.
    """
    grid = _grid(
        tmp_path, SEARCH_GRID.replace("train.batch_size: [4, 8]", "train.batch_size: [8]") + "      rerun: 2\n"
    )
    store = _store(tmp_path)
    groups = search_groups(grid)
    (search,) = store.register_searches(groups)
    lrs = []
    for value, loss in ((0.5, 1.0), (0.7, 0.9), (0.7, 0.8), (0.1, 0.1)):
        assert store.enqueue_tuned(groups, grid.seeds) == []
        lease = store.start(store.claim_next())
        store.record_epoch(lease, {vocab.EPOCH: 1, vocab.STEP: 1, "val_acc": value, "val_loss": loss})
        store.finish(lease, RunStatus.DONE, value=value)
        lrs.append(lease.spec.point.train.lr)
    planned = store.enqueue_tuned(groups, grid.seeds)
    assert [(r.seed, r.point.train.lr) for r in planned] == [(0, lrs[2]), (1, lrs[2]), (0, lrs[1]), (1, lrs[1])]
    table = store.runs_table().set_index(vocab.RUN_ID)
    roles = [table.loc[r.run_id, vocab.ROLE] for r in planned]
    assert roles == [vocab.TUNED, vocab.TUNED, vocab.RUNNER_UP, vocab.RUNNER_UP]


@pytest.mark.unit
@pytest.mark.parametrize("widen, ranges", [(0, 1), (1, 2)])
def test_a_search_widens_at_most_search_widen_times(tmp_path: Path, widen: int, ranges: int) -> None:
    from sweep.store.search import best_lr

    grid = _grid(tmp_path, NARROW_GRID.replace("seed: 7", f"seed: 7\n      widen: {widen}"))
    assert grid.search is not None and grid.search.widen == widen
    store = _store(tmp_path)
    groups = search_groups(grid)
    search = store.register_searches(groups)[0]
    while store.pending([]) or store.widen_searches(groups):
        _finish_next(store, lambda lr: lr)  # always best at the high edge
    assert len(search.ranges()) == ranges and len(search.study.get_trials()) == 4 + 2 * (ranges - 1)
    assert best_lr(search) == max(t.params["lr"] for t in search.study.get_trials())


@pytest.mark.unit
def test_when_one_search_widens_every_search_gets_the_same_trials_and_nothing_is_rerun_until_all_settle(
    tmp_path: Path,
) -> None:
    """Batch 4's best lr sits at the high edge, batch 8's inside its range: both get 2 more trials (half of 4),
    batch 4's over the wider range and batch 8's in its own, so each point is tuned with 6; no best lr is re-run
    while either has a trial to come, and none widens before both have settled.
    """
    grid = _grid(tmp_path, NARROW_GRID.replace("train.batch_size: [8]", "train.batch_size: [4, 8]"))
    store = _store(tmp_path)
    groups = search_groups(grid)
    edge, inside = store.register_searches(groups)
    for _ in range(4):
        _finish_next(store, lambda lr: lr)  # batch 4's slots come first: best at the high edge
    assert store.widen_searches(groups) == []  # batch 8's search has not settled
    leases = [store.start(store.claim_next()) for _ in range(4)]
    middle = sorted(lease.spec.point.train.lr for lease in leases)[1]
    for lease in leases:  # best at the second-lowest lr drawn: inside the range
        store.finish(lease, RunStatus.DONE, value=1.0 if lease.spec.point.train.lr == middle else 0.0)
    lines = store.widen_searches(groups)
    assert lines[0].startswith(f"{edge.group_id}: best lr at the edge of [0.001, 0.0012]; 2 more trial(s)")
    assert lines[1:] == ["1 other search(es): 2 more trial(s) each in their own range, the same number"]
    assert [len(s.slot_ids()) for s in (edge, inside)] == [6, 6]
    assert len(edge.ranges()) == 2 and inside.ranges() == [(0.001, 0.0012)]
    assert store.enqueue_tuned(groups, grid.seeds) == []  # 4 trials to come
    while store.pending([]):
        _finish_next(store, lambda lr: 0.0)
    assert store.widen_searches(groups) == []  # widen: 2 allows another, but batch 4's best is no longer at an edge
    assert {r.point.train.batch_size for r in store.enqueue_tuned(groups, grid.seeds)} == {4, 8}


@pytest.mark.unit
def test_search_studies_are_opened_once_per_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read paths (counts, tables, slots) use the studies the store opened; they open nothing."""
    store = _store(tmp_path)
    store.register_searches(search_groups(_grid(tmp_path)))
    opened: list[str] = []
    create, load = optuna.create_study, optuna.load_study
    monkeypatch.setattr(optuna, "create_study", lambda **kw: opened.append(kw["study_name"]) or create(**kw))
    monkeypatch.setattr(optuna, "load_study", lambda **kw: opened.append(kw["study_name"]) or load(**kw))
    store.counts(), store.runs_table(), store.epochs_table(), store.search_slots(), store.pending([])
    assert opened == []
    journal = (tmp_path / "j.log").read_bytes()
    reader = Store.open(tmp_path / "j.log", "s", create=False)
    assert len(opened) == 3  # a new Store: the sweep study and its two searches, once each
    reader.counts(), reader.runs_table(), reader.search_slots()
    assert (tmp_path / "j.log").read_bytes() == journal  # reading a sweep writes nothing


@pytest.mark.unit
def test_the_same_history_draws_the_same_lr(tmp_path: Path) -> None:
    """Seeded per trial: two stores with the same history sample the same learning rates."""
    drawn = []
    for name in ("a", "b"):
        store = _store(tmp_path, name)
        search = store.register_searches(search_groups(_grid(tmp_path)))[0]
        drawn.append([_finish_slot(store, search, v) for v in (0.3, 0.5, 0.1, 0.2)])
    assert drawn[0] == drawn[1]


@pytest.mark.unit
def test_a_curve_below_the_median_is_pruned(tmp_path: Path) -> None:
    store = _store(tmp_path)
    search = store.register_searches(search_groups(_grid(tmp_path)))[0]
    for value in (0.5, 0.6):
        _finish_slot(store, search, value)
    lease = store.start(store.claim_next())
    store.record_epoch(lease, {vocab.EPOCH: 1, vocab.STEP: 1, vocab.VAL_ACC: 0.0})
    assert not lease.trial.should_prune()  # epoch 1 is warm-up
    store.record_epoch(lease, {vocab.EPOCH: 2, vocab.STEP: 2, vocab.VAL_ACC: 0.0})
    assert lease.trial.should_prune()
    store.finish(lease, RunStatus.PRUNED)
    assert status_of(search.study.get_trials()[2]) == RunStatus.PRUNED


RECAL_GRID = SEARCH_GRID.replace("lr: 0.001}", "lr: 0.001, recalibrate_bn: true}").replace(
    "      seed: 7", "      seed: 7\n      metric: val_acc_recal\n      prune: false"
)


@pytest.mark.unit
def test_a_search_on_val_acc_recal_chooses_on_it_not_on_raw_val_acc(tmp_path: Path) -> None:
    """The worker's own path (store.record_epoch, then endings.end_run) on records where raw val_acc and
    val_acc_recal rank the trials differently: Optuna sees val_acc_recal, and the best lr is its best.
    """
    from sweep.run import endings
    from sweep.store.search import best_lr

    grid, store = (
        _grid(tmp_path, RECAL_GRID.replace("train.batch_size: [4, 8]", "train.batch_size: [8]")),
        _store(tmp_path),
    )
    assert grid.search is not None and grid.search.metric == vocab.VAL_ACC_RECAL
    groups = search_groups(grid)
    search = store.register_searches(groups)[0]
    places = resume.Places(tmp_path / "checkpoints")
    raw, recal = (0.10, 0.30, 0.05, 0.20), (0.60, 0.40, 0.70, 0.50)  # raw picks trial 2, recal trial 3
    lrs = []
    for v, r in zip(raw, recal, strict=True):
        lease = store.start(store.claim_next())
        assert lease.search is search
        for epoch in (1, 2):
            last = {vocab.EPOCH: float(epoch), vocab.STEP: epoch, vocab.VAL_ACC: v, vocab.VAL_ACC_RECAL: r}
            store.record_epoch(lease, last)
        endings.end_run(store, lease, lambda event: None, places, endings.Ending(RunStatus.DONE, None, 2, last), None)
        lrs.append(lease.spec.point.train.lr)
    trials = search.study.get_trials()
    assert [t.value for t in trials] == list(recal)
    assert [t.intermediate_values for t in trials] == [{1: r, 2: r} for r in recal]  # what the pruner reads
    assert best_lr(search) == pytest.approx(lrs[2]) and lrs[2] != lrs[1]
    assert [r.point.train.lr for r in store.enqueue_tuned(groups, grid.seeds)] == [lrs[2], lrs[2]]
    table = store.runs_table()
    searched = table[table.search_group == search.group_id]
    assert (searched[vocab.SEARCH_METRIC] == vocab.VAL_ACC_RECAL).all() and len(searched) == 6  # trials and tuned
    assert (searched[vocab.SEARCH_LR_LOW] == 1e-4).all() and (searched[vocab.SEARCH_LR_HIGH] == 1e-1).all()


@pytest.mark.unit
def test_a_search_on_a_loss_chooses_its_lowest(tmp_path: Path) -> None:
    from sweep.store.search import best_lr

    grid = _grid(tmp_path, RECAL_GRID.replace("metric: val_acc_recal", "metric: val_loss_recal"))
    store = _store(tmp_path)
    search = store.register_searches(search_groups(grid))[0]
    lrs = [_finish_slot(store, search, value) for value in (0.9, 0.3, 0.6, 0.5)]
    assert best_lr(search) == pytest.approx(lrs[1])


@pytest.mark.unit
def test_the_tuning_section_reads_val_acc_recal_where_recorded() -> None:
    """The committed lr_search recorded val_acc_recal and searched on it: the tuned and fixed lr are compared on
    it, the section says so, and runs.csv's search metric and range reach each point (none at the edge).
    """
    from sweep.report.document import Doc, Table
    from sweep.report.sections.readings import tuning_section

    folder = Path(__file__).resolve().parent.parent / "results" / "lr_search"
    found = tuning.tuning(analysis.load([folder]))
    assert found is not None
    epochs = pd.read_csv(folder / vocab.EPOCHS_CSV)
    tuned = epochs[(epochs.role == vocab.TUNED) & (epochs.status == RunStatus.DONE)]
    last = tuned.loc[tuned.groupby(vocab.RUN_ID)[vocab.EPOCH].idxmax()]
    for point in found.points:
        mine = last[last["train.batch_size"] == point.batch_size]
        assert point.metric == vocab.VAL_ACC_RECAL
        assert point.tuned_val.mean == pytest.approx(mine[vocab.VAL_ACC_RECAL].mean())
        assert point.tuned_val.mean != pytest.approx(mine[vocab.VAL_ACC].mean())
        assert (point.search_metric, point.lr_range, point.edge()) == (vocab.VAL_ACC_RECAL, (1e-4, 0.03), "")
    assert found.conclusion().startswith("At its own best learning rate, batch 8 ends with a val_acc_recal ")
    doc = Doc()
    tuning_section(doc, found)
    main, trials = [b for b in doc.blocks if isinstance(b, Table)]
    assert main.head[4] == "read on" and {row[4] for row in main.rows} == {vocab.VAL_ACC_RECAL}
    assert {row[1] for row in trials.rows} == {vocab.VAL_ACC_RECAL}


def _point(best: float, lrs: tuple[float, ...], lr_range: tuple[float, float] | None) -> tuning.TunedPoint:
    none = tuning.estimate([])
    trials = tuple((lr, 0.5, RunStatus.DONE) for lr in lrs)
    return tuning.TunedPoint(8, "", best, 0.001, trials, none, none, none, none, none, lr_range=lr_range)


@pytest.mark.unit
@pytest.mark.parametrize(
    "best, lrs, flagged",
    [
        (1.4e-4, (1.4e-4, 1e-3, 1e-2), True),  # the lowest trial, 1.4 x low
        (1.6e-4, (1.6e-4, 1e-3, 1e-2), False),  # the lowest trial, 1.6 x low: not within 1.5
        (1.4e-4, (1.2e-4, 1.4e-4, 1e-2), False),  # a lower trial did worse: the optimum is inside the range
        (0.07, (1e-3, 1e-2, 0.07), True),  # the highest trial, high / 1.43
        (0.06, (1e-3, 1e-2, 0.06), False),  # the highest trial, high / 1.67
        (0.07, (1e-3, 0.07, 0.09), False),
    ],
)
def test_a_best_lr_at_the_edge_of_the_searched_range_is_flagged(
    best: float, lrs: tuple[float, ...], flagged: bool
) -> None:
    from sweep.report.document import Doc, Paragraph
    from sweep.report.sections.readings import tuning_section

    point = _point(best, lrs, (1e-4, 0.1))
    words = "at the edge of the range [0.0001, 0.1]: widen search.lr or raise search.widen"
    assert point.edge() == (words if flagged else "")
    assert _point(best, lrs, None).edge() == ""  # a range runs.csv does not record is not guessed
    doc = Doc()
    tuning_section(doc, tuning.Tuning((point,), None, None, None))
    said = [b.text for b in doc.blocks if isinstance(b, Paragraph) and words in b.text]
    assert said == ([f"The best lr of batch 8, {best:.3g}, is {words}."] if flagged else [])


# --- end to end: real workers, real TensorFlow


@pytest.mark.integration
def test_run_searches_then_trains_the_best_lr_at_every_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    grid = write_grid(
        tmp_path,
        SEARCH_GRID.replace("train.batch_size: [4, 8]", "train.batch_size: [8]").replace("trials: 4", "trials: 3"),
    )
    first, lines = sweep_here(grid, report=True)
    assert first.exit_code == 0, lines.text
    assert "s: learning-rate searches finished; training their best lr at every seed: 2 run(s)" in lines.out
    runs = pd.read_csv(tmp_path / "results" / "s" / vocab.RUNS_CSV)
    assert runs["role"].value_counts().to_dict() == {vocab.SEARCH: 3, vocab.GRID: 2, vocab.TUNED: 2}
    search = runs[runs.role == vocab.SEARCH]
    assert set(search.seed) == {7} and search["train.lr"].between(1e-4, 1e-1).all()
    done = search[search.status == RunStatus.DONE]
    best = done.sort_values("final_val_acc", ascending=False, kind="stable")["train.lr"].iloc[0]
    tuned = runs[runs.role == vocab.TUNED]
    assert sorted(tuned.seed) == [0, 1] and (tuned["train.lr"] == best).all()
    assert (tuned.status == RunStatus.DONE).all() and tuned.epochs_done.eq(2).all()
    # Optuna's own tools see each search as a study of lr against val_acc
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "results" / "s" / vocab.JOURNAL_FILE))
    )
    names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
    assert names[0] == "s" and len(names) == 2 and names[1].startswith("s:lr_search:bs8-")
    frame = optuna.load_study(study_name=names[1], storage=storage).trials_dataframe()
    assert "params_lr" in frame and len(frame) == 3
    # the report: claims read the grid's runs only; the tuning section pairs tuned with fixed lr by seed
    results = analysis.load([tmp_path / "results" / "s"])
    assert set(results.epochs.run_id) == set(runs[runs.role == vocab.GRID].run_id)
    point = tuning.tuning(results).points[0]
    fixed = runs[runs.role == vocab.GRID].set_index("seed").final_val_acc
    assert point.best_lr == best and point.fixed_lr == 0.001 and point.tuned_val.n == 2
    assert point.change.mean == pytest.approx((tuned.set_index("seed").final_val_acc - fixed).mean())
    assert len(point.trials) == 3
    assert (point.metric, point.search_metric, point.lr_range) == (vocab.VAL_ACC, vocab.VAL_ACC, (1e-4, 1e-1))
    searched = runs[runs.role != vocab.GRID]
    assert (searched[vocab.SEARCH_METRIC] == vocab.VAL_ACC).all() and (searched[vocab.SEARCH_LR_HIGH] == 0.1).all()
    report = (tmp_path / "results" / "s" / "report.md").read_text()
    assert "## Batch sizes at their own best learning rate" in report and f"| 8 | - | {best:.3g} | 0.001 |" in report
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert cli.main(["status", "grid.yaml"]) == 0
    status = capsys.readouterr().out
    finished = (runs.status == RunStatus.DONE).sum() + (runs.status == RunStatus.PRUNED).sum()
    assert finished == 7 and status.startswith(
        f"s: 4 runs + 3 learning-rate search trials: {(runs.status == RunStatus.DONE).sum()} done, 0 running"
    )
    again, lines = sweep_here(grid)
    assert again.exit_code == 0 and "all 4 runs of s are already finished; nothing to train." in lines.out


@pytest.mark.integration
def test_a_real_search_at_the_edge_of_its_range_widens_before_its_best_lr_is_rerun(tmp_path: Path) -> None:
    """Real training: Adam's lrs of 1e-5..1.2e-5 barely move the weights, so val_loss falls with every
    larger lr and the best trial is the highest, at the range's edge. The run widens the range a
    decade, trains 2 more trials there, and re-runs the best of all 5 at every seed.
    """
    text = (
        SEARCH_GRID.replace("train.batch_size: [4, 8]", "train.batch_size: [8]")
        .replace("epochs: 2", "epochs: 1")
        .replace("lr: {low: 1e-4, high: 1e-1}", "lr: {low: 1e-5, high: 1.2e-5}")
        .replace("trials: 4", "trials: 3\n      metric: val_loss\n      widen: 1")
    )
    outcome, lines = sweep_here(write_grid(tmp_path, text))
    assert outcome.exit_code == 0, lines.text
    runs = pd.read_csv(tmp_path / "results" / "s" / vocab.RUNS_CSV)
    search = runs[runs.role == vocab.SEARCH]
    group = search[vocab.SEARCH_GROUP].iloc[0]
    assert f"s: {group}: best lr at the edge of [1e-05, 1.2e-05]; 2 more trial(s) over [1e-05, 0.00012]" in lines.out
    assert len(search) == 5 and search["train.lr"].max() > 1.2e-5  # the widened trials drew past the old edge
    assert search[vocab.SEARCH_LR_HIGH].tolist() == pytest.approx([1.2e-4] * 5)
    best = search.sort_values("final_val_loss", kind="stable")["train.lr"].iloc[0]
    tuned = runs[runs.role == vocab.TUNED]
    assert sorted(tuned.seed) == [0, 1] and (tuned["train.lr"] == best).all() and (tuned.status == RunStatus.DONE).all()


@pytest.mark.integration
def test_a_real_search_on_val_acc_recal_reruns_the_lr_it_ranks_best(tmp_path: Path) -> None:
    """A tiny real search with recalibrated BatchNorm: 8 steps leave BatchNorm's moving statistics far
    behind the weights, so raw val_acc and val_acc_recal differ; Optuna's objective is val_acc_recal, the
    search re-runs its best, and the report's tuning section reads and names it. (That the two metrics
    pick different lrs is checked with made-up records in the unit test above.)
    """
    grid = write_grid(
        tmp_path,
        RECAL_GRID.replace("train.batch_size: [4, 8]", "train.batch_size: [8]")
        .replace("trials: 4", "trials: 3")
        .replace("seeds: [0, 1]", "seeds: [0]"),
    )
    done, lines = sweep_here(grid)
    assert done.exit_code == 0, lines.text
    runs = pd.read_csv(tmp_path / "results" / "s" / vocab.RUNS_CSV)
    trials = runs[(runs.role == vocab.SEARCH) & (runs.status == RunStatus.DONE)]
    assert len(trials) == 3  # prune: false
    assert (trials["final_val_acc_recal"] != trials["final_val_acc"]).any()  # the data tell the two apart
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "results" / "s" / vocab.JOURNAL_FILE))
    )
    name = optuna.get_all_study_summaries(storage)[1].study_name
    seen = {t.params["lr"]: t.value for t in optuna.load_study(study_name=name, storage=storage).trials}
    assert seen == pytest.approx(dict(zip(trials["train.lr"], trials["final_val_acc_recal"], strict=True)))
    # the best val_acc_recal; on a tie (8 validation images) the lower val_loss_recal, then the earliest trial
    ranked = trials.assign(order=-trials["final_val_acc_recal"]).sort_values(
        ["order", "final_val_loss_recal", "trial_number"]
    )
    by_recal = ranked["train.lr"].iloc[0]
    tuned = runs[runs.role == vocab.TUNED]
    assert len(tuned) == 1 and (tuned["train.lr"] == by_recal).all()
    assert (runs.loc[runs.role != vocab.GRID, vocab.SEARCH_METRIC] == vocab.VAL_ACC_RECAL).all()
    point = tuning.tuning(analysis.load([tmp_path / "results" / "s"])).points[0]
    assert (point.best_lr, point.metric, point.search_metric) == (by_recal, vocab.VAL_ACC_RECAL, vocab.VAL_ACC_RECAL)
    assert point.tuned_val.mean == pytest.approx(tuned["final_val_acc_recal"].iloc[0])


@pytest.mark.unit
def test_runs_left_queued_in_a_grid_without_searches_are_not_called_tuned_runs(tmp_path: Path) -> None:
    """A second round in a grid without searches (its workers stopped with runs still queued) says so plainly."""
    from sweep.run import orchestrate, stores

    store = stores.open_store(str(tmp_path / "journal.log"), "g", create=True)
    lines: list[str] = []
    console = orchestrate.Console(say=lines.append, warn=lines.append)
    orchestrate._announce(store, 1, 4, [], 0, console, searched=False)
    orchestrate._announce(store, 1, 4, [], 0, console, searched=True)
    assert lines[0] == "g: 0 run(s) still queued after the workers stopped; training them now"
    assert "learning-rate searches finished" in lines[1] and "learning-rate" not in lines[0]


@pytest.mark.integration
def test_the_batch_size_advice_is_also_read_at_comparable_points_on_the_tuned_lr_reruns(tmp_path: Path) -> None:
    """The committed lr search: tables/readings.csv reads C7 and C8 again on the re-runs of each batch size's
    tuned lr, at every reading; at equal epochs (recalibrated) they are the numbers the verdicts read.
    """
    from sweep import report
    from sweep.analysis import readings

    report.build([REPO / "results" / "lr_search"], tmp_path)
    rows = pd.read_csv(tmp_path / "tables" / "readings.csv")
    claims = pd.read_csv(tmp_path / "tables" / "claims.csv").set_index("check")
    tuned = rows[rows["lr"] == "tuned per batch size"]
    assert set(tuned["claim"]) == {"C7", "C8"} and set(tuned["reading"]) == {r.name for r in readings.READINGS}
    at_epochs = tuned[(tuned["reading"] == "equal epochs") & (tuned["batchnorm"] == "BatchNorm recalibrated")]
    assert at_epochs["mean"].tolist() == pytest.approx(claims.loc[at_epochs["check"], "mean"].tolist())
    fixed = rows[(rows["lr"] == "fixed") & rows["check"].isin(at_epochs["check"]) & (rows["reading"] == "equal epochs")]
    assert len(fixed) == len(at_epochs) and not np.allclose(fixed["mean"], at_epochs["mean"])  # other runs
    fit = tuned[(tuned["reading"] == "equal fit") & (tuned["batchnorm"] == "BatchNorm recalibrated")]
    assert fit["n"].eq(3).all() and fit["mean"].notna().all()
    md = (tmp_path / "report.md").read_text()
    assert all(f"### {claim}, each batch size at its own tuned lr: " in md for claim in ("C7", "C8"))


@pytest.mark.unit
@pytest.mark.parametrize("interrupted", [False, True])
def test_a_tie_is_broken_by_the_last_records_loss_and_an_interrupted_trial_keeps_the_search_open(
    tmp_path: Path, interrupted: bool
) -> None:
    """Two trials tie at their last record; the first had the lower loss at its first record, the second at its
    last: the last record decides. A last trial interrupted instead (its worker stopped; it will come back)
    leaves the search unsettled: no best lr, nothing re-run.
    """
    from sweep.store.search import best_lr

    grid = _grid(tmp_path, SEARCH_GRID.replace("train.batch_size: [4, 8]", "train.batch_size: [8]"))
    store, groups = _store(tmp_path), search_groups(grid)
    (search,) = store.register_searches(groups)
    lrs = []
    for first_loss, last_loss in ((0.1, 0.9), (0.9, 0.5), (0.2, 0.2), (0.3, 0.3)):
        lease = store.start(store.claim_next())
        value = 0.6 if len(lrs) < 2 else 0.1
        for epoch, loss in ((1, first_loss), (2, last_loss)):
            store.record_epoch(lease, {vocab.EPOCH: epoch, vocab.STEP: epoch, "val_acc": value, "val_loss": loss})
        last = interrupted and len(lrs) == 3
        store.finish(lease, RunStatus.INTERRUPTED if last else RunStatus.DONE, value=None if last else value)
        lrs.append(lease.spec.point.train.lr)
    if interrupted:
        assert best_lr(search) is None and store.enqueue_tuned(groups, grid.seeds) == []
    else:
        assert best_lr(search) == pytest.approx(lrs[1])
