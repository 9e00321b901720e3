"""`sweep export DIR --mlflow URI`: one MLflow run per run, in an experiment named after the sweep.

Each MLflow run is named by the run id (also its tag ``batchsweep.run_id``) and holds:
params = every setting of runs.csv (seed and the dotted grid keys; empty cells left
out), per-record metrics with step = the epoch (the optimizer step where records fall
inside epochs), tags for the status and role, and ``report.md``/``report.html`` of the
folder as artifacts where present. A run whose status is not done ends FAILED.

URI is any MLflow tracking URI: ``sqlite:///mlflow.db`` (a local file; its artifacts
go to ``mlartifacts/`` beside it, not to the working folder), or a server's address.
Exporting again adds only the runs the experiment does not hold yet. Uses the
``MlflowClient`` API only (no active-run state); ``mlflow-skinny`` is enough.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd
from mlflow.entities import Metric, Param
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from sweep import vocab
from sweep.export.runs import ExportedRuns, ExportError, plain
from sweep.vocab import RunStatus

RUN_TAG = "batchsweep.run_id"
ARTIFACTS = ("report.md", "report.html")
BATCH = 1000  # MLflow takes at most 1000 metrics per log_batch


def write(results: ExportedRuns, where: str) -> str:
    """Log every run of `results` to the tracking URI `where`; say what was written."""
    linked = [name for name in ARTIFACTS if (results.folder / name).is_symlink()]
    if linked:  # uploading it would upload whatever file the link points at
        raise ExportError(
            f"{results.folder / linked[0]} is a symbolic link; remove it (or run `sweep report` to write it again): "
            "only the results folder's own files are uploaded"
        )
    try:
        client = MlflowClient(tracking_uri=where)
        experiment = _experiment(client, results.sweep, where)
        done = _logged(client, experiment)
        added = [
            _log_run(client, experiment, results, run) for _, run in results.runs.iterrows() if _id(run) not in done
        ]
    except MlflowException as err:
        raise ExportError(f"--mlflow {where}: {str(err).splitlines()[0]}") from None
    kept = len(results.runs) - len(added)
    return f"mlflow: {len(added)} runs in experiment {results.sweep!r} at {where}" + (
        f" ({kept} already there)" if kept else ""
    )


def _id(run: pd.Series) -> str:
    return str(run[vocab.RUN_ID])


def _experiment(client: MlflowClient, name: str, uri: str) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        return str(found.experiment_id)
    return str(client.create_experiment(name, artifact_location=_artifact_location(uri)))


def _artifact_location(uri: str) -> str | None:
    """For a local SQLite file, `mlartifacts/` beside it (MLflow's default is the working folder)."""
    if not uri.startswith("sqlite:///"):
        return None
    return (Path(uri[len("sqlite:///") :]).resolve().parent / "mlartifacts").as_uri()


def _logged(client: MlflowClient, experiment: str) -> set[str]:
    """The run ids the experiment holds already."""
    found: set[str] = set()
    token = None
    while True:
        page = client.search_runs([experiment], max_results=1000, page_token=token)
        found.update(r.data.tags[RUN_TAG] for r in page if RUN_TAG in r.data.tags)
        token = page.token
        if not token:
            return found


def _log_run(client: MlflowClient, experiment: str, results: ExportedRuns, run: pd.Series) -> str:
    run_id = _id(run)
    tags = {RUN_TAG: run_id, vocab.STATUS: str(run.get(vocab.STATUS)), vocab.ROLE: str(run.get(vocab.ROLE))}
    created = client.create_run(experiment, run_name=run_id, tags=tags)
    mlflow_id = created.info.run_id
    client.log_batch(mlflow_id, params=_params(results, run))
    metrics = _metrics(results, run_id)
    for start in range(0, len(metrics), BATCH):
        client.log_batch(mlflow_id, metrics=metrics[start : start + BATCH])
    for name in ARTIFACTS:
        if (results.folder / name).is_file():
            client.log_artifact(mlflow_id, str(results.folder / name))
    client.set_terminated(mlflow_id, status="FINISHED" if run.get(vocab.STATUS) == RunStatus.DONE else "FAILED")
    return run_id


def _params(results: ExportedRuns, run: pd.Series) -> list[Param]:
    values: dict[str, Any] = {name: plain(run[name]) for name in results.settings}
    return [Param(name, str(value)) for name, value in values.items() if value is not None]


def _metrics(results: ExportedRuns, run_id: str) -> list[Metric]:
    now = int(time.time() * 1000)
    metrics = []
    for _, record in results.records(run_id).iterrows():
        step = results.x(record)
        for name in results.metrics:
            value = plain(record[name])
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                metrics.append(Metric(name, float(value), now, step))
    return metrics
