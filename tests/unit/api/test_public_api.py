"""The public API: what a user imports from ``nnunet_core`` itself."""

from __future__ import annotations

import subprocess
import sys
import typing

import pytest

import nnunet_core
from nnunet_core.training.trainer.loop import Trainer


def test_trainer_is_importable_from_the_package_root() -> None:
    from nnunet_core import Trainer as PublicTrainer

    assert PublicTrainer is Trainer
    assert "Trainer" in nnunet_core.__all__


def test_planner_is_importable_from_the_package_root_and_upstreams_planners_are_planners() -> None:
    from nnunet_core import Planner
    from nnunet_core.planning import Planner as PlanningPlanner
    from nnunet_core.planning.presets import PRESETS

    assert Planner is PlanningPlanner and "Planner" in nnunet_core.__all__
    assert all(issubclass(cls, Planner) for cls in PRESETS.values())


def test_importing_the_package_does_not_import_torch() -> None:
    """Light commands (verify, fingerprint's help) start without torch's seconds of import."""
    code = "import sys, nnunet_core; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        nnunet_core.NoSuchThing  # noqa: B018


# each public type, and the hook and parameter of Trainer that takes or returns it
HOOK_TYPES = {
    "Configuration": ("build_network", "configuration"),
    "FoldSetup": ("__init__", "setup"),
    "TrainerSettings": ("adjust_schedule", "settings"),
    "TrainerVariant": ("configure_variant", "return"),
    "TrainingTransforms": ("training_transform", "ours"),
}


@pytest.mark.parametrize("name", sorted(HOOK_TYPES))
def test_the_types_of_the_hook_signatures_are_public(name: str) -> None:
    """A user's trainer annotates its hooks without importing our submodules."""
    hook, parameter = HOOK_TYPES[name]
    function = getattr(Trainer, hook)
    hints = typing.get_type_hints(getattr(function, "__func__", function))
    assert getattr(nnunet_core, name) is hints[parameter]
    assert name in nnunet_core.__all__


def test_the_import_forms_of_earlier_trainer_files_still_work() -> None:
    """Users' files and model zips written before training/ had sub-packages import these."""
    import nnunet_core.training.trainer as old_module
    from nnunet_core.training.trainer import Trainer as OldTrainer
    from nnunet_core.training.trainer import TrainerSettings

    assert OldTrainer is Trainer is old_module.Trainer
    assert TrainerSettings is nnunet_core.TrainerSettings


def test_the_trainer_package_imports_without_torch() -> None:
    code = "import sys, nnunet_core.training.trainer; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
