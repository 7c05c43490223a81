"""The workflow's ``{configuration}`` wildcard never matches a folder of the predictions tree that
is no configuration's (issue 36: ``predictions/D/ensemble`` matched the predict rule, whose input
functions then failed on every run in which an ensemble won)."""

from __future__ import annotations

import re

import pytest

from nnunet_core.layout.predictions import configuration_name_pattern


@pytest.mark.parametrize("name", ["ensemble", "final"])
def test_the_trees_own_folders_are_no_configuration(name) -> None:
    assert re.fullmatch(configuration_name_pattern(), name) is None


@pytest.mark.parametrize(
    "name", ["2d", "3d_fullres", "3d_lowres", "3d_cascade_fullres", "ensembles", "final_2d"]
)
def test_every_configuration_name_matches(name) -> None:
    assert re.fullmatch(configuration_name_pattern(), name) is not None
