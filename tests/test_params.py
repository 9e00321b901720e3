"""The sweep study's Optuna params (sweep/store/params.py): what plain Optuna, its importance
function and the real optuna-dashboard see in a store the harness wrote, and in one written before.
"""

from __future__ import annotations

import shutil
import wsgiref.util
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
import pytest
from optuna.storages.journal import JournalFileBackend

from sweep import vocab
from sweep.config import load_grid
from sweep.config.plan import RunSpec, plan
from sweep.store import Store
from sweep.store.params import distribution
from sweep.vocab import RunStatus
from tests.conftest import REPO, sweep_here, write_grid

ARTICLE = REPO / "results" / "article"


def _plain(journal: Path, name: str) -> tuple[optuna.storages.BaseStorage, optuna.Study]:
    storage = optuna.storages.JournalStorage(JournalFileBackend(str(journal)))
    return storage, optuna.load_study(study_name=name, storage=storage)


def _dashboard_importances(storage: optuna.storages.BaseStorage, study: optuna.Study) -> tuple[str, bytes]:
    """GET /api/studies/<id>/param_importances from the real optuna-dashboard app (WSGI, no server)."""
    import optuna_dashboard  # the test extra has it

    study_id = storage.get_study_id_from_name(study.study_name)
    environ: dict[str, Any] = {}
    wsgiref.util.setup_testing_defaults(environ)
    environ["PATH_INFO"] = f"/api/studies/{study_id}/param_importances"
    answer: dict[str, str] = {}
    body = b"".join(optuna_dashboard.wsgi(storage)(environ, lambda status, *_: answer.setdefault("status", status)))
    return answer["status"], body


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`sweep run experiments/smoke.yaml` (in this process): its results folder."""
    folder = tmp_path_factory.mktemp("smoke")
    grid = folder / "smoke.yaml"
    shutil.copy(REPO / "experiments" / "smoke.yaml", grid)
    outcome, lines = sweep_here(grid)
    assert outcome.counts[RunStatus.DONE] == 2, lines.text  # 2 batch sizes x 1 seed -> 2 runs
    return folder / "results" / "smoke"


@pytest.mark.integration
def test_after_the_smoke_sweep_each_trial_has_its_batch_size_as_a_param(smoke: Path) -> None:
    _, study = _plain(smoke / vocab.JOURNAL_FILE, "smoke")
    frame = study.trials_dataframe()
    runs = pd.read_csv(smoke / vocab.RUNS_CSV)
    assert sorted(frame["params_train.batch_size"]) == [8, 64]
    assert list(frame["params_seed"]) == [0, 0]
    # the trial's value is the run's final val_acc: the target importance uses by default
    by_bs = dict(zip(frame["params_train.batch_size"], frame["value"], strict=True))
    assert by_bs == dict(zip(runs["train.batch_size"], runs["final_val_acc"], strict=True))


@pytest.mark.integration
def test_optuna_dashboard_answers_parameter_importance_on_the_smoke_store(smoke: Path) -> None:
    storage, study = _plain(smoke / vocab.JOURNAL_FILE, "smoke")
    status, body = _dashboard_importances(storage, study)
    assert status.startswith("200"), body
    assert b'"train.batch_size"' in body


def _crafted_store(tmp_path: Path) -> Store:
    """6 batch sizes x 4 seeds, claimed and finished without training: final val_acc falls with the
    batch size, the seed moves it by at most 0.004.
    """
    grid = write_grid(
        tmp_path,
        """\
        name: crafted
        seeds: [0, 1, 2, 3]
        grid:
          train.batch_size: [8, 16, 32, 64, 128, 256]
        """,
    )
    store = Store.open(tmp_path / "journal.log", "crafted")
    store.enqueue(plan(load_grid(grid)))
    while (lease := store.claim_next()) is not None:
        lease = store.start(lease)
        bs, seed = lease.spec.point.train.batch_size, lease.spec.seed
        store.finish(lease, RunStatus.DONE, value=0.9 - 0.1 * bs.bit_length() + 0.001 * seed)
    return store


@pytest.mark.unit
def test_importance_ranks_the_setting_that_moves_val_acc_first(tmp_path: Path) -> None:
    store = _crafted_store(tmp_path)
    importances = optuna.importance.get_param_importances(store.sweep)  # Optuna's default evaluator, PED-ANOVA
    assert set(importances) == {"train.batch_size", "seed"}
    assert importances["train.batch_size"] > 0.7, importances
    storage, study = _plain(tmp_path / "journal.log", "crafted")
    status, body = _dashboard_importances(storage, study)
    assert status.startswith("200") and body.index(b"train.batch_size") < body.index(b'"seed"'), body


@pytest.mark.unit
def test_adding_values_and_keys_to_a_grid_never_meets_a_distribution_error(tmp_path: Path) -> None:
    first = write_grid(tmp_path, "name: g\nseeds: [0]\ngrid:\n  train.batch_size: [8, 64]\n", "first.yaml")
    later = write_grid(
        tmp_path,
        """\
        name: g
        seeds: [0, 7]
        grid:
          train.batch_size: [8, 64, 4096]
          train.optimizer: [adam, sgd]
          train.lr: [0.001, 0.5]
          data.shuffle: [true, false]
        """,
        "later.yaml",
    )
    store = Store.open(tmp_path / "journal.log", "g")
    for grid in (first, later):
        store.enqueue(plan(load_grid(grid)))
        while (lease := store.claim_next()) is not None:
            store.finish(store.start(lease), RunStatus.DONE, value=0.5)
    trials = store.sweep.get_trials(deepcopy=False)
    assert len(trials) == 2 + 3 * 2 * 2 * 2 * 2  # new axes: new run ids (the slug names them)
    expected = {"train.batch_size": 4096, "train.optimizer": "sgd", "train.lr": 0.5, "data.shuffle": False, "seed": 7}
    assert trials[-1].params == expected
    for name in ("train.batch_size", "train.optimizer", "train.lr", "data.shuffle", "seed"):
        assert {str(t.distributions[name]) for t in trials if name in t.distributions} == {str(distribution(name))}


@pytest.mark.unit
def test_a_store_written_before_params_loads_resumes_and_reports(tmp_path: Path) -> None:
    journal = tmp_path / "journal.log"
    shutil.copy(ARTICLE / vocab.JOURNAL_FILE, journal)
    published = pd.read_csv(ARTICLE / vocab.RUNS_CSV)
    store = Store.open(journal, "article", create=False)
    table = store.runs_table()
    assert list(table[vocab.RUN_ID]) == list(published[vocab.RUN_ID])
    assert list(table["final_val_acc"]) == list(published["final_val_acc"])
    runs = plan(load_grid(REPO / "experiments" / "article.yaml"))
    assert {s.run_id for s in runs} == set(published[vocab.RUN_ID])  # every run id unchanged
    assert store.enqueue(runs) == 0  # all done: resuming trains nothing again
    extra = _another_seed(runs[0])
    assert store.enqueue([extra]) == 1
    lease = store.start(store.claim_next())  # type: ignore[arg-type]
    store.finish(lease, RunStatus.DONE, value=0.25)
    assert lease.trial.params["seed"] == 99 and "train.batch_size" in lease.trial.params
    store.export_csv(tmp_path)
    assert len(pd.read_csv(tmp_path / vocab.RUNS_CSV)) == len(published) + 1


def _another_seed(spec: RunSpec) -> RunSpec:
    from dataclasses import replace

    return replace(spec, seed=99, varying=spec.varying[:-1] + (("seed", 99),))
