"""Benchmarks of the harness, run from the repository's root as modules:

    python -m benchmarks.bench [--quick]          # the harness against the plain Keras loop (bench.py)
    python -m benchmarks.levers                   # the lever experiments of docs/levers.md (levers.py)
    python -m benchmarks.keras_baseline GRID      # the plain Keras loop alone (keras_baseline.py)
    python -m benchmarks.overhead                 # what train.noise_scale or recalibrate_bn cost (overhead.py)

They import the harness's own code (`sweep`); what must run in a fresh process
(a clean TensorFlow, a thread count, an import check) is `python -m benchmarks.probes`.
`load.py` and `workers.py` measure the store under many workers and worker scaling.
"""
