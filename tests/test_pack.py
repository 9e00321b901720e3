"""Packed training with real Keras on tiny data: every record of a run trained as one tower of a
pack equals, bit for bit, the record of the same run trained alone (sweep/train/pack.py). On the
process's backend: TensorFlow here; tests/test_backends.py runs this file on JAX.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from conftest import sweep_here, write_grid

from sweep import vocab
from sweep.config import DataConfig, ModelConfig, PointConfig, TrainConfig
from sweep.config.plan import RunSpec
from sweep.run import resume
from sweep.train import checkpoint
from sweep.train.pack import default_size, pack_key
from sweep.train.records import Diverged
from sweep.train.session import Session
from sweep.train.trainer import Trainer
from sweep.vocab import RunStatus

TIMINGS = ("epoch_seconds", "samples_per_second")
NEVER_BETTER = '{"metric": "val_loss", "min_delta": 10.0, "patience": 1}'  # stops after its second epoch


def spec(seed: int = 0, data: dict | None = None, model: dict | None = None, **train: object) -> RunSpec:
    base = DataConfig(dataset="glyphs120", classes=6, samples_per_class=10, image_size=12)
    point = PointConfig(
        data=dataclasses.replace(base, **(data or {})),
        model=dataclasses.replace(ModelConfig(), **(model or {})),
        train=dataclasses.replace(TrainConfig(epochs=3, batch_size=8), **train),
    )
    return RunSpec(sweep="t", seed=seed, point=point, varying=(("seed", seed),))


def without_timings(records: list) -> list[dict]:
    return [{k: v for k, v in r.to_dict().items() if k not in TIMINGS} for r in records]


def alone(specs: list[RunSpec]) -> list[list[dict]]:
    """Each run trained alone in a fresh model (a trainer's own session); a diverged run's records up to its
    divergence.
    """
    out = []
    for s in specs:
        records: list = []
        try:
            for record in Trainer.alone(s).epochs():
                records.append(record)
        except Diverged:
            pass
        out.append(without_timings(records))
    return out


def packed(
    specs: list[RunSpec], session: Session | None = None
) -> tuple[Trainer, list[list[dict]], dict[int, Diverged]]:
    run = Trainer(specs, session)
    records: list[list] = [[] for _ in specs]
    diverged: dict[int, Diverged] = {}
    for found in run.records():
        for k, record in found.items():
            if isinstance(record, Diverged):
                diverged[k] = record
            else:
                records[k].append(record)
    return run, [without_timings(r) for r in records], diverged


@pytest.mark.integration
def test_packed_runs_record_what_they_record_alone() -> None:
    """Seeds, data order, preprocessing mismatch, data seed and learning rate differ; records inside
    epochs, recalibrated BatchNorm and early stopping are on.
    """
    common = {"recalibrate_bn": True, "eval_every_steps": 4}  # 6 steps per epoch: records at steps 4, 6, 8, ...
    specs = [
        spec(0, **common),
        spec(1, data={"shuffle": False}, lr=0.003, **common),
        spec(2, data={"preprocess_mismatch": "scale", "seed": 7}, **common),
        spec(3, early_stopping=NEVER_BETTER, **common),  # stops after epoch 2
    ]
    assert len({pack_key(s) for s in specs}) == 1
    run, records, diverged = packed(specs)
    assert not diverged and run.info.pack_size == 4
    expected = alone(specs)
    for got, want in zip(records, expected, strict=True):
        assert repr(got) == repr(want)  # exact, every field (repr: a NaN equals a NaN)
    assert [r[vocab.EPOCH] for r in records[3]] == [0.666667, 1, 1.333333, 2]  # early stopping ended it at epoch 2
    assert run.runs[3].stopped_early == 2 and run.runs[0].stopped_early is None
    assert records[1][-1][vocab.LR] == pytest.approx(0.003) and records[0][-1][vocab.LR] == pytest.approx(0.001)


@pytest.mark.integration
def test_short_batches_in_training_and_evaluation() -> None:
    """A short last batch in training (2,400 images at batch 256) and in evaluation (600 at 512): the
    loss is averaged over images as alone, not over batches.
    """
    data = {"classes": 120, "samples_per_class": 25}
    specs = [spec(0, data=data, batch_size=256, epochs=2), spec(1, data=data, batch_size=256, epochs=2)]
    _, records, _ = packed(specs)
    assert [repr(r) for r in records] == [repr(r) for r in alone(specs)]


@pytest.mark.integration
def test_warm_up_schedules_and_a_reused_pack_model() -> None:
    """Each tower's own warm-up ramp; a second pack of the same graph reuses the compiled model."""
    ramp = {"warmup_epochs": 1.0, "eval_every_steps": 2}  # 6 steps per epoch: records at steps 2, 4, 6, ...
    first = [spec(0, lr=0.002, **ramp), spec(1, lr=0.0005, **ramp)]
    second = [spec(4, lr=0.002, **ramp), spec(5, lr=0.0005, **ramp)]
    session = Session()
    packed(first, session)
    run, records, _ = packed(second, session)
    assert run.info.reused_model
    assert [repr(r) for r in records] == [repr(r) for r in alone(second)]
    assert records[0][0][vocab.LR] == pytest.approx(0.002 * 3 / 6)  # step 2 of a 6-step ramp: lr x (2 + 1) / 6
    assert records[1][0][vocab.LR] == pytest.approx(0.0005 * 3 / 6)
    assert records[1][-1][vocab.LR] == pytest.approx(0.0005)


@pytest.mark.integration
def test_a_reused_pack_model_trains_each_run_at_its_own_constant_rate() -> None:
    """The second pack of a graph reuses the compiled model with other constant learning rates: each
    tower trains at its run's, not at the first pack's (on JAX those would be traced into the step).
    """
    session = Session()
    packed([spec(0, lr=0.002, epochs=1), spec(1, lr=0.0005, epochs=1)], session)
    second = [spec(4, lr=0.0005, epochs=1), spec(5, lr=0.01, epochs=1)]
    run, records, _ = packed(second, session)
    assert run.info.reused_model
    assert [repr(r) for r in records] == [repr(r) for r in alone(second)]


@pytest.mark.integration
def test_a_diverging_tower_leaves_the_others_untouched() -> None:
    # lr 1e20: NaN in epoch 1 on TensorFlow and JAX (at 1e12 JAX's loss saturates at a finite value)
    specs = [spec(0, optimizer="sgd", lr=0.05), spec(1, optimizer="sgd", lr=1e20), spec(2, optimizer="sgd", lr=0.01)]
    run, records, diverged = packed(specs)
    assert list(diverged) == [1] and diverged[1].epoch == 1
    assert records[1] == []
    expected = alone(specs)
    assert repr(records[0]) == repr(expected[0]) and repr(records[2]) == repr(expected[2])
    assert run.runs[1].ended


@pytest.mark.unit
def test_what_packs() -> None:
    base = pack_key(spec(0))
    assert base is not None
    assert pack_key(spec(1, data={"shuffle": False}, lr=0.1, early_stopping=NEVER_BETTER)) == base
    assert pack_key(spec(0, batch_size=4)) != base
    assert pack_key(spec(0, data={"imbalance": 0.5})) != base
    assert pack_key(spec(0, model={"width": 2.0})) != base
    assert pack_key(spec(0, eval_every_steps=2)) != base
    assert pack_key(spec(0, noise_scale=True)) is None
    assert pack_key(spec(0, gpus=2)) is None
    assert all(default_size(b) >= 1 for b in (1, 8, 100, 4096))


@pytest.mark.integration
def test_a_run_resumes_alone_from_its_packed_checkpoint(tmp_path) -> None:
    """A packed run's checkpoint holds what its run alone would: restored into an unpacked model
    after epoch 1, the run's remaining records are those of the run trained alone throughout.
    """
    specs = [spec(0, lr=0.002), spec(1)]
    run = Trainer(specs)
    path = tmp_path / "r.npz"
    for found in run.records():
        record = found[1].to_dict()
        checkpoint.save(path, "r", specs[1].to_json(), run.runs[1].position, record, run.view(1))
        break
    saved = checkpoint.load(path)
    assert saved is not None and saved.epoch == 1
    resumed = Trainer.alone(specs[1])
    checkpoint.restore(resumed.model, resumed.strategy, saved)
    rest = without_timings(list(resumed.epochs(saved.position)))
    assert repr(rest) == repr(alone([specs[1]])[0][1:])
    np.testing.assert_array_equal(saved.optimizer[1], np.float32(0.001))  # its own learning rate


GRID = """\
    name: packs
    seeds: [0, 1, 2]
    base:
      data: {dataset: glyphs120, classes: 4, samples_per_class: 10, image_size: 12}
      train: {epochs: 2, batch_size: 8, recalibrate_bn: true}
    grid:
      data.shuffle: [true, false]
"""


@pytest.mark.integration
def test_a_packed_sweep_writes_the_csvs_of_an_unpacked_one(tmp_path) -> None:
    grid = write_grid(tmp_path, GRID)
    outcome, _ = sweep_here(grid, results=tmp_path / "packed", pack=4)
    assert outcome.exit_code == 0
    plain, _ = sweep_here(grid, results=tmp_path / "alone", pack=1)
    runs = pd.read_csv(tmp_path / "packed" / vocab.RUNS_CSV).set_index(vocab.RUN_ID)
    assert sorted(runs["pack_size"].value_counts().items()) == [(2, 2), (4, 4)]  # 6 runs: a pack of 4, one of 2
    assert (pd.read_csv(tmp_path / "alone" / vocab.RUNS_CSV)["pack_size"] == 1).all()
    assert (runs[vocab.STATUS] == RunStatus.DONE).all()
    order = [vocab.RUN_ID, vocab.EPOCH]
    got, want = (
        pd.read_csv(tmp_path / folder / vocab.EPOCHS_CSV).drop(columns=list(TIMINGS)).sort_values(order)
        for folder in ("packed", "alone")
    )
    assert len(got) == 12
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True), check_exact=True)


