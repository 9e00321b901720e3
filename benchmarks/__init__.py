"""Benchmarks of the harness, grouped by the question each answers, run from the repository's root
either as modules or by their paths (the two are the same command; `--help` says what each measures):

    python -m benchmarks.speed.bench [--quick]     # the harness against the plain Keras loop
    python benchmarks/speed/bench.py [--quick]     # the same

- common: what the others share: the machine and its timed processes (machine.py), measurements that
  need a fresh process (probes.py), matmul peaks (peaks.py), a sweep with synthetic records
  (synthetic.py), a training configuration timed as a whole process (training.py).
- speed: how fast the harness trains and answers: against the plain Keras loop (bench.py,
  keras_baseline.py), with more workers (workers.py), under a 1,000-point sweep (load.py), on
  TensorFlow and JAX (backend_speed.py), and its commands that do not train (report_speed.py,
  queueing.py).
- packing: packed training, K towers per batch size and runs per hour (pack_bench.py, pack_k.py).
- peers: `sweep run` against Ray Tune and KerasTuner (peer_bench.py).
- costs: what records and levers cost: a run's records (record_cost.py), their density
  (record_density.py), one evaluation (eval_roof.py), BatchNorm recalibration (recal_speed.py),
  measuring settings (overhead.py), tf.data autotuning (autotune.py), the lever experiments (levers.py).
- tools: does it work here: committed results re-trained (reproduce.py), a machine's devices checked
  (device_check.py).

The grids they share (grid.yaml, quick.yaml, synthetic.yaml) are in this folder. No module is named
like one of the standard library's or of `sweep` (tests/test_bench_layout.py): a file run by its path
has its own folder first on sys.path, so such a name would hide the other. Each runnable module starts
by putting the checkout's root first instead, so `benchmarks` and `sweep` are this checkout's.
"""
