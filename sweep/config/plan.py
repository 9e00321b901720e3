"""Grid x seeds -> the list of runs, each a frozen `RunSpec` with a stable id.

A run id is ``<slug>-<hash>``: the slug spells out the values that vary in the
grid (``bs64-s0``) so ids are readable in logs and file names; the hash is the
first 8 hex digits of SHA-256 over the full resolved spec, so any change of any
value (varying or not) gives a new id, and the same file always gives the same
ids. Each key's short name in the slug, and whether it is hashed at its default
(only keys of the first release are), come from its declaration in sweep/config/keys.py.
No timestamps, no TensorFlow.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from sweep import vocab
from sweep.config import GridFile, PointConfig, SearchConfig, declared

MAX_ID_BYTES = 200  # a run id names files: with a suffix it stays under a file name's 255 bytes


@dataclass(frozen=True)
class RunSpec:
    """One training run: a grid point plus a seed. A run is a pure function of it."""

    sweep: str
    seed: int
    point: PointConfig
    varying: tuple[tuple[str, Any], ...]  # the grid axes' values at this point, then ("seed", s)

    @property
    def run_id(self) -> str:
        """`<slug>-<hash>`, at most MAX_ID_BYTES: a longer slug (a long folder name in data.path) is cut, since
        the id names files (checkpoints, kept models, TensorBoard folders) and the hash alone identifies it.
        """
        slug, tail = self.slug, f"-{self.spec_hash}"
        room = MAX_ID_BYTES - len(tail)
        if len(slug.encode()) > room:
            slug = slug.encode()[:room].decode(errors="ignore").rstrip("-.")
        return slug + tail

    @property
    def slug(self) -> str:
        return "-".join(_slug_part(key, value) for key, value in self.varying) or "run"

    @property
    def spec_hash(self) -> str:
        canonical = json.dumps(self.resolved(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:8]

    @property
    def settings_hash(self) -> str:
        """The hash of its settings without the seed: the same for every seed of a grid point."""
        canonical = json.dumps(self._point_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:8]

    def resolved(self) -> dict[str, Any]:
        """Everything that determines the run's numbers (not the sweep's name).

        Keys added after the first release are left out while at their default, so
        adding a key never changes the ids (and orphans the results) of existing runs.
        """
        return {"seed": self.seed, **self._point_dict()}

    def _point_dict(self) -> dict[str, dict[str, Any]]:
        """The settings, without later-added keys at their default: also what the store
        keeps, so an older harness can still read runs that do not use newer keys.
        """
        later = declared.added_later()
        return {
            section: {
                k: v
                for k, v in values.items()
                if not (f"{section}.{k}" in later and v == declared.default(f"{section}.{k}"))
            }
            for section, values in self.point.to_dict().items()
        }

    def flat(self) -> dict[str, Any]:
        """Dotted key -> value for every setting, plus seed: the spec columns of runs.csv."""
        flat = {
            f"{section}.{key}": json.dumps(list(value)) if isinstance(value, (tuple, list)) else value
            for section, values in self.point.to_dict().items()
            for key, value in values.items()
        }
        return {"seed": self.seed, **flat}

    def to_json(self) -> str:
        return json.dumps(
            {
                "sweep": self.sweep,
                "seed": self.seed,
                "point": self._point_dict(),
                "varying": [list(kv) for kv in self.varying],
            },
            sort_keys=True,
        )

    @staticmethod
    def from_json(text: str) -> RunSpec:
        raw = json.loads(text)
        return RunSpec(
            sweep=raw["sweep"],
            seed=raw["seed"],
            point=PointConfig.from_dict(raw["point"]),
            varying=tuple((k, v) for k, v in raw["varying"]),
        )


def _slug_part(key: str, value: Any) -> str:
    name = "s" if key == "seed" else declared.declaration(key).slug
    if isinstance(value, bool):
        text = str(int(value))
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    if key == "data.path":
        text = text.rstrip("/").split("/")[-1]
    if key in USER_CODE_KEYS:  # paths by their last part, JSON and lists shortened; the hash tells them apart
        text = ",".join(v.split("/")[-1] for v in value) if isinstance(value, (tuple, list)) else text.split("/")[-1]
        text = text.replace(".py:", ":")[:SLUG_TEXT]
    return name + "".join(c if c.isalnum() or c in "._" else "_" for c in text)


# The keys of the user's own code and its settings (key version 6), and how long a slug part of theirs may be.
USER_CODE_KEYS = ("model.builder", "model.options", "data.loader", "train.early_stopping", "train.callbacks")
SLUG_TEXT = 24


def plan(grid_file: GridFile) -> list[RunSpec]:
    """Every grid point (times every variant) times every seed, in file order, seeds innermost."""
    return [
        RunSpec(sweep=grid_file.name, seed=seed, point=point, varying=settings + (("seed", seed),))
        for point, settings in grid_file.points()
        for seed in grid_file.seeds
    ]


@dataclass(frozen=True)
class SearchGroup:
    """One learning-rate search: a grid point whose lr is left to the search, and the search settings.

    Its trials are `template` at a sampled lr; its best lr is then re-run at every seed
    (`tuned_runs`). The id leaves out train.lr (the untuned reference) and search.trials
    and search.prune, so adding trials later continues the same search.
    """

    template: RunSpec  # the point at search.seed, lr = the untuned base lr
    search: SearchConfig

    @property
    def group_id(self) -> str:
        slug = "-".join(_slug_part(k, v) for k, v in self.template.varying if k != "seed") or "point"
        resolved = self.template._point_dict()
        resolved["train"] = {k: v for k, v in resolved["train"].items() if k != "lr"}
        space = {k: getattr(self.search, k) for k in ("lr_low", "lr_high", "lr_log", "metric", "seed")}
        if self.search.data_seed is not None:  # a search of another split is another search (old ids unchanged)
            space["data_seed"] = self.search.data_seed
        canonical = json.dumps({"point": resolved, "search": space}, sort_keys=True, separators=(",", ":"))
        return f"{slug}-{hashlib.sha256(canonical.encode()).hexdigest()[:8]}"

    def study_name(self) -> str:
        return f"{self.template.sweep}{vocab.LR_SEARCH_MARK}{self.group_id}"

    @property
    def slot_template(self) -> RunSpec:
        """What its trials train: the point at search.seed, on search.data_seed's data where set (held out)."""
        if self.search.data_seed is None:
            return self.template
        return replace(self.template, point=self.template.point.with_value("data.seed", self.search.data_seed))

    def trial_spec(self, lr: float) -> RunSpec:
        return at_lr(self.slot_template, lr)

    def tuned_runs(self, lr: float, seeds: tuple[int, ...]) -> list[RunSpec]:
        return [
            at_lr(replace(self.template, seed=s, varying=self.template.varying[:-1] + (("seed", s),)), lr)
            for s in seeds
        ]


def at_lr(spec: RunSpec, lr: float) -> RunSpec:
    """The run at learning rate `lr`, with train.lr among its varying values (before the seed)."""
    varying = tuple(kv for kv in spec.varying if kv[0] not in ("train.lr", "seed"))
    return replace(
        spec,
        point=spec.point.with_value("train.lr", float(lr)),
        varying=varying + (("train.lr", float(lr)), ("seed", spec.seed)),
    )


def search_groups(grid_file: GridFile) -> list[SearchGroup]:
    """One learning-rate search per grid point (times variants); none without a search: block."""
    if grid_file.search is None:
        return []
    seed = grid_file.search.seed
    return [
        SearchGroup(
            RunSpec(sweep=grid_file.name, seed=seed, point=point, varying=settings + (("seed", seed),)),
            grid_file.search,
        )
        for point, settings in grid_file.points()
    ]