FLAKY = """\
import keras
import numpy as np
from keras import layers


def build(input_shape, num_classes, below=0.0):
    if np.random.random() < below:  # numpy's global generator, seeded from the run's seed
        raise RuntimeError("unlucky draw")
    inputs = keras.Input(input_shape)
    x = layers.GlobalAveragePooling2D()(layers.Conv2D(4, 3)(inputs))
    return keras.Model(inputs, layers.Dense(num_classes, activation="softmax")(x))
"""


@pytest.mark.integration
def test_a_pack_with_a_failing_run_trains_its_mates_alone(tmp_path) -> None:
    """The builder raises for one seed of three: the pack fails, its runs are queued again and
    trained alone; the one at fault fails alone, the other two finish with their own records.
    """
    import keras

    from sweep.base.seeds import derive_seed
    from sweep.run import worker
    from sweep.store import Store

    (tmp_path / "flaky.py").write_text(FLAKY)
    draws = {}
    for seed in range(3):
        keras.utils.set_random_seed(derive_seed(seed, "init"))
        draws[seed] = float(np.random.random())
    lowest, second = sorted(draws.values())[:2]
    model = {"builder": f"{tmp_path / 'flaky.py'}:build", "options": json.dumps({"below": (lowest + second) / 2})}
    specs = [spec(seed, model=model, epochs=2) for seed in range(3)]
    unlucky = specs[min(draws, key=draws.__getitem__)].run_id
    store = Store.open(tmp_path / "journal.log", "t")
    store.enqueue(specs)
    events: list = []
    places = resume.places(str(tmp_path / "journal.log"), "t")
    assert worker.work(store, events.append, own_process=False, places=places, pack=3) == 0
    store.export_csv(tmp_path)
    runs = pd.read_csv(tmp_path / vocab.RUNS_CSV).set_index(vocab.RUN_ID)
    assert runs.loc[unlucky, vocab.STATUS] == RunStatus.FAILED and "unlucky draw" in runs.loc[unlucky, "error"]
    lucky = [s for s in specs if s.run_id != unlucky]
    assert (runs.loc[[s.run_id for s in lucky], vocab.STATUS] == RunStatus.DONE).all()
    assert (runs.loc[[s.run_id for s in lucky], "pack_size"] == 1).all()  # trained alone after the pack failed
    epochs = pd.read_csv(tmp_path / vocab.EPOCHS_CSV)
    for s, want in zip(lucky, alone(lucky), strict=True):
        got = epochs[epochs[vocab.RUN_ID] == s.run_id].drop(columns=list(TIMINGS))
        assert got[vocab.TRAIN_LOSS].tolist() == [r[vocab.TRAIN_LOSS] for r in want]
        assert got[vocab.VAL_ACC].tolist() == [r[vocab.VAL_ACC] for r in want]


