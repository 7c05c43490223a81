"""Our networks' weights under upstream's names and back (issue 13, part 1).

The stored layouts (``tests/data/upstream_state_dicts``, made by upstream's own network builder
from the same plans) fix what upstream's strict ``load_state_dict`` needs: every key and shape,
and the parameter order an optimizer state follows. Where the peer venv exists, the weights also
cross for real: upstream's network loads ours strictly and computes the same output, and ours
loads upstream's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from nnunet_core.io.plans import load_plans
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.model import build_network
from nnunet_core.model.upstream_names import (
    WeightNamesError,
    our_state_dict,
    upstream_parameter_order,
    upstream_state_dict,
)
from tests.helpers.paths import TEST_DATA
from tests.helpers.peer import HAS_PEER, PEER_BIN

DATA = TEST_DATA
LAYOUTS = sorted((DATA / "upstream_state_dicts").glob("*.json"))


def _layout(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _our_network(layout: dict[str, Any], seed: int = 0) -> torch.nn.Module:
    name = layout["configuration"]
    raw = load_plans(DATA / "plans" / layout["plans_file"]).configuration(name).raw
    raw["architecture"]["arch_kwargs"].update(layout["arch_kwargs_changes"])
    torch.manual_seed(seed)
    configuration = Configuration(name, raw)
    return build_network(configuration, layout["num_input_channels"], layout["num_outputs"])


def _layout_strides(layout: dict[str, Any]) -> list[list[int]]:
    plans = load_plans(DATA / "plans" / layout["plans_file"])
    return plans.configuration(layout["configuration"]).strides


@pytest.fixture(params=LAYOUTS, ids=[p.stem for p in LAYOUTS])
def layout(request) -> dict[str, Any]:
    return _layout(request.param)


def test_our_weights_have_every_upstream_key_and_shape(layout: dict[str, Any]) -> None:
    weights = upstream_state_dict(_our_network(layout))
    assert {k: list(v.shape) for k, v in weights.items()} == layout["state_dict"]


def test_parameter_order_is_upstreams_so_optimizer_states_fit(layout: dict[str, Any]) -> None:
    """An optimizer state lists parameters by position: both networks must agree on it."""
    network = _our_network(layout)
    by_storage: dict[int, str] = {}
    for name, value in upstream_state_dict(network).items():
        by_storage.setdefault(value.data_ptr(), name)  # the first name: upstream's parameter name
    ours = [by_storage[p.data_ptr()] for p in upstream_parameter_order(network)]
    assert ours == layout["named_parameters"]
    assert sum(p.numel() for p in network.parameters()) == layout["num_parameters"]


def test_upstream_names_round_trip_to_ours(layout: dict[str, Any]) -> None:
    network = _our_network(layout)
    back = our_state_dict(upstream_state_dict(network))
    assert back.keys() == network.state_dict().keys()
    assert all(torch.equal(back[k], v) for k, v in network.state_dict().items())
    network.load_state_dict(back)  # strict


def test_ddp_and_compile_prefixes_are_dropped(layout: dict[str, Any]) -> None:
    network = _our_network(layout)
    prefixed = {f"module._orig_mod.{k}": v for k, v in upstream_state_dict(network).items()}
    network.load_state_dict(our_state_dict(prefixed))


def test_copies_that_disagree_are_refused() -> None:
    network = _our_network(_layout(LAYOUTS[0]))
    weights = upstream_state_dict(network)
    key = next(k for k in weights if ".all_modules.1." in k)
    weights[key] = weights[key] + 1
    with pytest.raises(WeightNamesError, match="should repeat"):
        our_state_dict(weights)


# ---------------------------------------------------------------- with upstream's own networks
PEER_SCRIPT = """
import json, sys, torch
from nnunetv2.utilities.get_network_from_plans import get_network_from_plans
sys.path.insert(0, sys.argv[1])
from make_upstream_state_dicts import CASES, PLANS, configuration
name, ours_file, upstream_file = sys.argv[2:5]
plans_file, config_name, channels, outputs, changes = CASES[name]
arch = configuration(json.loads((PLANS / plans_file).read_text()), config_name)["architecture"]
net = get_network_from_plans(arch["network_class_name"], {**arch["arch_kwargs"], **changes},
    arch["_kw_requires_import"], channels, outputs, allow_init=True, deep_supervision=False)
net.eval()
x = torch.load(ours_file, weights_only=True)["input"]
net.load_state_dict(torch.load(ours_file, weights_only=True)["network_weights"])  # strict
with torch.no_grad():
    from_ours = net(x)
torch.manual_seed(1)
other = get_network_from_plans(arch["network_class_name"], {**arch["arch_kwargs"], **changes},
    arch["_kw_requires_import"], channels, outputs, allow_init=True, deep_supervision=False)
other.eval()
with torch.no_grad():
    own = other(x)
result = {"from_ours": from_ours, "network_weights": other.state_dict(), "own": own}
torch.save(result, upstream_file)
"""


@pytest.mark.slow
@pytest.mark.skipif(not HAS_PEER, reason="no peer venv (upstream nnU-Net) here")
@pytest.mark.parametrize("name", ["plain_3d_small", "resenc_2d_dropout"])
def test_weights_cross_to_upstreams_network_and_back(name: str, tmp_path: Path) -> None:
    layout = _layout(DATA / "upstream_state_dicts" / f"{name}.json")
    network = _our_network(layout).eval()
    network.deep_supervision = False
    strides = _layout_strides(layout)
    # twice the total downsampling per axis: the bottleneck keeps 2 voxels for its norms
    spatial = [
        2 * int(torch.tensor([s[axis] for s in strides]).prod()) for axis in range(len(strides[0]))
    ]
    shape = (1, layout["num_input_channels"], *spatial)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(3))
    ours_file, upstream_file = tmp_path / "ours.pth", tmp_path / "upstream.pth"
    torch.save({"network_weights": upstream_state_dict(network), "input": x}, ours_file)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    folder = str(DATA / "upstream_state_dicts")
    command = [
        str(PEER_BIN / "python"),
        "-c",
        PEER_SCRIPT,
        folder,
        name,
        str(ours_file),
        str(upstream_file),
    ]
    subprocess.run(command, check=True, env=env, stdout=sys.stderr)
    result = torch.load(upstream_file, weights_only=True)
    with torch.no_grad():
        expected = network(x)
    torch.testing.assert_close(result["from_ours"], expected, rtol=1e-4, atol=1e-5)
    network.load_state_dict(our_state_dict(result["network_weights"]))  # strict
    with torch.no_grad():
        torch.testing.assert_close(network(x), result["own"], rtol=1e-4, atol=1e-5)
