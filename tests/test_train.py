"""One run with real TensorFlow on tiny data: records, determinism, divergence, replicas."""

from __future__ import annotations

import dataclasses
import math
import os
import time

import pytest

from sweep.config import DataConfig, PointConfig, TrainConfig, declared
from sweep.config.declare import GRAPH
from sweep.config.plan import RunSpec
from sweep.train import devices
from sweep.train.records import Diverged
from sweep.train.session import Session
from sweep.train.trainer import Trainer

TIMINGS = ("epoch_seconds", "samples_per_second")


def tiny_spec(seed: int = 0, shuffle: bool = True, **train: object) -> RunSpec:
    point = PointConfig(
        data=DataConfig(dataset="glyphs120", classes=4, samples_per_class=10, image_size=12, shuffle=shuffle),
        train=dataclasses.replace(TrainConfig(epochs=2, batch_size=8), **train),
    )
    return RunSpec(sweep="t", seed=seed, point=point, varying=(("seed", seed),))


def without_timings(records: list) -> list[dict]:
    return [{k: v for k, v in r.to_dict().items() if k not in TIMINGS} for r in records]


@pytest.mark.integration
def test_records_have_every_metric_and_consistent_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tiny_spec()
    data = spec.point.data
    images = round(data.classes * data.samples_per_class * (1 - data.val_fraction))  # 4 x 10 x 0.8 per epoch
    run = Trainer.alone(spec)
    fits: list[float] = []  # each Keras fit call, timed around it here
    model_fit = type(run.model).fit

    def timed_fit(model: object, *args: object, **kwargs: object) -> object:
        started = time.perf_counter()
        try:
            return model_fit(model, *args, **kwargs)
        finally:
            fits.append(time.perf_counter() - started)

    monkeypatch.setattr(type(run.model), "fit", timed_fit)
    records, walls = [], []  # walls: from asking for a record to having it (its fit and its evaluations)
    epochs = run.epochs()
    while True:
        started = time.perf_counter()
        record = next(epochs, None)
        if record is None:
            break
        records.append(record)
        walls.append(time.perf_counter() - started)
    assert len(fits) == len(records) == 2  # one fit per epoch
    for r, fit, wall in zip(records, fits, walls, strict=True):
        # epoch_seconds is the epoch's fit: no shorter than the fit call, no longer than the epoch's whole record
        assert fit <= r.epoch_seconds <= wall
        assert images / wall <= r.samples_per_second <= images / fit
    assert [r.epoch for r in records] == [1, 2]
    # 4 classes x 8 train images, batch 8 -> 4 steps per epoch
    assert run.info.train_samples == 32 and run.info.val_samples == 8
    assert [r.step for r in records] == [4, 8]
    for r in records:
        assert r.gap == pytest.approx(r.train_acc - r.val_acc)
        assert r.eval_gap == pytest.approx(r.train_eval_acc - r.val_acc)
        assert r.lr == pytest.approx(0.001)
        assert all(0.0 <= a <= 1.0 for a in (r.train_acc, r.train_eval_acc, r.val_acc))
        assert r.samples_per_second == pytest.approx(32 / r.epoch_seconds)
    assert (run.info.replicas, run.info.per_replica_batch, run.info.virtual_devices) == (1, 8, False)


@pytest.mark.integration
def test_same_spec_gives_identical_records() -> None:
    first = without_timings(list(Trainer.alone(tiny_spec()).epochs()))
    second = without_timings(list(Trainer.alone(tiny_spec()).epochs()))
    assert first == second
    other_seed = without_timings(list(Trainer.alone(tiny_spec(seed=1)).epochs()))
    assert other_seed != first


@pytest.mark.integration
def test_absurd_learning_rate_diverges() -> None:
    with pytest.raises(Diverged) as info:
        list(Trainer.alone(tiny_spec(optimizer="sgd", lr=1e12)).epochs())
    assert info.value.epoch == 1 and not math.isfinite(info.value.loss)


