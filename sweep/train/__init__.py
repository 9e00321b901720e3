"""Training one run (or a pack of runs) in one process: the data, the model, the optimizer and the
trainer, its records, and the checkpoints it writes. Knows nothing of the queue (sweep/store) or of
workers (sweep/run); TensorFlow (or another Keras backend) is imported only inside its functions.

- `backends`: which Keras backend trains, and what the trainer can do on it;
- `devices`: the CPU's logical devices, GPUs per worker, threads;
- `data`, `datafiles`, `glyphs`: the built-in datasets, the user's own files and loader, the split and batches;
- `usercode`: importing and calling the user's builder, loader and callbacks;
- `model`, `optim`, `warmup`: the built-in model, the optimizers, the warm-up schedule;
- `trainer`: `Trainer`, the one training loop, for a run alone or a pack: epochs, records, positions;
- `single`, `pack`, `tower_optimizer`: the compiled model it drives, a run's own or K runs as towers of one;
- `compiled`: the compiled model kept between runs of one graph, and seeding;
- `session`: `Session`, a worker's: its compiled model from one run to the next, its trainer's evaluation pipelines;
- `records`: what a record holds, and when records are taken;
- `recal`: BatchNorm statistics recalibrated for the records' second reading;
- `noise`: the gradient noise scale;
- `checkpoint`: what a checkpoint holds, writing it atomically, restoring it;
- `timing`: `sweep time`, quiet seconds per step of each configuration.
"""
