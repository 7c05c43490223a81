"""Whose failure ended a fold: a user's trainer hook, the memory, or something a retry may fix.

The workflow retries a fold job by its exit status (``nnunet_core.cluster.exit_codes``). An
exception raised inside a hook that a user's trainer overrides (``trainer.lookup.HOOKS``: its
``build_loss``, ``set_learning_rate``, ...; ``training_transform``'s function in the data
workers) fails the same way every time: it becomes a ``UserCodeError`` (exit 3, not retried)
naming the hook, the file and line, and the exception. A bug in our own code, raised outside any
of those hooks, is not the user's: it stays as it is (exit 1, retried). Running out of memory is
exit 76 (retried: the next attempt may get a larger node).
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType

from nnunet_core.cluster.exit_codes import out_of_memory_error
from nnunet_core.errors import NnunetCoreError, UserCodeError
from nnunet_core.extension.trainer_code import source_file
from nnunet_core.training.data.workers import WorkerError
from nnunet_core.training.trainer.lookup import HOOKS, resolve_trainer

TRANSFORM_HOOK = "training_transform"  # its function runs in the data workers


@contextmanager
def classified(trainer_name: str) -> Iterator[None]:
    """Re-raise an out-of-memory or a user's hook failure as its one-line error."""
    try:
        yield
    except Exception as exc:
        error = out_of_memory_error(exc) or user_hook_error(exc, trainer_name)
        if error is None:
            raise
        raise error from exc


def hook_codes(cls: type) -> dict[CodeType, str]:
    """The code objects of the hooks ``cls`` overrides below our ``Trainer`` -> hook name."""
    from nnunet_core.training.trainer.loop import Trainer

    if Trainer not in cls.__mro__:
        return {}
    found = {}
    for owner in cls.__mro__[: cls.__mro__.index(Trainer)]:
        for hook in HOOKS:
            attribute = vars(owner).get(hook)
            function = getattr(attribute, "__func__", attribute)  # classmethod, staticmethod
            code = getattr(function, "__code__", None)
            if isinstance(code, CodeType):
                found.setdefault(code, hook)
    return found


def user_hook_error(exc: BaseException, trainer_name: str) -> UserCodeError | None:
    """``exc`` as a UserCodeError when it came out of a hook of the user's trainer, else None
    (our own trainer, our own code, or one of our one-line errors)."""
    if isinstance(exc, NnunetCoreError) and not isinstance(exc, WorkerError):
        return None
    try:
        cls, code = resolve_trainer(trainer_name)
    except NnunetCoreError:
        return None
    if code is None:
        return None  # our trainer: its failures are ours
    if isinstance(exc, WorkerError):
        return _transform_error(exc, trainer_name, cls)
    hooks = hook_codes(cls)
    frames = list(traceback.walk_tb(exc.__traceback__))
    hook_at = next((i for i, (frame, _) in enumerate(frames) if frame.f_code in hooks), None)
    if hook_at is None:
        return None
    hook_frame = frames[hook_at][0]
    file = hook_frame.f_code.co_filename
    inside = [(f, line) for f, line in frames[hook_at:] if f.f_code.co_filename == file]
    line = inside[-1][1]
    message = _first_line(exc)
    detail = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    msg = (
        f"trainer {trainer_name!r}: {file}:{line}: hook {hooks[hook_frame.f_code]} raised {detail}"
    )
    return UserCodeError(msg)


def _transform_error(exc: WorkerError, trainer_name: str, cls: type) -> UserCodeError | None:
    """A data worker's failure is the user's when the trainer overrides ``training_transform``
    and the worker's traceback (text: it crossed a pipe) passes through the trainer's file."""
    if TRANSFORM_HOOK not in hook_codes(cls).values():
        return None
    file = source_file(cls)
    if file is None or f'File "{Path(file)}"' not in str(exc):
        return None
    msg = f"trainer {trainer_name!r}: hook {TRANSFORM_HOOK} ({file}): {_first_line(exc)}"
    return UserCodeError(msg)


def _first_line(exc: BaseException) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), "")[:300]
