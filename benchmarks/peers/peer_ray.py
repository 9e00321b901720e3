"""The grid as a Ray Tune user trains it: one trial per run of the harness.

    python -m benchmarks.peers.peer_ray benchmarks/grid.yaml --storage /tmp/ray_results [--reuse-actors]

How it maps to `sweep run GRID`: the search space is the grid's batch sizes times its seeds
(`tune.grid_search` over each), so Ray Tune starts one trial per run of `sweep plan`; each trial
is a function trainable that trains its run as the plain Keras loop does (benchmarks/peers/peer_trial.py:
same model, data, seeds, epochs and data order) and calls `tune.report` with train and val
accuracy after every epoch. `--concurrent K` trials train at once (`max_concurrent_trials`), each
asking Ray for K's share of the cores; the threads each trial's actor gets come from this process's
environment, which benchmarks/peers/peer_bench.py sets as `sweep run` sets a worker's (sweep/train/devices.py,
`worker_environment`), and Ray's worker processes inherit it. Everything else is Ray Tune's default
(`reuse_actors=False`: a fresh actor, so a fresh Python and TensorFlow, per trial), except with
`--reuse-actors`, and usage statistics are off (this machine reaches no outside server).

Prints one line per trial (its last epoch's numbers and the threads it trained with) and exits
non-zero if any trial failed or a run was not trained.
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
from sweep.train.devices import cpu_count


def trainable(config: dict[str, Any]) -> None:
    """One Ray Tune trial: the run named by (batch size, seed), reported to Tune every epoch."""
    import keras
    from ray import tune

    from benchmarks.peers import peer_trial as trial

    spec = trial.find_run(trial.plan_runs(Path(config["grid"])), config["batch_size"], config["seed"])
    model, split = trial.start(spec)
    threads = float(os.environ.get("TF_NUM_INTRAOP_THREADS") or 0)  # 0: TensorFlow's default, every core
    for logs in trial.epochs(spec, model, split):
        tune.report({**logs, "run_id": spec.run_id, "threads": threads})
    keras.backend.clear_session()  # as the loop does after each run; matters when the actor is reused


def search_space(grid: Path, runs: list[Any]) -> dict[str, Any]:
    """The grid's batch sizes times its seeds, as Tune's grid search: one trial per run."""
    from ray import tune

    batch_sizes = sorted({peer_trial.key_of(spec)[0] for spec in runs})
    seeds = sorted({peer_trial.key_of(spec)[1] for spec in runs})
    return {
        "grid": str(grid.resolve()),
        "batch_size": tune.grid_search(batch_sizes),
        "seed": tune.grid_search(seeds),
    }


def tune_grid(grid: Path, storage: Path, concurrent: int, reuse_actors: bool) -> Any:
    """Run the search; Tune's ResultGrid."""
    from ray import tune

    runs = peer_trial.plan_runs(grid)
    cpus = max(1, cpu_count() // concurrent)  # each trial's share, as `sweep run` shares cores
    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": cpus}),
        param_space=search_space(grid, runs),
        tune_config=tune.TuneConfig(
            metric="val_accuracy", mode="max", max_concurrent_trials=concurrent, reuse_actors=reuse_actors
        ),
        run_config=tune.RunConfig(storage_path=str(storage.resolve()), name="peers"),
    )
    results = tuner.fit()
    trained = {result.metrics.get("run_id") for result in results if result.error is None}
    missing = sorted({spec.run_id for spec in runs} - trained)
    if results.errors or missing:
        raise SystemExit(f"error: Ray Tune: {len(results.errors)} trial(s) failed; runs not trained: {missing}")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("grid", type=Path, help="a grid over train.batch_size, e.g. benchmarks/grid.yaml")
    parser.add_argument("--storage", type=Path, required=True, help="Tune's storage_path (results, checkpoints)")
    parser.add_argument("--concurrent", type=int, default=2, help="trials at once (default 2)")
    parser.add_argument("--reuse-actors", action="store_true", help="TuneConfig(reuse_actors=True)")
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    results = tune_grid(args.grid, args.storage, args.concurrent, args.reuse_actors)
    for result in results:
        m = result.metrics
        print(
            f"{m['run_id']}: epoch {m['epoch']:.0f} acc {m['accuracy']:.3f} val_acc {m['val_accuracy']:.3f} "
            f"({m['threads']:.0f} thread(s))"
        )
    print(f"{len(results)} trials; reuse_actors={args.reuse_actors}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
