"""README's `nnunet-core` walkthrough as printed (its own file, so that `make test` runs it beside
the other README commands of test_readme_commands.py instead of after them on one worker)."""

from __future__ import annotations

import pytest

from tests.helpers.readme_commands import (
    CLI_FIRST,
    block_starting_with,
    mirror_checkout,
    run,
    user_shell,
)

pytestmark = pytest.mark.slow


def test_the_plain_command_sequence_runs_as_printed(tmp_path) -> None:
    """README's `nnunet-core` walkthrough, the whole block as one shell script."""
    checkout = mirror_checkout(tmp_path / "checkout")
    script = "set -euo pipefail\n" + "\n".join(block_starting_with(CLI_FIRST))
    env = {k: v for k, v in user_shell(tmp_path / "home").items() if not k.startswith("nnUNet_")}
    run(script, checkout, env)
    work = checkout / "work" / "cli"
    summary = work / "test_pp" / "summary.json"
    assert summary.is_file(), sorted(str(p) for p in work.rglob("*"))[:50]
    assert len(list((work / "test_pp").glob("*.nii.gz"))) == 2
