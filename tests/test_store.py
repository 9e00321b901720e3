"""The Optuna-backed store: idempotent queue, atomic claims, per-epoch records, tables, plain Optuna."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import optuna
import pandas as pd

from conftest import write_grid
from sweep import store, vocab
from sweep.config import load_grid
from sweep.plan import plan


def _study(tmp_path: Path) -> optuna.Study:
    return store.open_study(store.open_storage(tmp_path / "journal.log"), "s")


def _runs(tmp_path: Path):
    return plan(load_grid(write_grid(tmp_path, "name: s\nseeds: [0, 1]\ngrid: {train.batch_size: [8, 64]}\n")))


def _record(epoch: int, val_acc: float) -> dict:
    record = {k: 0.5 for k in vocab.EPOCH_METRICS}
    record.update(epoch=epoch, step=10 * epoch, val_acc=val_acc)
    return record


def test_enqueue_is_idempotent(tmp_path: Path) -> None:
    study, runs = _study(tmp_path), _runs(tmp_path)
    assert store.enqueue(study, runs) == 4
    assert store.enqueue(study, runs) == 0
    assert len(study.trials) == 4
    assert store.counts(study, [r.run_id for r in runs])[vocab.PENDING] == 4


def test_claims_are_exclusive_and_records_arrive_per_epoch(tmp_path: Path) -> None:
    study, runs = _study(tmp_path), _runs(tmp_path)
    store.enqueue(study, runs)
    other = _study(tmp_path)  # a second client on the same journal, like a second worker
    a, b = store.claim_next(study), store.claim_next(other)
    assert a is not None and b is not None and a.spec.run_id != b.spec.run_id
    store.record_epoch(a.trial, _record(1, 0.25))
    assert store.counts(other)[vocab.RUNNING] == 2
    assert store.epochs_table(other)[vocab.VAL_ACC].tolist() == [0.25]  # visible before the run ends
    store.record_epoch(a.trial, _record(2, 0.5))
    store.finish(study, a.trial, vocab.DONE, value=0.5)
    store.finish(other, b.trial, vocab.DIVERGED, error="loss became nan")
    counts = store.counts(_study(tmp_path), [r.run_id for r in runs])
    assert counts == {vocab.DONE: 1, vocab.RUNNING: 0, vocab.FAILED: 0, vocab.DIVERGED: 1, vocab.PRUNED: 0, vocab.PENDING: 2}
    # diverged is final: enqueueing again adds nothing for it
    assert store.enqueue(study, runs) == 0


def test_failed_runs_get_a_new_attempt(tmp_path: Path) -> None:
    study, runs = _study(tmp_path), _runs(tmp_path)
    store.enqueue(study, runs)
    claim = store.claim_next(study)
    store.finish(study, claim.trial, vocab.FAILED, error="Traceback...\nValueError: boom")
    assert store.enqueue(study, runs) == 1
    table = store.runs_table(study)
    row = table[table.run_id == claim.spec.run_id].iloc[0]
    assert (row.status, row.attempt) == (vocab.PENDING, 2)


def test_dead_workers_runs_are_requeued(tmp_path: Path) -> None:
    study, runs = _study(tmp_path), _runs(tmp_path)
    store.enqueue(study, runs)
    child = subprocess.run([sys.executable, "-c", f"""
