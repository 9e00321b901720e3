"""What records and levers cost: a run's records, their density, one evaluation, BatchNorm recalibration,
measuring settings, tf.data autotuning and the lever experiments.
"""
