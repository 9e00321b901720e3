"""The post's claims and what the data says about them: the verdict engine, below `run` and `report`.

Reads run summaries (`sweep.analysis`), never the store, TensorFlow or the report's rendering. `run`
asks it what is decided (`run --until-decided`), `report` renders what it found.

- `findings`: what a claim is, its thresholds, and a finding (its checks, their outcome);
- `registry`: the claims C1-C9 as data, and `evaluate`, the findings of a run summary;
- `checks`, `speed_check`, `scaling_checks`: how each claim is checked (C6 from quiet times; C7, C8 across batch sizes);
- `basis`: the numbers each claim is read from (recalibrated, tuned lr, sequential p-values);
- `family`: error control per claim, and the false-discovery view across claims;
- `verdict`: a claim's verdict as a value (`Verdict`): fixed-n or sequential, in full and in short;
- `maps`: a claim checked over every setting of a condition map;
- `headline`: C1's map read setting by setting, raw and recalibrated;
- `reproduction`: the settings with batch 8 and 64 ranked by their distance from the post's numbers;
- `comparable`: the batch-size claims re-read at equal steps, fit and time;
- `attribution`: the attribution arms -> C1's gap per mechanism.
"""

from sweep.claims.registry import CLAIMS, by_id, causes, evaluate, the

__all__ = ["CLAIMS", "by_id", "causes", "evaluate", "the"]