import sys; sys.path.insert(0, {str(Path(__file__).parent.parent)!r})
from sweep import store
s = store.open_study(store.open_storage({str(tmp_path / 'journal.log')!r}), 's')
c = store.claim_next(s)
store.record_epoch(c.trial, {_record(1, 0.1)!r})
print(c.spec.run_id)
"""], capture_output=True, text=True, check=True)
    run_id = child.stdout.strip()
    assert store.counts(study)[vocab.RUNNING] == 1
    assert store.requeue_dead(study) == [run_id]  # the child process is gone
    table = store.runs_table(study)
    assert table.set_index("run_id").loc[run_id, "status"] == vocab.PENDING
    assert store.requeue_dead(study) == []


def test_plain_optuna_reads_the_sweep(tmp_path: Path) -> None:
    study, runs = _study(tmp_path), _runs(tmp_path)
    store.enqueue(study, runs)
    claim = store.claim_next(study)
    store.record_epoch(claim.trial, _record(1, 0.25))
    store.finish(study, claim.trial, vocab.DONE, value=0.25)
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(tmp_path / "journal.log")))
    loaded = optuna.load_study(study_name="s", storage=storage)
    frame = loaded.trials_dataframe()
    assert len(frame) == 4
    done = frame[frame.state == "COMPLETE"]
    assert done.value.tolist() == [0.25]
    assert done.user_attrs_run_id.tolist() == [claim.spec.run_id]
    assert loaded.trials[done.index[0]].intermediate_values == {1: 0.25}


def test_export_writes_tidy_tables(tmp_path: Path) -> None:
    study, runs = _study(tmp_path), _runs(tmp_path)
    store.enqueue(study, runs)
    claim = store.claim_next(study)
    for epoch in (1, 2):
        store.record_epoch(claim.trial, _record(epoch, 0.1 * epoch))
    store.finish(study, claim.trial, vocab.DONE, value=0.2)
    runs_csv, epochs_csv = store.export_csv(study, tmp_path / "out")
    run_rows, epoch_rows = pd.read_csv(runs_csv), pd.read_csv(epochs_csv)
    assert len(run_rows) == 4 and sorted(run_rows.status) == [vocab.DONE] + [vocab.PENDING] * 3
    assert epoch_rows[["run_id", "epoch", "val_acc"]].values.tolist() == [
        [claim.spec.run_id, 1, 0.1], [claim.spec.run_id, 2, 0.2]]
    assert {"train.batch_size", "seed", *vocab.EPOCH_METRICS} <= set(epoch_rows.columns)
    assert run_rows.set_index("run_id").loc[claim.spec.run_id, "final_val_acc"] == 0.2


def test_a_journal_cut_mid_line_by_a_crash_loses_only_that_line(tmp_path: Path) -> None:
    study, runs = _study(tmp_path), _runs(tmp_path)
    store.enqueue(study, runs)
    claim = store.claim_next(study)
    store.record_epoch(claim.trial, _record(1, 0.25))
    store.record_epoch(claim.trial, _record(2, 0.5))
    journal = tmp_path / "journal.log"
    data = journal.read_bytes()
    cut = data.rindex(b"\n", 0, data.index(b'"epoch_0002"')) + 1 + 30
    with open(journal, "rb+") as handle:  # a crash in the middle of writing epoch 2's record
        handle.truncate(cut)
    reopened = _study(tmp_path)  # repairs the cut line before anything is appended
    assert journal.read_bytes().endswith(b"\n")
    trial = reopened.get_trials(deepcopy=False)[claim.trial.number]
    assert [r["epoch"] for r in store.epochs_of(trial)] == [1]  # epoch 1 kept, the cut epoch 2 dropped
    store.enqueue(reopened, runs)  # appending works and the journal stays readable
    assert len(_study(tmp_path).trials) == 4


def test_a_run_queued_by_a_newer_version_is_refused_not_claimed(tmp_path: Path) -> None:
    import json

    import pytest

    from sweep.config import UnknownSettings

    study, runs = _study(tmp_path), _runs(tmp_path)
    raw = json.loads(runs[0].to_json())
    raw["point"]["train"]["from_the_future"] = 1
    study.enqueue_trial({"run_id": "x", "attempt": 1}, user_attrs={"run_id": "x", "attempt": 1, "spec": json.dumps(raw)})
    with pytest.raises(UnknownSettings, match=r"train.from_the_future .*upgrade this machine"):
        store.claim_next(study)
    assert store.counts(study)[vocab.PENDING] == 1  # still queued, for a newer worker


def test_records_inside_an_epoch_are_all_kept_in_step_order(tmp_path: Path) -> None:
    study, runs = _study(tmp_path), _runs(tmp_path)
    store.enqueue(study, runs)
    claim = store.claim_next(study)
    for epoch, step in ((0.5, 5), (1, 10), (1.5, 15), (2, 20)):  # eval_every_steps: 5 at 10 steps per epoch
        record = _record(epoch, 0.1)
        record.update(epoch=epoch, step=step)
        store.record_epoch(claim.trial, record)
    trial = _study(tmp_path).get_trials(deepcopy=False)[claim.trial.number]
    assert [(r["epoch"], r["step"]) for r in store.epochs_of(trial)] == [(0.5, 5), (1, 10), (1.5, 15), (2, 20)]
    assert trial.intermediate_values == {1: 0.1, 2: 0.1}  # Optuna sees end-of-epoch values only


def test_a_run_being_claimed_is_not_taken_for_a_dead_workers(tmp_path: Path, monkeypatch) -> None:
    """Under load a worker read a claim whose identity was half written (pid not yet there) and
    re-queued it as dead, 50 ms after the claim (benchmarks/load.py, 4 workers). The identity is
    now written host last, and a trial without a host is judged only after CLAIM_SECONDS."""
    assert list(store._worker_identity())[-1] == "worker_host"
    study = _study(tmp_path)
    store.enqueue(study, _runs(tmp_path))
    waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))[0]
    study._storage.set_trial_state_values(waiting._trial_id, state=optuna.trial.TrialState.RUNNING)
    study._storage.set_trial_user_attr(waiting._trial_id, "worker_pid", 12345)  # mid-claim: no host yet
    assert store.requeue_dead(study) == []
    monkeypatch.setattr(store, "CLAIM_SECONDS", 0.0)  # as if its claimer died mid-claim long ago
    assert store.requeue_dead(study) == [waiting.user_attrs["run_id"]]
    ended = study._storage.get_trial(waiting._trial_id)
    assert (ended.state, ended.user_attrs["error"]) == (optuna.trial.TrialState.FAIL, "its worker died while claiming it")
    attempts = [t.user_attrs["attempt"] for t in study.get_trials() if t.user_attrs["run_id"] == waiting.user_attrs["run_id"]]
    assert attempts == [1, 2]  # queued again, nothing lost
