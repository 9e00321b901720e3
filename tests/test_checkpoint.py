"""Run checkpoints with real TensorFlow on tiny data: a run stopped after any record and restored
from its checkpoint writes the same records, bit for bit (timings aside), as one never stopped;
the file is written atomically; the worker resumes a re-queued run and cleans up after it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import write_grid
from test_train import TIMINGS, tiny_spec

from sweep import vocab
from sweep.config.plan import RunSpec
from sweep.run import resume
from sweep.train import checkpoint
from sweep.train.session import Session
from sweep.train.single import Single
from sweep.train.trainer import Trainer


def _rows(records: list[dict]) -> list[str]:
    """Records without their timings, as exact text (a NaN noise scale equals a NaN noise scale)."""
    return [json.dumps({k: v for k, v in r.items() if k not in TIMINGS}, sort_keys=True) for r in records]


def _interrupted(spec: RunSpec, after: int, path: Path, fresh: bool) -> tuple[list[dict], Trainer]:
    """Train `spec` for `after` records, checkpointing at each; then restore a new Trainer from the
    checkpoint (in a fresh worker session if `fresh`, else in the session's compiled model) and finish it.
    """
    session = Session()
    run = Trainer.alone(spec, session)
    records = []
    for record in run.epochs():
        records.append(record.to_dict())
        checkpoint.save(path, spec.run_id, spec.to_json(), run.runs[0].position, records[-1], run.view(0))
        if len(records) == after:
            break
    if fresh:
        session = Session()  # as a new worker process would start
    else:  # a worker's session holding a compiled model of this graph, as an earlier run of it leaves one
        session.keep(run.engine.compiled)
    saved = checkpoint.load(path)
    assert saved is not None and json.dumps(saved.record) == json.dumps(records[-1])  # as text: NaN equals NaN
    again = Trainer.alone(spec, session)
    assert again.info.reused_model is not fresh
    checkpoint.restore(again.model, again.strategy, saved)
    return records + [r.to_dict() for r in again.epochs(saved.position)], again


@pytest.mark.integration
@pytest.mark.parametrize(
    ("train", "after", "fresh"),
    [
        ({"epochs": 3}, 1, True),  # a fresh process: the optimizer is built before it is restored
        ({"epochs": 3, "optimizer": "momentum"}, 2, False),  # the worker's cached compiled model
        ({"epochs": 2, "gpus": 2}, 1, True),  # MirroredStrategy: mirrored variables and optimizer slots
        # records inside epochs (a checkpoint mid-epoch: its running train_acc goes on), warm-up,
        # the recalibrated BatchNorm evaluation and the noise scale
        (
            {"epochs": 2, "eval_every_steps": 3, "warmup_epochs": 0.5, "recalibrate_bn": True, "noise_scale": True},
            3,
            True,
        ),
    ],
    ids=["fresh-session", "cached-model", "mirrored", "mid-epoch"],
)
def test_restored_run_writes_the_records_of_an_uninterrupted_one(
    tmp_path: Path, train: dict, after: int, fresh: bool
) -> None:
    spec = tiny_spec(**train)
    whole = [r.to_dict() for r in Trainer.alone(spec).epochs()]
    resumed, _ = _interrupted(spec, after, tmp_path / "run.npz", fresh)
    assert [r[vocab.EPOCH] for r in resumed] == [r[vocab.EPOCH] for r in whole]
    assert _rows(resumed) == _rows(whole)
    if train.get("eval_every_steps"):
        assert not float(resumed[after - 1][vocab.EPOCH]).is_integer()  # it did stop mid-epoch


@pytest.mark.integration
def test_early_stopping_state_survives_a_restore(tmp_path: Path) -> None:
    rule = {"metric": "train_loss", "patience": 1, "min_delta": 10.0}  # stops after epoch 2 of 4
    spec = tiny_spec(epochs=4, early_stopping=json.dumps(rule, sort_keys=True))
    uninterrupted = Trainer.alone(spec)
    whole = [r.to_dict() for r in uninterrupted.epochs()]
    resumed, again = _interrupted(spec, 1, tmp_path / "run.npz", fresh=True)
    assert uninterrupted.runs[0].stopped_early == again.runs[0].stopped_early == 2
    assert _rows(resumed) == _rows(whole)


@pytest.mark.integration
def test_checkpoint_holds_the_optimizer_step_and_batchnorm_statistics(tmp_path: Path) -> None:
    run = Trainer.alone(tiny_spec(epochs=1))
    record = next(iter(run.epochs())).to_dict()
    path = tmp_path / "r.npz"
    checkpoint.save(path, "r", "{}", run.runs[0].position, record, run.view(0))
    saved = checkpoint.load(path)
    assert saved is not None and saved.position.epoch == 1
    paths = [v.path for v in run.model.optimizer.variables]
    assert int(saved.optimizer[next(i for i, p in enumerate(paths) if p.endswith("iteration"))]) == 4
    moving = [i for i, v in enumerate(run.model.variables) if "moving_mean" in v.path]
    assert moving and any(np.any(saved.model[i] != 0) for i in moving)


@pytest.mark.integration
def test_a_write_cut_short_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    run = Trainer.alone(tiny_spec(epochs=2))
    path = tmp_path / "r.npz"
    records = []
    for record in run.epochs():
        records.append(record.to_dict())
        if len(records) == 1:
            checkpoint.save(path, "r", "{}", run.runs[0].position, records[-1], run.view(0))
    before = path.read_bytes()
    # A second write killed mid-way: its temporary file is there, half written; the checkpoint is not touched.
    killed = tmp_path / f".r.npz.tmp-{os.getpid() + 1}"
    killed.write_bytes(before[: len(before) // 2])
    saved = checkpoint.load(path)
    assert path.read_bytes() == before and saved is not None and saved.record == records[0]
    # Another container's write in progress, under this very pid: a save here leaves it alone.
    theirs = tmp_path / f".r.npz.tmp-{os.getpid()}"
    theirs.write_bytes(b"their half-written checkpoint")
    checkpoint.save(path, "r", "{}", run.runs[0].position, records[-1], run.view(0))
    assert theirs.read_bytes() == b"their half-written checkpoint"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == sorted([killed.name, theirs.name])
    _age(killed, 3600)
    checkpoint.remove(path)
    assert [p.name for p in tmp_path.iterdir()] == [theirs.name]  # the killed write's leftover is gone
    path.write_bytes(b"not a checkpoint")
    assert checkpoint.load(path) is None


def _age(path: Path, seconds: float) -> None:
    when = time.time() - seconds
    os.utime(path, (when, when))


@pytest.mark.unit
def test_remove_clears_killed_writes_and_keeps_writes_in_progress(tmp_path: Path) -> None:
    """A leftover untouched for LEFTOVER_SECONDS is a killed write's; a younger one may be another
    process's write in progress (a zombie attempt of the same run) and is kept.
    """
    path = tmp_path / "r.npz"
    path.write_bytes(b"checkpoint")
    old, fresh = tmp_path / ".r.npz.tmp-a1", tmp_path / ".r.npz.tmp-b2"
    for leftover in (old, fresh):
        leftover.write_bytes(b"half")
    _age(old, checkpoint.LEFTOVER_SECONDS + 60)
    checkpoint.remove(path)
    assert [p.name for p in tmp_path.iterdir()] == [fresh.name]


@pytest.mark.unit
@pytest.mark.parametrize(
    "meta",
    ["[1, 2]", '{"format": %d}', '{"format": %d, "position": {"nonsense": 1}}', '"a string"'],
    ids=["a-list", "no-position", "another-position", "a-string"],
)
def test_a_checkpoint_with_metadata_of_another_shape_reads_as_none(tmp_path: Path, meta: str) -> None:
    """Malformed metadata raised, so with --keep-models every retry of the run failed the same way; it is
    no checkpoint instead, and the run starts from the beginning.
    """
    import numpy as np

    path = tmp_path / "r.npz"
    text = meta % checkpoint.FORMAT if "%d" in meta else meta
    np.savez(path, meta=np.array(text), m0=np.zeros(2), o0=np.zeros(1))
    assert checkpoint.load(path) is None


@pytest.mark.unit
def test_places_follow_the_env_the_journal_and_the_results_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(resume.CHECKPOINTS_ENV, raising=False)
    journal = str(tmp_path / "res" / "journal.log")
    res = tmp_path / "res"
    assert resume.places(journal, "s") == resume.Places(res / "checkpoints", results=res)
    db = "postgresql://u@h/d"
    assert resume.places(db, "s", tmp_path / "out", keep_models=True) == resume.Places(
        tmp_path / "out" / "checkpoints", tmp_path / "out" / "models", tmp_path / "out"
    )
    assert resume.places(db, "s").checkpoints == Path("results") / "s" / "checkpoints"
    monkeypatch.setenv(resume.CHECKPOINTS_ENV, str(tmp_path / "ck"))
    assert resume.places(journal, "s").checkpoint("abc") == tmp_path / "ck" / "abc.npz"


GRID = """\
    name: ck
    seeds: [0]
    base:
      data: {dataset: glyphs120, classes: 4, samples_per_class: 10, image_size: 12}
      train: {epochs: 3, batch_size: 8, eval_every_steps: 3}
"""


@pytest.mark.integration
def test_worker_resumes_a_requeued_run_from_its_checkpoint(tmp_path: Path) -> None:
    """In process: a run interrupted after its 3rd record (epoch 1.5) is claimed again, resumes there,
    and its records equal an uninterrupted run's; its checkpoint is gone once it is done.
    """
    from sweep.config import load_grid
    from sweep.config.plan import plan
    from sweep.run import driver, events
    from sweep.run.orchestrate import Options, run_sweep
    from sweep.store import Store, epochs_of

    grid = load_grid(write_grid(tmp_path, GRID))
    reference = run_sweep(grid, Options(in_process=True, results=tmp_path / "whole"))
    spec = plan(grid)[0]
    store = Store.open(tmp_path / "cut" / "journal.log", "ck")
    store.enqueue([spec])
    places = resume.places(store.target, store.name)
    seen: list[events.Event] = []

    def interrupt_after_three(event: events.Event) -> None:
        seen.append(event)
        if sum(isinstance(e, events.EpochDone) for e in seen) == 3:
            raise KeyboardInterrupt

    lease = store.claim_next()
    assert lease is not None
    with pytest.raises(KeyboardInterrupt):
        driver.train(store, [lease], interrupt_after_three, places, Session())
    store.requeue(lease, "interrupted")
    assert places.checkpoint(spec.run_id).exists()
    outcome = run_sweep(grid, Options(in_process=True, results=tmp_path / "cut"))
    assert outcome.exit_code == 0
    runs = store.runs_table()
    assert runs[vocab.RESUMED_FROM_EPOCH].iloc[0] == pytest.approx(1.5)
    done = store.current()[spec.run_id]
    assert [r[vocab.EPOCH] for r in epochs_of(done)] == [0.75, 1, 1.5, 2, 2.25, 3]  # each record once
    whole = pd.read_csv(reference.epochs_csv).drop(columns=list(TIMINGS))
    cut = pd.read_csv(outcome.epochs_csv).drop(columns=list(TIMINGS))
    pd.testing.assert_frame_equal(whole, cut, check_exact=True)
    assert not places.checkpoint(spec.run_id).exists()
    assert vocab.RESUMED_FROM_EPOCH not in pd.read_csv(reference.runs_csv)  # no run resumed there


@pytest.mark.integration
def test_a_failed_run_is_retried_from_epoch_0_not_from_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process: a run that fails in epoch 2, its epoch 1 recorded and checkpointed, is retried
    (--retries 1, the default) from the start, as its checkpoint may hold what made it fail.
    """
    from conftest import sweep_here

    from sweep.config import load_grid
    from sweep.config.plan import plan
    from sweep.store import Store, epochs_of

    monkeypatch.delenv(resume.CHECKPOINTS_ENV, raising=False)
    grid = write_grid(
        tmp_path, GRID.replace("epochs: 3, batch_size: 8, eval_every_steps: 3", "epochs: 2, batch_size: 8")
    )
    spec = plan(load_grid(grid))[0]
    results = tmp_path / "results" / "ck"
    saved = resume.places(str(results / vocab.JOURNAL_FILE), "ck").checkpoint(spec.run_id)
    fit, trained = Single.fit, []  # (epoch, whether a checkpoint was on disk) at each fit

    def fails_once_in_epoch_2(engine: Single, x: object, y: object, epoch: int) -> object:
        trained.append((epoch, saved.exists()))
        if len(trained) == 2:
            raise RuntimeError("a fault of the machine, this once")
        return fit(engine, x, y, epoch)

    monkeypatch.setattr(Single, "fit", fails_once_in_epoch_2)
    outcome, lines = sweep_here(grid)
    assert outcome.exit_code == 0, lines.text
    assert any("failed; retrying it" in line for line in lines.out)
    # attempt 1: epoch 1, then epoch 2 (failing) with epoch 1's checkpoint on disk; attempt 2: epochs 1
    # and 2 again, the checkpoint gone before it starts
    assert trained == [(1, False), (2, True), (1, False), (2, True)]
    first, second = Store.open(results / vocab.JOURNAL_FILE, "ck", create=False).sweep.get_trials()
    assert [first.user_attrs[vocab.ATTEMPT], second.user_attrs[vocab.ATTEMPT]] == [1, 2]
    assert [r[vocab.EPOCH] for r in epochs_of(first)] == [1]
    assert [r[vocab.EPOCH] for r in epochs_of(second)] == [1, 2]  # its own epoch 1, none copied over
    assert vocab.RESUMED_FROM_EPOCH not in second.user_attrs
    assert _rows(epochs_of(second)[:1]) == _rows(epochs_of(first))  # trained again from the same start
    runs = pd.read_csv(outcome.runs_csv)
    assert runs[[vocab.STATUS, vocab.ATTEMPT]].values.tolist() == [["done", 2]]
    assert not saved.exists()


@pytest.mark.unit
def test_a_starting_worker_removes_the_temporaries_killed_checkpoint_writes_left(tmp_path: Path) -> None:
    """Any run's: a run that finished since keeps none for ever; a write younger than 10 minutes may be in
    progress elsewhere and stays, and so does every file that is not a checkpoint's temporary.
    """
    from sweep.train import checkpoint

    old, young = tmp_path / ".bs8-s0-aa.npz.x1y2.tmp", tmp_path / ".bs64-s1-bb.npz.z3.tmp"
    others = [tmp_path / "bs8-s0-aa.npz", tmp_path / ".notes.txt.q.tmp"]
    for path in (old, young, *others):
        path.write_bytes(b"x")
    stale = time.time() - checkpoint.LEFTOVER_SECONDS - 60
    for path in (old, others[0], others[1]):
        os.utime(path, (stale, stale))
    assert checkpoint.sweep_leftovers(tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (young, *others))
    assert checkpoint.sweep_leftovers(tmp_path / "absent") == 0
