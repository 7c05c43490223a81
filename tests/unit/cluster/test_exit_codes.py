"""The exit-status table: which failures a retry can help, their words, and out-of-memory."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nnunet_core.cluster import exit_codes
from nnunet_core.cluster.exit_codes import (
    EXIT_INTERRUPTED,
    EXIT_OUT_OF_MEMORY,
    EXIT_STOPPED,
    EXIT_STORAGE,
    EXIT_USAGE,
    EXIT_USER_CODE,
    describe,
    is_out_of_memory,
    is_retryable,
    out_of_memory_error,
)
from nnunet_core.errors import ConfigurationError, UserCodeError


@pytest.mark.parametrize(
    ("code", "retryable"),
    [
        (0, False),  # nothing to retry
        (1, True),  # an unexpected crash
        (EXIT_USAGE, False),
        (EXIT_USER_CODE, False),
        (EXIT_STORAGE, False),
        (EXIT_STOPPED, True),  # the walltime warning: the next attempt continues
        (EXIT_OUT_OF_MEMORY, True),
        (EXIT_INTERRUPTED, False),
        (-9, True),  # subprocess: killed by SIGKILL (the OOM killer, a lost node)
        (137, True),  # a shell's 128 + 9
        (143, True),  # a shell's 128 + SIGTERM: preemption
    ],
)
def test_a_retry_only_where_it_can_help(code: int, retryable: bool) -> None:
    assert is_retryable(code) is retryable


def test_nothing_is_retried_after_the_users_own_stop() -> None:
    assert not is_retryable(143, stopped_by_user=True)
    assert not is_retryable(EXIT_STOPPED, stopped_by_user=True)


def test_every_status_has_a_few_words() -> None:
    assert describe(EXIT_USER_CODE).startswith("the user's trainer code failed")
    assert describe(EXIT_STOPPED) == "stopped before the walltime or its deadline"
    assert describe(EXIT_OUT_OF_MEMORY) == "out of memory"
    assert describe(-9) == "killed by SIGKILL"
    assert describe(143) == "killed by SIGTERM"
    assert describe(5) == "exit status 5"
    assert describe(200) == "exit status 200"  # 128 + 72: no such signal


def test_the_error_classes_carry_the_table_statuses() -> None:
    assert UserCodeError.exit_code == EXIT_USER_CODE
    assert issubclass(UserCodeError, ConfigurationError)  # every check that catches one
    assert exit_codes.OutOfMemoryFailure.exit_code == EXIT_OUT_OF_MEMORY


def test_torch_out_of_memory_in_each_of_its_forms() -> None:
    import torch

    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory"))
    assert is_out_of_memory(RuntimeError("[enforce fail] DefaultCPUAllocator: out of memory"))
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("shapes do not match"))
    assert not is_out_of_memory(ValueError("out of memory"))  # only torch's own forms
    assert out_of_memory_error(RuntimeError("expected a tensor")) is None


def test_the_out_of_memory_failure_is_one_line() -> None:
    import torch

    message = "CUDA out of memory. Tried to allocate 20.00 GiB.\nSee the documentation"
    error = out_of_memory_error(torch.OutOfMemoryError(message))
    assert error is not None and "\n" not in str(error)
    assert str(error).startswith(
        "out of memory (OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB.)"
    )


def test_a_command_that_runs_out_of_memory_exits_76_with_one_line(tmp_path) -> None:
    """The CLI's own handling, in a real process: a command that raises torch's error."""
    script = (
        "import sys, torch\n"
        "from nnunet_core import cli\n"
        "from nnunet_core.commands import verify\n"
        "def run(args):\n"
        "    raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 1 GiB')\n"
        "verify.run = run\n"
        f"sys.exit(cli.main(['verify', '-d', '1', '--raw', {str(tmp_path)!r}]))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == EXIT_OUT_OF_MEMORY, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("nnunet-core verify: error: out of memory (OutOfMemoryError: ")