REGULARIZED = """\
import keras
from keras import layers


def build(input_shape, num_classes):
    inputs = keras.Input(input_shape)
    x = layers.GlobalAveragePooling2D()(layers.Conv2D(4, 3, kernel_regularizer="l2")(inputs))
    return keras.Model(inputs, layers.Dense(num_classes, activation="softmax")(x))
"""


@pytest.mark.integration
def test_a_model_with_losses_of_its_own_trains_alone(tmp_path) -> None:
    """A regularizer's loss is part of a run's `loss` alone but not of a tower's: such runs are not
    packed (the pack is given up before training) and each trains alone, done.
    """
    from sweep.run import worker
    from sweep.store import Store

    (tmp_path / "reg.py").write_text(REGULARIZED)
    specs = [spec(seed, model={"builder": f"{tmp_path / 'reg.py'}:build"}, epochs=1) for seed in range(2)]
    store = Store.open(tmp_path / "journal.log", "t")
    store.enqueue(specs)
    places = resume.places(str(tmp_path / "journal.log"), "t")
    assert worker.work(store, [].append, own_process=False, places=places, pack=2) == 0
    store.export_csv(tmp_path)
    runs = pd.read_csv(tmp_path / vocab.RUNS_CSV)
    assert (runs[vocab.STATUS] == RunStatus.DONE).all() and (runs["pack_size"] == 1).all() and len(runs) == 2


