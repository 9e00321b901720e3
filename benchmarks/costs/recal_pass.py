"""One timing of `benchmarks/costs/recal_speed.py`: BatchNorm recalibration's statistics pass with the `sweep`
package the process finds (recal_speed runs this file by its path with PYTHONPATH at the checkout
under test), printed as one JSON line: the median seconds of CALLS passes and a digest of the statistics.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time


def main(calls: int) -> None:
    from sweep.config.keys import DataConfig, ModelConfig
    from sweep.train import data, model, recal
    from sweep.train.compiled import seed_everything

    seed_everything(0)  # the same weights in every process, and TensorFlow's op determinism, as a run
    split = data.load_split(DataConfig(samples_per_class=50))
    shape = split.x_train.shape

    def build():  # noqa: ANN202 - a Keras model
        return model.build_model(ModelConfig(), shape[1], split.num_classes, shape[-1])

    weights = build().get_weights()
    twin = recal.Twin(build, eval_batch=512)
    try:  # the checkout under test may predate the worker session, whose pipelines evaluate now reads
        from sweep.train.session import Session
    except ImportError:
        twin.evaluate(weights, split)  # traces the pass
    else:
        twin.evaluate(weights, split, Session().eval_batches)
    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        twin._recalibrate(split.x_train_eval)
        seconds.append(time.perf_counter() - started)
    numbers = [v.numpy().tobytes() for n in twin.norms for v in (n.moving_mean, n.moving_variance)]
    print(json.dumps({"seconds": statistics.median(seconds), "digest": hashlib.sha256(b"".join(numbers)).hexdigest()}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("calls", type=int, help="passes to time after the first (which traces)")
    main(parser.parse_args().calls)
