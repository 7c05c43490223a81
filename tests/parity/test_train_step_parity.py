"""Our training step against upstream's, on the same weights and batches.

``tests/data/train_step/upstream_train_step_<configuration>.json`` holds what upstream's own
trainer (2.8.1, ``initialize`` then ``train_step``) computed for three steps from weights and
batches given by closed formulas (``train_step_inputs.py``, shared with the script that wrote
the file). Here our network, loss, optimizer and step run on the same inputs: every loss and every
parameter after the steps must agree to float32 rounding. Two configurations: the cascade stage
(batch Dice, one-hot input) and 3d_lowres (per-sample Dice, where a lesion-free sample's Dice
term pulls the lesion output down). Equal steps leave chance (initial weights and sample draws)
as the only difference between two trainings of the same schedule.
"""

from __future__ import annotations

import json

import pytest
import torch

from nnunet_core.inference.cascade_input import num_input_channels
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.io.plans import Plans
from nnunet_core.model import build_network
from nnunet_core.model.upstream_names import upstream_parameter_order, upstream_state_dict
from nnunet_core.training.loss import build_loss
from nnunet_core.training.optimizer import OptimizerSettings, build_optimizer, optimizer_step
from tests.data.train_step.train_step_inputs import (
    CONFIGURATIONS,
    STEPS,
    batch,
    expected_file,
    narrow_plans,
    set_formula_weights,
)
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA
CHANNELS = {"3d_cascade_fullres": 3, "3d_lowres": 1}  # image + organ + lesion one-hot; image


def _our_steps(configuration: str, expected: dict) -> tuple[list[float], dict, int, bool]:
    """Our losses, parameters after the steps (upstream's names), input channel count and
    whether the loss used batch Dice."""
    plans = json.loads((DATA / "cascade" / "plans.json").read_text())
    config = Plans(narrow_plans(plans, configuration)).configuration(configuration)
    spec = load_dataset_json(DATA / "cascade" / "dataset.json").label_spec
    channels = num_input_channels(config, 1, spec)
    network = build_network(config, channels, spec.num_segmentation_heads, True)
    parameters = upstream_parameter_order(network)
    names = list(expected["parameters_after"])  # upstream's named_parameters, in its order
    assert [list(p.shape) for p in parameters] == [expected["shapes"][n] for n in names]
    set_formula_weights(list(zip(names, parameters, strict=True)))
    loss_function = build_loss(config, spec)
    settings = OptimizerSettings()
    optimizer = build_optimizer(network, settings)
    losses = []
    for step in range(STEPS):
        data, targets = batch(configuration, step)
        loss = loss_function(network(data), targets)
        losses.append(float(loss.detach()))
        optimizer_step(loss, network, optimizer, None, settings.grad_clip)
    return losses, upstream_state_dict(network), channels, config.batch_dice


@pytest.mark.parametrize("configuration", CONFIGURATIONS)
def test_three_train_steps_equal_upstreams(configuration: str) -> None:
    expected = json.loads(expected_file(configuration).read_text())
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as upstream's figures were made
    try:
        losses, after, channels, batch_dice = _our_steps(configuration, expected)
    finally:
        torch.set_num_threads(threads)
    assert channels == expected["input_channels"] == CHANNELS[configuration]
    assert batch_dice == expected["batch_dice"] == (configuration == "3d_cascade_fullres")
    assert OptimizerSettings().initial_lr == expected["learning_rate"]
    # the steps change the loss: equal losses after them mean equal updates
    assert len(set(expected["losses"])) == STEPS
    # float32 rounding gives ~2e-7 here; a tenfold weight decay or none at all ~5e-6 and more
    assert losses == pytest.approx(expected["losses"], rel=1e-6)
    assert (
        sum(p.numel() for name, p in after.items() if name in expected["parameters_after"])
        == (expected["num_parameters"])
    )
    for name, (total, squares) in expected["parameters_after"].items():
        values = after[name].double()
        assert float(values.sum()) == pytest.approx(total, rel=1e-6, abs=1e-6), name
        assert float((values**2).sum()) == pytest.approx(squares, rel=1e-6), name
