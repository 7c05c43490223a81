"""A user's error while the Snakefile is parsed: its message alone, and its own exit status."""

from __future__ import annotations

import io

import pytest

from nnunet_core.errors import ConfigurationError, UserCodeError
from nnunet_core.workflow.parse_errors import one_line_errors


@pytest.mark.parametrize(("error", "status"), [(ConfigurationError, 2), (UserCodeError, 3)])
def test_a_user_error_is_its_line_and_its_exit_status(error: type, status: int) -> None:
    out = io.StringIO()
    with pytest.raises(SystemExit) as info, one_line_errors(out):
        raise error("config training.folds: fold 7 does not exist")
    assert info.value.code == status
    assert out.getvalue() == "config training.folds: fold 7 does not exist\n"
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_a_bug_keeps_its_exception() -> None:
    out = io.StringIO()
    with pytest.raises(KeyError), one_line_errors(out):
        raise KeyError("training")
    assert out.getvalue() == ""


def test_nothing_raised_nothing_printed() -> None:
    out = io.StringIO()
    with one_line_errors(out):
        pass
    assert out.getvalue() == ""
