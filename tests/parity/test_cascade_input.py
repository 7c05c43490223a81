"""The cascade's network input and channel count against upstream 2.8.1.

tests/data/cascade/upstream_cascade_input.npz holds two image channels, a crop of a lowres
next-stage segmentation and what upstream's validation stacks from them
(``convert_labelmap_to_one_hot`` onto the data; the parity script checked that training's
``MoveSegAsOneHotToDataTransform`` gives the same); upstream.json the input channels and parameter
counts of upstream's networks for the stored cascade plans.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from nnunet_core.errors import ConfigurationError
from nnunet_core.inference.cascade_input import (
    cascade_input,
    num_input_channels,
    one_hot_foreground,
)
from nnunet_core.io.dataset_json import parse_dataset_json
from nnunet_core.io.plans import Plans
from nnunet_core.model.build import build_network, count_parameters
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA / "cascade"
PLANS = Plans.load(DATA / "plans.json")
DATASET = parse_dataset_json(json.loads((DATA / "dataset.json").read_text()))
UPSTREAM = json.loads((DATA / "upstream.json").read_text())
STORED = dict(np.load(DATA / "upstream_cascade_input.npz"))


def test_stacked_input_is_upstreams() -> None:
    ours = cascade_input(STORED["data"], STORED["previous_seg"], DATASET.label_spec)
    expected = STORED["stacked"]
    assert ours.dtype == expected.dtype == np.float32
    assert ours.shape == expected.shape == (2 + 2, *STORED["previous_seg"].shape)
    assert np.array_equal(ours, expected)
    assert set(np.unique(STORED["previous_seg"])) == {0, 1, 2}  # every label takes part


def test_channel_order_follows_the_foreground_labels() -> None:
    seg = np.array([[[0, 1, 2, 1]]], dtype=np.uint8)
    one_hot = one_hot_foreground(seg, (1, 2), np.float32)
    assert one_hot[:, 0, 0].tolist() == [[0, 1, 0, 1], [0, 0, 1, 0]]
    with_channel = cascade_input(np.zeros((1, 1, 1, 4), np.float16), seg[None], DATASET.label_spec)
    assert with_channel.dtype == np.float16 and with_channel.shape == (3, 1, 1, 4)


def test_a_segmentation_of_another_geometry_is_one_line_naming_the_case() -> None:
    with pytest.raises(ConfigurationError, match=r"case c7: previous stage.*\[2, 3, 4\]"):
        cascade_input(
            np.zeros((1, 2, 3, 5), np.float32), np.zeros((2, 3, 4)), DATASET.label_spec, "c7"
        )


@pytest.mark.parametrize("name", ["3d_lowres", "3d_cascade_fullres"])
def test_input_channels_and_parameters_are_upstreams(name: str) -> None:
    configuration = PLANS.configuration(name)
    assert configuration.is_cascade_stage == (name == "3d_cascade_fullres")
    channels = num_input_channels(configuration, DATASET.num_channels, DATASET.label_spec)
    assert channels == UPSTREAM["input_channels"][name]
    network = build_network(configuration, channels, DATASET.label_spec.num_segmentation_heads)
    assert count_parameters(network) == UPSTREAM["parameters"][name]
