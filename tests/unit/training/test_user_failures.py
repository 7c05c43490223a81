"""Whose failure it was: a user's hook (exit 3), out of memory (76), or ours (left as it is).

The exceptions are real ones, raised by calling a real user trainer's hooks (loaded from a file
as the train command loads it); the whole command runs in tests/integration/test_no_retry.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nnunet_core.cluster.exit_codes import OutOfMemoryFailure
from nnunet_core.errors import ConfigurationError, UserCodeError
from nnunet_core.training.data.workers import WorkerError
from nnunet_core.training.fold.failures import classified, hook_codes, user_hook_error
from nnunet_core.training.trainer.lookup import resolve_trainer

SOURCE = """\
from nnunet_core import Trainer


def helper():
    raise ValueError("not a hook")


class Mine(Trainer):
    def set_learning_rate(self, epoch):
        raise ValueError(f"bad epoch {epoch}")

    @classmethod
    def build_network(cls, *args):
        return helper()

    def training_transform(self, ours):
        return ours
"""


@pytest.fixture
def mine(tmp_path: Path) -> tuple[str, Path]:
    path = tmp_path / "mine_failures.py"
    path.write_text(SOURCE)
    return f"{path}:Mine", path


def raised(call) -> BaseException:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - the test inspects what was raised
        return exc
    raise AssertionError("nothing raised")


def test_the_overridden_hooks_are_found_by_their_code(mine: tuple[str, Path]) -> None:
    cls, _ = resolve_trainer(mine[0])
    assert sorted(hook_codes(cls).values()) == [
        "build_network",
        "set_learning_rate",
        "training_transform",
    ]


def test_a_hook_that_raises_is_the_users_with_file_line_and_hook(mine: tuple[str, Path]) -> None:
    name, path = mine
    cls, _ = resolve_trainer(name)
    error = user_hook_error(raised(lambda: cls.set_learning_rate(None, 7)), name)
    assert isinstance(error, UserCodeError)
    assert str(error) == (
        f"trainer '{name}': {path}:10: hook set_learning_rate raised ValueError: bad epoch 7"
    )


def test_a_failure_below_a_hook_names_the_last_line_in_the_users_file(
    mine: tuple[str, Path],
) -> None:
    name, path = mine
    cls, _ = resolve_trainer(name)
    error = user_hook_error(raised(lambda: cls.build_network()), name)
    assert error is not None and f"{path}:5: hook build_network raised ValueError" in str(error)


def test_what_no_hook_raised_is_not_the_users(mine: tuple[str, Path]) -> None:
    name, _ = mine
    helper = sys.modules[resolve_trainer(name)[0].__module__].helper  # the user's, not a hook

    def ours() -> None:
        raise ConfigurationError("already one line")

    assert user_hook_error(raised(helper), name) is None  # not called from a hook
    assert user_hook_error(raised(lambda: 1 / 0), name) is None  # our own code's bug
    assert user_hook_error(raised(ours), name) is None  # one of our one-line errors


def test_our_own_trainer_never_blames_a_user(mine: tuple[str, Path]) -> None:
    cls, _ = resolve_trainer(mine[0])
    exc = raised(lambda: cls.set_learning_rate(None, 1))
    assert user_hook_error(exc, "nnUNetTrainer") is None


def test_a_data_workers_failure_in_the_users_transform(mine: tuple[str, Path]) -> None:
    name, path = mine
    text = f'ValueError: bad\nTraceback (most recent call last):\n  File "{path}", line 17'
    error = user_hook_error(
        WorkerError(f"data worker 0 failed on epoch 0 iteration 1: {text}"), name
    )
    assert isinstance(error, UserCodeError)
    assert str(error) == (
        f"trainer '{name}': hook training_transform ({path}): data worker 0 failed on epoch 0 "
        "iteration 1: ValueError: bad"
    )
    elsewhere = WorkerError('data worker 0 died: File "/ours/augment.py", line 3')
    assert user_hook_error(elsewhere, name) is None


def test_classified_turns_out_of_memory_and_hooks_into_their_errors(
    mine: tuple[str, Path],
) -> None:
    import torch

    name, _ = mine
    cls, _ = resolve_trainer(name)
    with pytest.raises(OutOfMemoryFailure, match=r"^out of memory \(OutOfMemoryError: CUDA"):
        with classified(name):
            raise torch.OutOfMemoryError("CUDA out of memory")
    with pytest.raises(UserCodeError, match="hook set_learning_rate raised"):
        with classified(name):
            cls.set_learning_rate(None, 0)
    with pytest.raises(ZeroDivisionError):
        with classified(name):
            _ = 1 / 0
