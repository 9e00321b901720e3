"""`sweep export DIR`: a results folder's runs in the tools users already read results in.

A results folder (``runs.csv`` and ``epochs.csv``, what `sweep run` writes) is read once
into `ExportedRuns`; each target is a module with one function ``write(results, where) -> str``
(what it wrote, in one line), with one entry in `targets` (its flag, help and extra):

- `runs`: the results folder read once (`ExportedRuns`), or why not (`ExportError`);
- `dispatch`: each destination to its target's module, every extra checked before anything is written;
- `to_tensorboard`: event files, one run per run id, with the HParams plugin's data;
- `to_mlflow`: one MLflow run per run id, in an experiment named after the sweep.

Each target's packages are an optional extra; a missing one is an `ExportError` naming the
install command. Like `report`, export reads only the CSV files and never loads TensorFlow
or the store. A new target (a plain CSV or report export) is one more module and one more
entry in `targets.TARGETS`: `sweep export`'s flag and help follow from it.
"""

from sweep.export.dispatch import export, target
from sweep.export.runs import HEADLINE_METRICS, ExportedRuns, ExportError, load, plain

__all__ = ["HEADLINE_METRICS", "ExportError", "ExportedRuns", "export", "load", "plain", "target"]
