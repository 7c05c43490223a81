"""A ``-tr`` name to the trainer class that trains with it (built-in names first, as upstream).

Built-in names (``nnUNetTrainer`` and upstream's variants) are our ``Trainer``; ``module:Class``
and ``file.py:Class`` are imported; another bare name is looked for in ``nnUNet_extTrainer``'s
folders. ``check_trainer_name`` only parses (no import, no torch: the config check and the
command line call it); ``resolve_trainer`` imports the code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nnunet_core.errors import ConfigurationError, UserCodeError
from nnunet_core.extension.consent import TRUST_FLAG
from nnunet_core.extension.trainer_code import (
    TrainerCode,
    class_location,
    ext_folders,
    is_user_trainer_name,
    load_class,
    parse_trainer_code,
)
from nnunet_core.training.trainer.variants import parse_trainer_name

if TYPE_CHECKING:
    from nnunet_core.training.trainer.loop import Trainer


# the hooks of docs/bring-your-own-method.md (with the class attribute deep_supervision)
HOOKS = (
    "build_network",
    "deep_supervision",
    "build_loss",
    "training_transform",
    "build_optimizer",
    "set_learning_rate",
    "adjust_schedule",
    "configure_variant",
)


def overridden_hooks(cls: type) -> list[str]:
    """The hooks a user's trainer class changes (provenance and the report's methods text)."""
    from nnunet_core.training.trainer.loop import Trainer

    below = cls.__mro__[: cls.__mro__.index(Trainer)] if Trainer in cls.__mro__ else ()
    return [h for h in HOOKS if any(h in vars(k) for k in below)]


def check_trainer_name(name: str) -> TrainerCode | None:
    """None for a built-in name; the user code's location otherwise; a ConfigurationError
    (one line) when the name is neither."""
    if is_user_trainer_name(name):
        code = parse_trainer_code(name)
        _refuse_builtin_class_name(name, code.class_name)
        return code
    try:
        parse_trainer_name(name)
    except ConfigurationError:
        if not ext_folders():
            raise
        return parse_trainer_code(name)  # not found there either: says where it looked
    return None


def _refuse_builtin_class_name(name: str, class_name: str) -> None:
    """A user's class named like a built-in trainer would write its code (``trainer.json``,
    ``trainer_source/``) into the built-in trainer's model folder, where a plain ``-tr`` of that
    name would then find it: refused in one line."""
    if not is_builtin_trainer(class_name):
        return
    msg = (
        f"trainer {name!r}: {class_name} is the name of a built-in trainer, whose model folders "
        "must not hold a user's code: give your class another name"
    )
    raise ConfigurationError(msg)


def resolve_trainer(name: str) -> tuple[type[Trainer], TrainerCode | None]:
    """The class for ``name`` and, for a user's trainer, where its code was found."""
    from nnunet_core.training.trainer.loop import Trainer

    code = check_trainer_name(name)
    if code is None:
        return Trainer, None
    cls = load_class(code)
    if not issubclass(cls, Trainer):
        where = class_location(cls, code)
        msg = f"trainer {name!r}: {where}: {cls.__name__} is no nnunet_core.Trainer"
        raise UserCodeError(msg)
    return cls, code


def is_builtin_trainer(name: str) -> bool:
    """``nnUNetTrainer`` or one of upstream's variant names (their network is ours)."""
    try:
        parse_trainer_name(name)
    except ConfigurationError:
        return False
    return True


def consent_flag_for_trainer(trainer_name: str) -> str:
    """What a prediction with the models of ``trainer_name`` (``training.trainer``) passes: the
    consent flag for a user's trainer, whose code the user named themself; nothing for ours."""
    return "" if is_builtin_trainer(trainer_name) else TRUST_FLAG
