"""The harness against its peers: `sweep run` against Ray Tune and KerasTuner on the same grid."""
