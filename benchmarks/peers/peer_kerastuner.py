"""The grid as a KerasTuner user trains it: a grid search with one trial per run of the harness.

    python -m benchmarks.peers.peer_kerastuner benchmarks/grid.yaml --directory /tmp/kerastuner

How it maps to `sweep run GRID --workers 1`: `keras_tuner.GridSearch` over two hyperparameters,
the grid's batch sizes and its seeds (`hp.Choice` each, declared up front), so it runs one trial per
run of `sweep plan`, one after another in this process. The hypermodel's `build` seeds, loads the
data and builds and compiles the harness's model (`sweep.train.model.build_model`, compiled as
benchmarks/speed/keras_baseline.py compiles it); its `fit` batches the data at the trial's batch size for
Keras's `fit`, one call per epoch on the harness's data order (benchmarks/peers/peer_trial.py), with KerasTuner's own
callbacks (its per-epoch and per-batch hooks, and the best epoch's weights saved to the trial's
folder, as for any user), and returns the run's history: every epoch's train and val accuracy,
from which KerasTuner records the best epoch (objective `val_accuracy`). KerasTuner's other
work is kept too: it builds the hypermodel once before the search to read its space, and clears
the Keras session before each trial. The threads are those of a single `sweep` worker, from this
process's environment (benchmarks/peers/peer_bench.py sets it).

Prints one line per trial and exits non-zero if a run was not trained.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import os
from typing import Any

from benchmarks.peers import peer_trial

OBJECTIVE = "val_accuracy"


def hypermodel(runs: list[Any]) -> Any:
    """A keras_tuner.HyperModel that trains the run its (batch size, seed) names."""
    import keras
    import keras_tuner

    class GridRun(keras_tuner.HyperModel):
        def build(self, hp: Any) -> Any:
            self.spec = peer_trial.find_run(runs, hp.get("batch_size"), hp.get("seed"))
            model, self.split = peer_trial.start(self.spec)
            return model

        def fit(self, hp: Any, model: Any, *args: Any, callbacks: Any = (), **kwargs: Any) -> Any:
            """The tuner's objective comes from the merged per-epoch history (its best epoch)."""
            history = keras.callbacks.History()
            history.history = {}
            for logs in peer_trial.epochs(self.spec, model, self.split, callbacks):
                for name, value in logs.items():
                    if name != "epoch":  # Keras's History has no such key
                        history.history.setdefault(name, []).append(value)
            return history

    return GridRun()


def space(runs: list[Any]) -> Any:
    """The grid's batch sizes and seeds as KerasTuner hyperparameters."""
    import keras_tuner

    hp = keras_tuner.HyperParameters()
    hp.Choice("batch_size", sorted({peer_trial.key_of(spec)[0] for spec in runs}))
    hp.Choice("seed", sorted({peer_trial.key_of(spec)[1] for spec in runs}))
    return hp


def search(grid: Path, directory: Path) -> Any:
    """Run the grid search; the tuner."""
    import keras_tuner

    runs = peer_trial.plan_runs(grid)
    tuner = keras_tuner.GridSearch(
        hypermodel(runs),
        objective=keras_tuner.Objective(OBJECTIVE, direction="max"),
        hyperparameters=space(runs),
        directory=str(directory),
        project_name="peers",
        overwrite=True,
    )
    tuner.search()
    trials = [t for t in tuner.oracle.trials.values() if t.status == "COMPLETED"]
    trained = {(int(t.hyperparameters.get("batch_size")), int(t.hyperparameters.get("seed"))) for t in trials}
    missing = sorted({peer_trial.key_of(spec) for spec in runs} - trained)
    if missing or len(trials) != len(runs):
        raise SystemExit(
            f"error: KerasTuner: {len(trials)} trial(s) completed; (batch size, seed) not trained: {missing}"
        )
    return tuner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("grid", type=Path, help="a grid over train.batch_size, e.g. benchmarks/grid.yaml")
    parser.add_argument("--directory", type=Path, required=True, help="the tuner's directory (trials, checkpoints)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tuner = search(args.grid, args.directory)
    for trial in tuner.oracle.trials.values():
        metrics = trial.metrics
        print(
            f"batch {trial.hyperparameters.get('batch_size')} seed {trial.hyperparameters.get('seed')}: "
            f"best val_acc {metrics.get_best_value(OBJECTIVE):.3f} acc {metrics.get_last_value('accuracy'):.3f} "
            f"({os.environ.get('TF_NUM_INTRAOP_THREADS', 'default')} thread(s))"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
