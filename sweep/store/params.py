"""The sweep study's Optuna params: every trial records the settings that vary in its sweep.

A run's varying settings are its grid axes and its seed (`RunSpec.varying`); `run` also
lists every setting that varies among the sweep's runs on the sweep study (`VARYING_ATTR`:
a variant's key is then recorded, at its value, on the runs of the other variants too, so
importance sees it on every trial). A claimed trial of the sweep study suggests each of them,
so ``trials_dataframe()`` has ``params_train.batch_size``, optuna-dashboard plots them, and parameter importance
(``optuna.importance.get_param_importances(study)``, target = the trial's value, the final
val_acc) works. The values are never drawn: `SpecSampler` answers every suggestion with
the value in the trial's own spec, so a run is still a pure function of its spec, and
run ids are unchanged (params are not part of the spec).

Each key's distribution is fixed by its declaration (`sweep/config/keys.py`), never by the
grid, so adding a value to a grid never meets Optuna's "different distribution" error:

- bool: categorical (False, True); a str key with a fixed set of words (`validators.OneOf`):
  categorical over that set; a free str (a path) is not recorded;
- int: log scale over [1, 2**31 - 1] when the key's check refuses 0 (batch sizes, epochs),
  else linear over [0, 2**31 - 1] (seeds);
- float: the bounds of the key's `validators.NumberIn` (an unbounded end capped at 1e9), on a
  log scale from 1e-9 when the key is positive (lr, width).

The bounds matter to importance: PED-ANOVA (Optuna's default evaluator, and the one
optuna-dashboard uses) counts a numeric param's values in bins over its distribution's
range, so a wide linear range would put every batch size in one bin and rank nothing;
on a log scale each power of two has its own bin. Seeds (linear, from 0) share a bin,
so a seed's importance reads 0 by construction, and so does a float key from 0 with no
upper bound (train.warmup_epochs): compare such keys in the dashboard's plots instead.

A value outside its distribution, None (a key inert at the point), or a distribution a
store written by another version already holds differently is left out of the trial's
params; recording params never fails a run. Trials written before params existed have none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial

from sweep import vocab
from sweep.config import declared, keys
from sweep.config.plan import RunSpec
from sweep.config.validators import NumberIn, OneOf, Validator
from sweep.store.queue import spec_of

INT_HIGH = 2**31 - 1
FLOAT_LOW, FLOAT_HIGH = 1e-9, 1e9
VARYING_ATTR = "varying_settings"  # the sweep study's list of the settings that vary in it


class SpecSampler(optuna.samplers.BaseSampler):
    """The sweep study's sampler: a suggested param is the trial's own setting, read from its spec."""

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return {}

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return spec_of(trial).flat()[param_name]


def list_varying(study: optuna.Study, runs: Iterable[RunSpec]) -> None:
    """Add the settings that vary among `runs` to the sweep's list (a user attribute; `run` writes it)."""
    listed = set(study.user_attrs.get(VARYING_ATTR, []))
    found = listed | {name for spec in runs for name, _ in spec.varying}
    if found != listed:
        study.set_user_attr(VARYING_ATTR, sorted(found))


def record(trial: optuna.Trial, spec: RunSpec) -> list[str]:
    """Suggest the run's own varying settings, and the other settings listed as varying in its sweep
    (a variant's key, at its default in this run), on its claimed trial; return the names recorded.
    """
    flat = spec.flat()
    listed = trial.study.user_attrs.get(VARYING_ATTR, [])
    recorded = []
    for name in dict.fromkeys([*(name for name, _ in spec.varying), *listed]):
        dist = distribution(name)
        if dist is None or not _fits(dist, flat.get(name)):
            continue
        try:
            _suggest(trial, name, dist)
        except Exception:  # noqa: BLE001 - another version's distribution for this name, or a store hiccup:
            continue  # the params are for reading results; recording them never fails or stops a run
        recorded.append(name)
    return recorded


def _suggest(trial: optuna.Trial, name: str, dist: BaseDistribution) -> None:
    if isinstance(dist, CategoricalDistribution):
        trial.suggest_categorical(name, dist.choices)
    elif isinstance(dist, IntDistribution):
        trial.suggest_int(name, dist.low, dist.high, log=dist.log)
    elif isinstance(dist, FloatDistribution):
        trial.suggest_float(name, dist.low, dist.high, log=dist.log)


def _fits(dist: BaseDistribution, value: Any) -> bool:
    if value is None:
        return False
    if isinstance(dist, CategoricalDistribution):
        return value in dist.choices
    if isinstance(dist, (IntDistribution, FloatDistribution)):
        return isinstance(value, (int, float)) and dist.low <= value <= dist.high
    return False


def distribution(name: str) -> BaseDistribution | None:
    """The fixed distribution of a varying setting (a dotted key or "seed"); None if it is not recorded."""
    if name == vocab.SEED:
        return IntDistribution(0, INT_HIGH)
    if name not in declared.declarations():  # listed by a newer version
        return None
    found = declared.declaration(name)
    kind = _kind(name)
    if kind == "bool":
        return CategoricalDistribution((False, True))
    if kind == "str":
        return CategoricalDistribution(found.check.choices) if isinstance(found.check, OneOf) else None
    if kind == "int":
        return IntDistribution(1, INT_HIGH, log=True) if _refuses(found.check, 0) else IntDistribution(0, INT_HIGH)
    if kind == "float" and isinstance(found.check, NumberIn):
        return _float_distribution(found.check)
    return None


def _float_distribution(check: NumberIn) -> FloatDistribution:
    positive = check.low > 0 or (check.low == 0 and check.low_open)
    high = min(check.high, FLOAT_HIGH)
    if positive:
        return FloatDistribution(max(check.low, FLOAT_LOW), high, log=True)
    return FloatDistribution(max(check.low, -FLOAT_HIGH), high)


def _kind(name: str) -> str:
    """bool | int | float | str: the declared type of a key, without its None."""
    section, field = name.split(".")
    declared = {f.name: f.type for f in dataclasses.fields(keys.SECTIONS[section])}[field]
    return str(declared).replace(" | None", "").strip()


def _refuses(check: Validator, value: Any) -> bool:
    try:
        check(value)
    except ValueError:
        return True
    return False
