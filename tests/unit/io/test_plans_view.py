"""The typed plans view: inheritance, the cascade's previous stage, shared data identifiers, errors.

Every reader of a plans file goes through ``Plans``; these tests pin what it must answer the same
as the raw resolver (``resolve_configuration``) and upstream's plans layout.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.atomic import read_json, write_json
from nnunet_core.io.plans import Plans, load_plans, resolve_configuration
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.preprocessing.preprocessing_config import group_by_identifier

DATA = Path(__file__).resolve().parents[2] / "data"
CASCADE_PLANS = DATA / "cascade" / "plans.json"  # 2d, 3d_lowres, 3d_fullres, 3d_cascade_fullres
LOWRES, FULLRES, CASCADE = "3d_lowres", "3d_fullres", "3d_cascade_fullres"


def _raw() -> dict[str, Any]:
    return read_json(CASCADE_PLANS)


def _with(extra: dict[str, Any]) -> Plans:
    raw = _raw()
    raw["configurations"].update(extra)
    return Plans(raw, "my_plans.json")


def test_every_configuration_resolves_as_the_raw_resolver_does() -> None:
    plans = Plans.load(CASCADE_PLANS)
    assert plans.configuration_names == ["2d", LOWRES, FULLRES, CASCADE]
    for name in plans.configuration_names:
        assert plans.configuration(name).raw == resolve_configuration(_raw(), name)


def test_a_child_is_its_parent_updated_shallowly_with_its_own_keys() -> None:
    fullres = _raw()["configurations"][FULLRES]
    plans = _with(
        {
            "bs4": {"inherits_from": FULLRES, "batch_size": 4},
            "bs4_arch": {"inherits_from": "bs4", "architecture": {"network_class_name": "x"}},
        }
    )
    child = plans.configuration("bs4")
    assert child.batch_size == 4 and fullres["batch_size"] != 4
    assert child.patch_size == tuple(fullres["patch_size"])
    assert child.data_identifier == fullres["data_identifier"]
    assert not child.has("inherits_from")
    grandchild = plans.configuration("bs4_arch")
    assert grandchild.batch_size == 4  # through the chain
    # shallow, as upstream: the child's architecture replaces the parent's whole dict
    assert grandchild.architecture == {"network_class_name": "x"}


def test_typed_values_are_read_from_the_resolved_configuration() -> None:
    raw = _raw()["configurations"][FULLRES]
    configuration = Plans.load(CASCADE_PLANS).configuration(FULLRES)
    assert configuration.name == FULLRES
    assert configuration.spacing == tuple(float(s) for s in raw["spacing"])
    assert configuration.normalization_schemes == tuple(raw["normalization_schemes"])
    assert configuration.use_mask_for_norm == tuple(raw["use_mask_for_norm"])
    assert configuration.strides == raw["architecture"]["arch_kwargs"]["strides"]
    assert configuration.batch_dice is raw["batch_dice"]
    assert configuration.resampling_function("data") == raw["resampling_fn_data"]
    assert configuration.resampling_function_kwargs("seg") == raw["resampling_fn_seg_kwargs"]
    assert configuration.resampling_function("missing") is None
    assert Configuration("x", {"next_stage": ["a", "b"]}).next_stage == ["a", "b"]


def test_the_previous_stage_is_found_through_inheritance_too() -> None:
    plans = _with({"cascade_bs4": {"inherits_from": CASCADE, "batch_size": 4}})
    assert plans.previous_stage_of(CASCADE) == LOWRES
    assert plans.previous_stage_of("cascade_bs4") == LOWRES  # inherited, not written
    assert plans.previous_stage_of(FULLRES) is None
    assert plans.configuration(LOWRES).next_stage == [CASCADE]
    assert [n for n in plans.configuration_names if not plans.is_trainable(n)] == [
        CASCADE,
        "cascade_bs4",
    ]


def test_configurations_sharing_data_are_grouped_by_identifier() -> None:
    plans = _with({"fullres_bs4": {"inherits_from": FULLRES, "batch_size": 4}})
    groups = plans.data_identifier_groups()
    assert groups == {
        "nnUNetPlans_2d": ["2d"],
        "nnUNetPlans_3d_lowres": [LOWRES],
        "nnUNetPlans_3d_fullres": [FULLRES, CASCADE, "fullres_bs4"],
    }
    assert plans.data_identifier_groups([CASCADE, LOWRES, CASCADE]) == {
        "nnUNetPlans_3d_fullres": [CASCADE],
        "nnUNetPlans_3d_lowres": [LOWRES],
    }
    # a cascade stage has no data of its own: its parent's preprocessing makes it
    assert plans.preprocessing_configuration(CASCADE) == FULLRES
    assert plans.preprocessing_configuration("fullres_bs4") == "fullres_bs4"
    # preprocessing runs once per group, for all of its configurations
    shared = group_by_identifier(plans, [CASCADE, FULLRES, "2d"])
    assert [c.configurations for c in shared] == [(CASCADE, FULLRES), ("2d",)]


def test_sharing_an_identifier_with_different_data_is_refused() -> None:
    plans = _with({"coarse": {"inherits_from": FULLRES, "spacing": [9.0, 9.0, 9.0]}})
    with pytest.raises(ConfigurationError, match=r"3d_fullres and coarse share data_identifier"):
        group_by_identifier(plans, [FULLRES, "coarse"])


def test_an_unknown_configuration_is_one_line_naming_the_file_and_the_choices() -> None:
    plans = Plans.load(CASCADE_PLANS)
    with pytest.raises(ConfigurationError) as error:
        plans.configuration("3d_typo")
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"{CASCADE_PLANS}: no configuration '3d_typo'")
    assert message.endswith(f"(available: 2d, {LOWRES}, {FULLRES}, {CASCADE})")
    with pytest.raises(ConfigurationError, match=r"^my_plans.json: no configuration 'x'"):
        _with({}).previous_stage_of("x")


def test_broken_inheritance_and_missing_keys_are_named() -> None:
    plans = _with({"orphan": {"inherits_from": "gone"}, "a": {"inherits_from": "b"}})
    plans_cycle = _with({"a": {"inherits_from": "b"}, "b": {"inherits_from": "a"}})
    with pytest.raises(ConfigurationError, match=r"configuration 'gone' not in plans nnUNetPlans"):
        plans.configuration("orphan")
    with pytest.raises(ConfigurationError, match=r"inheritance cycle: a -> b -> a"):
        plans_cycle.configuration("a")
    bare = Plans({"plans_name": "P", "configurations": {"c": {"spacing": [1.0]}}})
    with pytest.raises(ConfigurationError, match=r"^plans P configuration c: missing 'patch_size'"):
        _ = bare.configuration("c").patch_size
    with pytest.raises(ConfigurationError, match=r"^x.json: no 'configurations'"):
        Plans({"plans_name": "P"}, "x.json")
    with pytest.raises(ConfigurationError, match=r"plans file not found"):
        load_plans(DATA / "no_such_plans.json")


def test_plans_level_values_and_defaults() -> None:
    plans = Plans.load(CASCADE_PLANS)
    raw = _raw()
    assert plans.name == raw["plans_name"]
    assert plans.dataset_name == raw["dataset_name"]
    assert plans.transpose_forward == tuple(raw["transpose_forward"])
    assert plans.transpose_backward == tuple(raw["transpose_backward"])
    assert plans.image_reader_writer == raw["image_reader_writer"]
    intensity = raw["foreground_intensity_properties_per_channel"]
    assert plans.foreground_intensity_properties == intensity
    empty = Plans({"configurations": {}})
    assert (empty.name, empty.dataset_name, empty.image_reader_writer) == ("", None, None)
    assert empty.transpose_forward == empty.transpose_backward == (0, 1, 2)
    assert empty.foreground_intensity_properties is None


def test_the_view_is_read_only_and_writes_back_byte_identical(tmp_path: Path) -> None:
    plans = Plans.load(CASCADE_PLANS)
    before = copy.deepcopy(plans.raw)
    plans.raw["configurations"].clear()
    plans.configuration(FULLRES).raw["batch_size"] = 99
    assert plans.raw == before
    assert plans.configuration(FULLRES).batch_size != 99
    write_json(tmp_path / "view.json", plans.raw)
    write_json(tmp_path / "dict.json", json.loads(CASCADE_PLANS.read_text()))
    assert (tmp_path / "view.json").read_bytes() == (tmp_path / "dict.json").read_bytes()
    assert list(plans.raw) == list(_raw())  # key order kept (upstream's)