@pytest.mark.integration
def test_a_pack_whose_attempt_the_store_took_back_queues_its_mate_again(tmp_path) -> None:
    """The store ends one packed run's attempt mid-training (its worker presumed dead): that attempt is
    dropped quietly (its next one is queued), and its mate, still standing, is queued again to train alone.
    """
    import optuna

    from sweep.run import driver, events
    from sweep.store import Store, internals

    specs = [spec(seed, epochs=3) for seed in range(2)]
    store = Store.open(tmp_path / "journal.log", "t")
    store.enqueue(specs)
    leases = [store.claim_next(), store.claim_next()]
    other = Store.open(tmp_path / "journal.log", "t")  # the process that presumes the worker dead
    said: list = []

    def presumed_dead_after_epoch_one(event: events.Event) -> None:
        said.append(event)
        if isinstance(event, events.EpochDone) and event.run_id == leases[0].spec.run_id:
            trial = other.sweep.get_trials()[leases[0].trial.number]
            lease = dataclasses.replace(leases[0], trial=internals.handle(other.sweep, trial), study=other.sweep)
            assert other.requeue(lease, "presumed dead (test)")

    places = resume.places(str(tmp_path / "journal.log"), "t")
    ended = driver.train(store, leases, presumed_dead_after_epoch_one, places, Session())
    assert ended == [(RunStatus.INTERRUPTED, False), (RunStatus.INTERRUPTED, True)]
    states = {(t.user_attrs[vocab.RUN_ID], t.user_attrs[vocab.ATTEMPT]): t.state for t in store.sweep.get_trials()}
    waiting = optuna.trial.TrialState.WAITING
    assert [states[(c.spec.run_id, 2)] for c in leases] == [waiting, waiting]  # both queued for a new attempt
    interrupted = [e for e in said if isinstance(e, events.RunInterrupted)]
    assert [e.run_id for e in interrupted] == [c.spec.run_id for c in leases]
    assert "presumed this worker dead" in interrupted[0].reason and "trains alone next" in interrupted[1].reason
