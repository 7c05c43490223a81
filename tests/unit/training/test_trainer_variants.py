"""Trainer names (``-tr``) parse into upstream's settings; unknown names fail with one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nnunet_core.errors import ConfigurationError
from nnunet_core.training.trainer.variants import known_trainer_names, parse_trainer_name


@pytest.mark.parametrize(
    ("name", "epochs", "axes_3d", "axes_2d"),
    [
        ("nnUNetTrainer", 1000, (0, 1, 2), (0, 1)),
        ("nnUNetTrainer_5epochs", 5, (0, 1, 2), (0, 1)),
        ("nnUNetTrainer_1epoch", 1, (0, 1, 2), (0, 1)),
        ("nnUNetTrainer_250epochs", 250, (0, 1, 2), (0, 1)),
        ("nnUNetTrainer_250epochs_NoMirroring", 250, None, None),
        ("nnUNetTrainer_3epochs_NoMirroring", 3, None, None),
        ("nnUNetTrainerNoMirroring", 1000, None, None),
        ("nnUNetTrainer_onlyMirror01", 1000, (0, 1), (0,)),
        ("nnUNetTrainer_onlyMirror01_1500ep", 1500, (0, 1), (0,)),
        ("nnUNetTrainerNoDeepSupervision", 1000, (0, 1, 2), (0, 1)),
        ("nnUNetTrainer_noDummy2DDA", 1000, (0, 1, 2), (0, 1)),
    ],
)
def test_upstream_names_give_upstream_settings(name, epochs, axes_3d, axes_2d) -> None:
    variant = parse_trainer_name(name)
    assert variant.name == name and variant.num_epochs == epochs
    assert variant.deep_supervision is (name != "nnUNetTrainerNoDeepSupervision")
    assert variant.dummy_2d is (name != "nnUNetTrainer_noDummy2DDA")
    assert variant.mirror_axes(3) == axes_3d
    assert variant.mirror_axes(2) == axes_2d


@pytest.mark.parametrize(
    "name",
    [
        "MyTrainer",
        "nnUNetTrainer_0epochs",
        "nnUNetTrainer_05epochs",
        "nnUNetTrainer_5epoch",
        "nnUNetTrainer_5epochs_NoDA",
        "nnUNetTrainerNoMirroring_5epochs",
        "nnunettrainer",
        "",
    ],
)
def test_unknown_names_fail_with_one_line_listing_the_known_ones(name: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_trainer_name(name)
    message = str(info.value)
    assert "\n" not in message and repr(name) in message
    for known in known_trainer_names():
        assert known in message


def test_the_registry_imports_without_torch() -> None:
    code = (
        "import sys; from nnunet_core.training.trainer import variants; "
        "variants.parse_trainer_name('nnUNetTrainerNoMirroring'); "
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_dummy_2d_augments_an_anisotropic_3d_patch_in_3d() -> None:
    """Upstream's nnUNetTrainer_noDummy2DDA: no dummy 2D, +-30 deg, every axis enlarged."""
    import math

    from nnunet_core.training.augmentation import configure_augmentation

    patch = (8, 64, 64)  # 64 / 8 > 3: the default trainer augments it as dummy 2D
    default = configure_augmentation(patch, parse_trainer_name("nnUNetTrainer").dummy_2d)
    variant = parse_trainer_name("nnUNetTrainer_noDummy2DDA")
    no_dummy = configure_augmentation(patch, variant.dummy_2d)
    assert default.do_dummy_2d and default.initial_patch_size[0] == 8
    assert not no_dummy.do_dummy_2d
    assert no_dummy.rotation == pytest.approx((-math.pi / 6, math.pi / 6))
    assert no_dummy.initial_patch_size[0] > 8  # the first axis is rotated into as well
    assert no_dummy.mirror_axes == (0, 1, 2) and variant.mirror_axes(3) == (0, 1, 2)
    iso = (32, 32, 32)
    assert configure_augmentation(iso, False) == configure_augmentation(iso, True)
