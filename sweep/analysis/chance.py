"""Whether an arm of a comparison learned: its accuracy over seeds against the did-not-learn limit (twice chance
with many classes), by a one-sided binomial test,
and what the two arms say together (`Arms`): compare them, the cause prevents learning, or no answer at all.

A run at chance is a result, not a broken run: where the treatment arm (unshuffled data, batch 64) stays at
chance while its control learned, the cause prevented learning. Where the control did not learn either, the
comparison has nothing to compare. Reads a run summary (`sweep.analysis.run_summary`) with runs.csv's
`num_classes`, `val_samples` and `train_samples` (`sweep.analysis.health.claims_summary` adds them); without
them there is no test. scipy.special only: scipy.stats would add a second of import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import pandas as pd
from scipy.special import bdtrc  # the binomial distribution's upper tail

from sweep import vocab
from sweep.analysis.estimates import ALPHA
from sweep.analysis.selection import fmt_value, where
from sweep.analysis.summary import column

NUM_CLASSES, VAL_SAMPLES, TRAIN_SAMPLES = "num_classes", "val_samples", "train_samples"  # runs.csv's columns
RUN_COUNTS = (NUM_CLASSES, VAL_SAMPLES, TRAIN_SAMPLES)


def chance_limit(classes: int) -> float:
    """The accuracy at or below which a model learned nothing worth the name: chance plus the smaller of chance
    and a quarter of what lies above it. Twice chance with many classes (0.017 for 120, 0.2 for 10); for two
    classes twice chance would be 1.0, so the limit stays 0.625 there. An arm learned when its accuracy is
    above this limit beyond doubt (`ChanceTest.learned`): pooled over thousands of images, a test against
    chance itself would call 0.0105 against 0.0083 (101 of 9,600 right) "learned".
    """
    chance = 1.0 / classes
    return chance + min(chance, (1.0 - chance) / 4)


def p_above_chance(correct: int, trials: int, chance: float) -> float:
    """One-sided binomial test of H0 "the accuracy is at most chance" against "above it".

    p = P(X >= correct) for X ~ Binomial(trials, chance): how often guessing at `chance` gets `correct` or more
    of `trials` right (`scipy.stats.binomtest(correct, trials, chance, alternative="greater").pvalue`).
    `scipy.special.bdtrc(k, n, p)` is P(X > k), so k = correct - 1.
    """
    if correct <= 0:
        return 1.0
    return float(bdtrc(correct - 1, trials, chance))


@dataclass(frozen=True)
class ChanceTest:
    """One arm's accuracy against chance: the correct answers of its runs, pooled over seeds."""

    metric: str  # the column read: val_acc_recal where every run recorded it, else val_acc (train: train_eval_acc)
    correct: int  # sum over runs of round(accuracy x images evaluated)
    trials: int  # images evaluated, summed over runs
    seeds: int
    chance: float  # 1 / classes

    @property
    def accuracy(self) -> float:
        return self.correct / self.trials

    @property
    def limit(self) -> float:
        return chance_limit(round(1.0 / self.chance))

    @property
    def p(self) -> float:
        """One-sided binomial test of "the accuracy is at most the did-not-learn limit" (`chance_limit`)."""
        return p_above_chance(self.correct, self.trials, self.limit)

    @property
    def learned(self) -> bool:
        """Above the did-not-learn limit at level ALPHA; not rejected, the arm sits at chance."""
        return self.p < ALPHA

    def words(self) -> str:
        """ "val_acc_recal 0.007 over 8 seeds, chance 0.008, limit 0.017, p=1"."""
        return (
            f"{self.metric} {self.accuracy:.3f} over {self.seeds} seed{'' if self.seeds == 1 else 's'}, "
            f"chance {self.chance:.3f}, limit {self.limit:.3f}, {fmt_p(self.p)}"
        )


def fmt_p(p: float) -> str:
    return f"p={p:.2g}" if p >= 1e-300 else "p<1e-300"  # bdtrc underflows to 0 far above chance


def chance_test(rows: pd.DataFrame, metric: str, counts: str = VAL_SAMPLES) -> ChanceTest | None:
    """The arm `rows` at its last record on `metric` (its recalibrated version where every run has it); None
    where the runs lack the counts or mix datasets of different class counts (no one chance to test against).
    """
    recal = column(metric + vocab.RECAL, "last")
    name = recal if recal in rows and rows[recal].notna().all() else column(metric, "last")
    needed = [name, NUM_CLASSES, VAL_SAMPLES, counts]
    if rows.empty or any(c not in rows for c in needed) or rows[needed].isna().any().any():
        return None
    classes = rows[NUM_CLASSES].unique()
    if len(classes) != 1 or classes[0] < 2:
        return None
    # the train_eval subset is as large as the validation set, or the whole training set where that is smaller
    images = rows[[VAL_SAMPLES, counts]].min(axis=1).astype(int)
    correct = (rows[name].astype(float) * images).round().astype(int)
    return ChanceTest(name.removesuffix("_last"), int(correct.sum()), int(images.sum()), len(rows), 1.0 / classes[0])


class Answer(Enum):
    """What a comparison's two arms say before their difference is read."""

    COMPARES = "both arms learned"  # the checks read the difference
    PREVENTS_LEARNING = "prevents learning"  # the treatment at chance (val and train), the control learned
    CANNOT_ANSWER = "control did not learn: cannot answer"  # the control at chance: nothing to compare


@dataclass(frozen=True)
class Arms:
    """The two arms of a comparison against chance: the treatment (the cause, the large batch), its control."""

    treatment: str  # "shuffle=False"
    control: str  # "shuffle=True"
    treatment_val: ChanceTest
    treatment_train: ChanceTest  # train_eval_acc: "high train_acc" needs the training set learned
    control_val: ChanceTest

    @property
    def answer(self) -> Answer:
        if not self.control_val.learned:
            return Answer.CANNOT_ANSWER
        if not self.treatment_val.learned and not self.treatment_train.learned:
            return Answer.PREVENTS_LEARNING
        return Answer.COMPARES

    def words(self) -> str:
        """The named outcome in a sentence with its numbers; "" where both arms learned."""
        if self.answer is Answer.CANNOT_ANSWER:
            return (
                "its control arm did not learn (binomial test against the did-not-learn limit, "
                f"{fmt_p(self.control_val.p)}; "
                f"{self.control}: {self.control_val.words()}): nothing to compare"
            )
        if self.answer is Answer.PREVENTS_LEARNING:
            return (
                f"the cause prevents learning: {self.treatment} at chance ({self.treatment_val.words()}; "
                f"{self.treatment_train.words()}), {self.control} learned ({self.control_val.words()}): "
                "low val_acc supported, high train_acc contradicted"
            )
        return ""


def arms(rows: pd.DataFrame, axis: str, treatment: object, control: object) -> Arms | None:
    """The arms at `axis` = `treatment` and = `control` tested against chance; None where a test cannot be made."""
    at, base = where(rows, axis, treatment), where(rows, axis, control)
    val, train = chance_test(at, vocab.VAL_ACC), chance_test(at, vocab.TRAIN_EVAL_ACC, TRAIN_SAMPLES)
    control_val = chance_test(base, vocab.VAL_ACC)
    if val is None or train is None or control_val is None:
        return None
    name = axis.rsplit(".", 1)[-1]
    return Arms(f"{name}={fmt_value(treatment)}", f"{name}={fmt_value(control)}", val, train, control_val)
