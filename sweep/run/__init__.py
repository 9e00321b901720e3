"""Running a sweep: the orchestrator that queues a grid and trains it in phases, worker processes and
their coordinator, Slurm arrays, and seeds added until the checks are decided.

- `orchestrate`: a grid in, an outcome out (`run_sweep`, `queue_sweep`, `join`);
- `stores`: where a sweep's results and store are, and its store opened or why not in one line;
- `workforce`: where each worker runs, its flags, and a dead worker's runs;
- `coordinator`: starting worker processes and showing their progress;
- `events`: what a worker tells whoever started it, one JSON line each;
- `worker`, `mates`, `driver`, `endings`: the worker loop, the run it claims next and the runs that pack
  with it, the one driver that trains claimed runs and records them, and how a run ends;
- `resume`: checkpoints from a worker's side: where they live, resuming, cleaning up;
- `interrupts`: a worker's SIGTERM or Ctrl-C, never lost inside a library: the run is queued again;
- `watchdog`: stopping a worker whose run makes no record;
- `preflight`: the user's code tried before anything is queued;
- `until`: `run --until-decided`, seeds only where checks are undecided;
- `study`: `sweep study` of a grid file: its quiet timing, plan, training and report;
- `slurm`: the batch script of a Slurm job array, and submitting it;
- `snapshot`: `sweep export` of a sweep's store;
- `sweep_status`: `sweep status`;
- `folders`: a results folder as a command's argument: its store, and the sweep it holds.
"""