def assert_reuse_trains_like_fresh(specs: list[RunSpec]) -> None:
    """Train `specs` in order in one worker session, in pairs whose second run reuses the first's compiled
    model; then each second run again in a fresh model: every number of every epoch must be the same.
    """
    session = Session()
    in_sequence, reused = [], []
    for spec in specs:
        run = Trainer.alone(spec, session)
        in_sequence.append(without_timings(list(run.epochs())))
        reused.append(run.info.reused_model)
    assert reused == [False, True] * (len(specs) // 2)  # each pair's first run compiled a fresh model
    for spec, records in zip(specs[1::2], in_sequence[1::2], strict=True):
        fresh = without_timings(list(Trainer.alone(spec).epochs()))  # a session of its own: a fresh model
        assert repr(records) == repr(fresh), spec  # exact, every metric of every epoch (repr: a NaN equals a NaN)
    assert in_sequence[0] != in_sequence[1]


@pytest.mark.integration
def test_a_reused_compiled_model_trains_like_a_fresh_one() -> None:
    """A worker keeps its last compiled model for the next run with the same graph: another seed
    and learning rate, and the gradient noise scale (its traced gradient function is kept too).
    """
    assert_reuse_trains_like_fresh([tiny_spec(seed=0, noise_scale=True), tiny_spec(seed=1, lr=0.003, noise_scale=True)])


@pytest.mark.system  # 12 more fresh and reused models (about 70 s): every other kind of graph a worker reuses
def test_a_reused_compiled_model_trains_like_a_fresh_one_for_every_graph() -> None:
    """Optimizer state (momentum), a warm-up schedule, two replicas, and runs without the noise scale."""
    assert_reuse_trains_like_fresh(
        [
            tiny_spec(seed=0),
            tiny_spec(seed=1, lr=0.003),
            tiny_spec(seed=2, optimizer="momentum", lr=0.05),
            tiny_spec(seed=0, optimizer="momentum", lr=0.01),
            tiny_spec(seed=1, warmup_epochs=0.5),
            tiny_spec(seed=2, warmup_epochs=0.5),
            tiny_spec(seed=1, gpus=2),
            tiny_spec(seed=2, gpus=2),
        ]
    )


@pytest.mark.integration
def test_a_run_records_how_it_was_computed() -> None:
    run = Trainer.alone(tiny_spec(batch_size=16))
    assert (run.info.jit_compile, run.info.steps_per_execution) == (False, 8)  # 128 images per call
    # the same numbers need the same thread count and CPU model; this process set no thread count
    # (a worker's is set by its coordinator: tests/test_flags.py), so TensorFlow uses one per core
    assert "TF_NUM_INTRAOP_THREADS" not in os.environ
    assert run.info.threads == devices.cpu_count() and run.info.cpu == devices.cpu_model()
    assert Trainer.alone(tiny_spec(batch_size=16, gpus=2)).info.steps_per_execution == 1


@pytest.mark.integration
def test_two_replicas_split_the_global_batch() -> None:
    run = Trainer.alone(tiny_spec(gpus=2))
    records = list(run.epochs())
    assert (run.info.replicas, run.info.per_replica_batch, run.info.virtual_devices) == (2, 4, True)
    assert len(run.info.devices.split(",")) == 2
    # the global batch is still 8: 4 optimizer steps per epoch, as on one device
    assert [r.step for r in records] == [4, 8]


def labels_fitted(run: Trainer) -> list[list[list[int]]]:
    """Train the run; per fit call (one per epoch here), the labels of each batch `model.fit` was given."""
    fitted, fit = [], run.model.fit

    def recording_fit(dataset, **options):  # the real fit, on the same dataset
        fitted.append([labels.numpy().tolist() for _, labels in dataset])
        return fit(dataset, **options)

    run.model.fit = recording_fit
    try:
        list(run.epochs())
    finally:
        del run.model.fit  # the compiled model is kept for the next run
    return fitted


@pytest.mark.integration
def test_an_unshuffled_run_trains_on_class_sorted_single_class_batches() -> None:
    """data.shuffle: false, through the trainer: 4 classes x 8 images, batch 8, the same batches every epoch."""
    sorted_batches = [[k] * 8 for k in range(4)]
    assert labels_fitted(Trainer.alone(tiny_spec(shuffle=False))) == [sorted_batches, sorted_batches]
    shuffled = labels_fitted(Trainer.alone(tiny_spec(shuffle=True)))
    assert shuffled[0] != shuffled[1] and any(len(set(batch)) > 1 for batch in shuffled[0])  # the default shuffles
    assert [sorted(sum(epoch, [])) for epoch in shuffled] == [sum(sorted_batches, [])] * 2  # every image, once


@pytest.mark.integration
def test_an_imbalanced_run_records_balanced_train_accuracy() -> None:
    """data.imbalance > 0: train_eval_balanced_acc is the mean recall over classes of the end-of-epoch
    model on the train_eval subset; a balanced run does not record it.
    """
    spec = tiny_spec()
    skewed = dataclasses.replace(spec, point=spec.point.with_value("data.imbalance", 0.9))
    run = Trainer.alone(skewed)
    last = list(run.epochs())[-1]
    x, y = run.runs[0].split.x_train_eval, run.runs[0].split.y_train_eval
    predicted = run.model.predict(x, verbose=0).argmax(axis=1)
    by_hand = sum((predicted[y == k] == k).mean() for k in set(y.tolist())) / len(set(y.tolist()))
    assert last.train_eval_balanced_acc == pytest.approx(by_hand)
    assert last.train_eval_acc == pytest.approx((predicted == y).mean())
    assert "train_eval_balanced_acc" not in list(Trainer.alone(spec).epochs())[-1].to_dict()


@pytest.mark.integration
def test_a_key_declared_to_shape_the_graph_makes_a_worker_build_a_fresh_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/design.md's "Adding a grid key", followed with a throw-away declaration: `train.epochs` does not
    shape the compiled graph, so a run with other epochs reuses the last model; declared `reach=GRAPH`, it
    does, and a worker builds a fresh model whenever its value changes (graph_key is derived from the
    declarations: no list to forget).
    """
    session = Session()
    trained(tiny_spec(epochs=2), session)
    assert trained(tiny_spec(epochs=3), session).info.reused_model
    every = declared.declarations()
    monkeypatch.setitem(every, "train.epochs", dataclasses.replace(every["train.epochs"], reach=GRAPH))
    declared.graph_keys.cache_clear()
    try:
        assert not trained(tiny_spec(epochs=2), session).info.reused_model
        assert Trainer.alone(tiny_spec(epochs=2), session).info.reused_model  # the same value again: the same graph
    finally:
        monkeypatch.undo()
        declared.graph_keys.cache_clear()


def trained(spec: RunSpec, session: Session) -> Trainer:
    """A trainer of `spec` in `session`, trained to its end: the session then keeps its compiled model."""
    trainer = Trainer.alone(spec, session)
    for _ in trainer.records():
        pass
    return trainer


@pytest.mark.integration
def test_a_session_keeps_a_sound_model_for_its_next_run_and_shares_nothing_with_another() -> None:
    """A worker session (sweep/train/session.py) lends its compiled model to the next trainer of the same
    graph once the model's runs trained to their ends; a trainer whose run diverged gives nothing back (its
    model may be broken). Two sessions share nothing: not a compiled model, not an evaluation pipeline.
    """
    mine, other = Session(), Session()
    first = Trainer.alone(tiny_spec(seed=0, epochs=1), mine)
    assert mine.compiled is None and not first.info.reused_model  # its trainer holds it while it trains
    list(first.epochs())
    assert mine.compiled is not None and mine.compiled.model is first.model
    again = Trainer.alone(tiny_spec(seed=1, epochs=1), mine)
    assert again.info.reused_model and again.model is first.model and mine.compiled is None
    elsewhere = Trainer.alone(tiny_spec(seed=1, epochs=1), other)
    assert not elsewhere.info.reused_model and elsewhere.model is not first.model
    val = again.runs[0].split.x_val, again.runs[0].split.y_val
    for session in (mine, other):
        assert session.eval_batches(*val, 512) is session.eval_batches(*val, 512)  # made once per trainer
    assert mine.eval_batches(*val, 512) is not other.eval_batches(*val, 512)
    list(again.epochs())
    assert mine.compiled is not None
    broken = Trainer.alone(tiny_spec(epochs=1, lr=1e12, optimizer="sgd"), mine)
    found = list(broken.records())
    assert len(found) == 1 and isinstance(found[0][0], Diverged)
    assert mine.compiled is None  # not given back
