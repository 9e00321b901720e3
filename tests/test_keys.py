"""One declaration per grid key: every table derived from the declarations agrees with them."""

from __future__ import annotations

import dataclasses

import pytest

from sweep import analysis
from sweep.config import declared, keys
from sweep.config.declare import COSTS, GRAPH, PACK, REACHES
from sweep.config.keys import SECTIONS, PointConfig
from sweep.config.plan import RunSpec

DECLARED = declared.declarations()


def spec_with(dotted: str, value: object) -> RunSpec:
    return RunSpec(sweep="k", seed=0, point=PointConfig().with_value(dotted, value), varying=((dotted, value),))


def non_default(k: keys.Key) -> object:
    """A valid value other than the default, for any declared key."""
    candidates = (2, 3, 17, 0.5, False, True, "sqrt", "steps", "digits", "scale", "sgd", "minority", "/tmp", "m:f")
    canonical = ('{"depth": 2}', '{"metric": "val_loss", "min_delta": 0.0, "patience": 3}', ("m:f",))
    for candidate in candidates + canonical:
        try:
            if k.check(candidate) == candidate and candidate != k.default:
                return candidate
        except ValueError:
            continue
    raise AssertionError(f"no valid non-default value for {k.name}")


@pytest.mark.unit
def test_every_field_of_the_settings_is_declared_once_with_its_dataclass_default() -> None:
    fields = {f"{section}.{f.name}": f.default for section, cls in SECTIONS.items() for f in dataclasses.fields(cls)}
    assert list(DECLARED) == list(fields)
    for name, k in DECLARED.items():
        assert k.name == name
        assert k.default == fields[name] == PointConfig().value(name) == declared.default(name)
        assert k.check(k.default) == k.default, f"{name}: its default fails its own check"
        assert k.doc and "\n" not in k.doc
        assert k.since >= keys.FIRST_RELEASE
        assert k.role in (None, keys.CONTROL, keys.COMPANION)


@pytest.mark.unit
def test_slugs_are_unique_and_name_the_key_in_run_ids() -> None:
    slugs = declared.slugs()
    assert len(set(slugs.values())) == len(slugs)
    assert "s" not in slugs.values()  # the seed's slug
    for name, k in DECLARED.items():
        assert spec_with(name, non_default(k)).slug.startswith(k.slug), name


@pytest.mark.unit
@pytest.mark.parametrize("name", list(DECLARED))
def test_keys_added_after_the_first_release_are_hashed_only_when_set(name: str) -> None:
    k = DECLARED[name]
    section, field = name.split(".")
    at_default = RunSpec(sweep="k", seed=0, point=PointConfig(), varying=(("seed", 0),)).resolved()
    assert (field in at_default[section]) == (k.since == keys.FIRST_RELEASE)
    assert field in spec_with(name, non_default(k)).resolved()[section]


@pytest.mark.unit
def test_inert_conditions_name_declared_keys_and_valid_values() -> None:
    for k in DECLARED.values():
        if k.only:
            on = DECLARED[k.only.on]
            assert all(on.check(v) == v for v in k.only.values), k.name
            assert on.default not in k.only.values or not k.only.required, k.name  # the default point is valid


@pytest.mark.unit
def test_help_lists_every_key_with_its_doc(capsys: pytest.CaptureFixture[str]) -> None:
    from sweep import cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for name, k in DECLARED.items():
        assert f"  {name:<26} {k.doc}\n" in text, name


@pytest.mark.unit
def test_the_analysis_tables_are_the_declared_roles() -> None:
    # sweep/analysis/settings.py and sweep/report read these tables; they must say what the declarations say
    assert declared.control_defaults() == analysis.CONTROL_DEFAULTS
    assert set(declared.control_companions()) == set(analysis.CONTROL_COMPANIONS)
    assert declared.post_defaults() == analysis.POST_DEFAULTS
    assert declared.toggles() == analysis.TOGGLES
    assert declared.default("model.bn_momentum") == 0.99  # report.py's BatchNorm-lag note
    # a control's default is the setting the claims read; a toggle's post value is a valid value of it
    for name, value in declared.post_defaults().items():
        assert DECLARED[name].check(value) == value


@pytest.mark.unit
def test_dataset_names_are_the_data_sources() -> None:
    from sweep.train import data

    assert set(data.SOURCES) | {keys.GLYPHS120} == set(keys.DATASETS)
    assert set(keys.FILE_DATASETS) <= set(data.SOURCES)


@pytest.mark.integration
def test_the_smallest_image_size_gives_every_pooling_stage_a_map_to_halve() -> None:
    from sweep.train import model

    assert len(model.BASE_CHANNELS) == keys.POOLING_STAGES

    def last_block_input(size: int) -> int:
        net = model.build_model(keys.ModelConfig(), size, 4)
        return net.get_layer(f"conv{keys.POOLING_STAGES - 1}").input.shape[1]

    assert last_block_input(keys.MIN_IMAGE_SIZE) == 2
    assert last_block_input(keys.MIN_IMAGE_SIZE - 1) == 1


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(DECLARED))
def test_runs_pack_together_unless_they_differ_in_a_key_declared_to_shape_the_graph_or_the_pack(name: str) -> None:
    """Each key declares its reach; pack_key is derived from it: runs differing only in a DATA or RUN key
    (their data order, learning rate, stopping rule) still train as one pack, runs differing in any other
    key never do.
    """
    from sweep.train.pack import pack_key

    base = spec_with("train.epochs", 3)
    changed = RunSpec(sweep="k", seed=0, point=base.point.with_value(name, non_default(DECLARED[name])), varying=())
    assert (pack_key(changed) != pack_key(base)) == (DECLARED[name].reach in (GRAPH, PACK))


@pytest.mark.unit
def test_every_key_declares_what_it_reaches() -> None:
    assert {k.reach for k in DECLARED.values()} <= set(REACHES)
    with pytest.raises(ValueError, match="reach must be one of graph, pack, data, run"):
        keys.key(1, keys.positive_int, "doc", slug="x", reach="nothing")


@pytest.mark.unit
def test_what_of_a_steps_cost_a_key_sets_is_one_of_the_declared_kinds() -> None:
    assert {k.cost for k in DECLARED.values()} <= {None, *COSTS}
    with pytest.raises(ValueError, match="cost must be one of model, input, update, batch or None"):
        keys.key(1, keys.positive_int, "doc", slug="x", reach=PACK, cost="nothing")
