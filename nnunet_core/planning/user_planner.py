"""A ``-pl`` / ``planning.planner`` name to its ``Planner`` class: a preset, or a user's own.

Planners are named as trainers are (``extension.trainer_code``): a preset's name (``default``,
``ResEncM``, upstream's ``nnUNetPlannerResEncM``, ...), ``/path/to/file.py:Class``,
``package.module:Class``, or a bare class name defined in a ``.py`` file under one of the folders
of ``nnUNet_extPlanner``. A user's planner is imported where it is named, also by the workflow's
config check at parse time: its plans name (``Planner.default_plans_name``) names the files the
workflow's rules make. Planners are light (numpy; ``nnunet_core.planning`` imports no torch).

The plans a user's planner writes record it (``planner_record``: the name, the class, the file
and its sha256). Nothing else travels with a model: the plans are data, and predicting never
runs the planner.
"""

from __future__ import annotations

from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.extension import trainer_code as user_code
from nnunet_core.extension.consent import file_sha256
from nnunet_core.extension.trainer_code import TrainerCode
from nnunet_core.planning.base import Planner
from nnunet_core.planning.presets import find_preset, preset_names

EXT_PLANNER_ENV = "nnUNet_extPlanner"
PLANNER_SOURCE_KEY = "planner_source"  # the plans' record of a user's planner
KIND = "planner"


def user_planner_code(name: str) -> TrainerCode | None:
    """Where a user's planner is (nothing imported); None for a preset; a one-line
    ConfigurationError for a name that is neither."""
    if find_preset(name) is not None:
        return None
    if not user_code.is_user_trainer_name(name) and not user_code.ext_folders(EXT_PLANNER_ENV):
        msg = (
            f"unknown planner {name!r}; choose one of {preset_names()}, or name your own as "
            f"/path/file.py:Class or package.module:Class"
        )
        raise ConfigurationError(msg)
    return user_code.parse_trainer_code(name, kind=KIND, env=EXT_PLANNER_ENV)


def resolve_planner(name: str) -> type[Planner]:
    """The class a planner name stands for, imported and checked to be a ``Planner``."""
    code = user_planner_code(name)
    if code is None:
        preset = find_preset(name)
        assert preset is not None
        return preset
    cls = user_code.load_class(code)
    if not issubclass(cls, Planner):
        msg = (
            f"planner {name!r}: {user_code.class_location(cls, code)}: {cls.__name__} is no "
            "nnunet_core.Planner; derive it from `from nnunet_core import Planner`"
        )
        raise ConfigurationError(msg)
    return cls


def default_plans_name(planner: str) -> str:
    """The plans name a planner writes when none is given (``nnUNetPlans``, a user class's)."""
    return resolve_planner(planner).default_plans_name()


def planner_record(name: str) -> dict[str, Any] | None:
    """What a user's planner's plans record of it (None for a preset): the name as given, the
    class, how it was found, its source file and that file's sha256."""
    code = user_planner_code(name)
    if code is None:
        return None
    source = user_code.trainer_source_path(code)
    return {
        "name": name,
        "class": code.class_name,
        "found_by": code.found_by,
        "file": str(source),
        "sha256": file_sha256(source),
    }
