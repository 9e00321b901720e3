"""`sweep export DIR --tensorboard OUT`: TensorBoard event files without TensorFlow.

``OUT/<run id>/`` holds one event file per run: a scalar per metric per record (step =
the epoch, or the optimizer step where records fall inside epochs) and the HParams
plugin's session data (hparams = the settings that vary in the folder, the run's
status); ``OUT/`` holds the HParams experiment (those settings, and the headline metrics,
whose value the HParams view reads from each run's last record). Open it with
``tensorboard --logdir OUT``.

Summaries are made by TensorBoard's own TF-free protobuf functions (``scalar_pb``,
``hparams_pb``, ``hparams_config_pb``) and written with its ``RecordWriter`` on a plain
file: TensorBoard's ``EventFileWriter`` (and ``tf.summary``) would import TensorFlow
whenever it is installed. Exporting again replaces what an earlier export wrote (files
ending in `SUFFIX`) and nothing else in OUT.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.hparams import summary_v2 as hp
from tensorboard.plugins.scalar import summary_v2 as scalar
from tensorboard.summary.writer.record_writer import RecordWriter

from sweep import vocab
from sweep.base import atomic
from sweep.export.runs import HEADLINE_METRICS, ExportedRuns, ExportError, plain

SUFFIX = ".batchsweep"  # the end of every event file this module writes


def write(results: ExportedRuns, where: str) -> str:
    """Write every run of `results` under the folder `where`; say what was written."""
    out = Path(where)
    folders = [(out / _folder_name(str(run[vocab.RUN_ID])), run) for _, run in results.runs.iterrows()]
    for folder, _ in folders:  # every run's folder before anything is written
        atomic.refuse_link(folder)
    out.mkdir(parents=True, exist_ok=True)  # the folder the user named, a link or not; its run folders are ours
    _write_events(out, [_event(hp.hparams_config_pb(_hparams(results), _headline(results)))])
    for folder, run in folders:
        _write_events(folder, _run_events(results, run))
    return f"tensorboard: {len(results.runs)} runs in {out} (tensorboard --logdir {out})"


def _folder_name(run_id: str) -> str:
    """A run's folder under the export's: its id, which runs.csv may hold in any form (a hand-edited or
    hostile file), checked before anything is written, so no run writes or deletes outside it.
    """
    if Path(run_id).name != run_id or run_id in ("", ".", "..") or "\\" in run_id or "\0" in run_id:
        raise ExportError(f"--tensorboard: runs.csv has a run_id that is not a plain folder name: {run_id!r}")
    return run_id


def _hparams(results: ExportedRuns) -> list[hp.HParam]:
    return [hp.HParam(name) for name in (*results.varying, vocab.STATUS)]


def _headline(results: ExportedRuns) -> list[hp.Metric]:
    return [hp.Metric(m) for m in HEADLINE_METRICS if m in results.metrics]


def _run_events(results: ExportedRuns, run: pd.Series) -> list[event_pb2.Event]:
    run_id = str(run[vocab.RUN_ID])
    start = _start_seconds(run)
    values = {name: plain(run[name]) for name in results.varying}
    settings = {name: value for name, value in values.items() if value is not None}
    settings[vocab.STATUS] = str(run.get(vocab.STATUS, ""))
    events = [_event(hp.hparams_pb(settings, trial_id=run_id, start_time_secs=start), start)]
    elapsed = 0.0
    for _, record in results.records(run_id).iterrows():
        elapsed += float(plain(record.get(vocab.EPOCH_SECONDS)) or 0.0)
        step = results.x(record)
        for metric in results.metrics:
            value = plain(record[metric])
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                events.append(_event(scalar.scalar_pb(metric, float(value)), start + elapsed, step))
    return events


def _start_seconds(run: pd.Series) -> float:
    started = plain(run.get("started"))
    return pd.Timestamp(started).timestamp() if isinstance(started, str) else 0.0


def _event(summary: summary_pb2.Summary, wall_time: float = 0.0, step: int = 0) -> event_pb2.Event:
    return event_pb2.Event(wall_time=wall_time, step=step, summary=summary)


def _write_events(folder: Path, events: list[event_pb2.Event]) -> Path:
    """One event file (TensorBoard's record format) in `folder`, replacing the one an earlier export wrote;
    `write` has refused a run folder that is a link before anything was written.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(f"events.out.tfevents.*{SUFFIX}"):
        old.unlink()
    path = folder / f"events.out.tfevents.{int(time.time())}{SUFFIX}"
    with open(path, "wb") as handle:
        records = RecordWriter(handle)
        records.write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2").SerializeToString())
        for event in events:
            records.write(event.SerializeToString())
    return path
