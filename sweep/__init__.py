"""batchsweep: batch-size experiment sweeps on TensorFlow/Keras.

`python -m sweep run grid.yaml` trains every point of a YAML grid and records
train/val accuracy per epoch in an Optuna store. See README.md and docs/design.md.
"""

__version__ = "0.1.0"
