"""Check a raw dataset and record the result: ``verify.json`` for a clean one, one line per
problem for a broken one.

One implementation for ``nnunet-core verify``, the commands that verify first (fingerprint,
plan, preprocess) and the workflow, which checks before its first job
(``nnunet_core.workflow.dataset_check``).
"""

from __future__ import annotations

import io
import sys
from contextlib import nullcontext, redirect_stdout
from pathlib import Path

from nnunet_core.dataset.verify import verify_dataset
from nnunet_core.errors import DatasetError
from nnunet_core.io.atomic import write_json
from nnunet_core.io.removal import remove_file
from nnunet_core.layout.preprocessed import VERIFY_JSON
from nnunet_core.layout.roots import Roots, preprocessed_dataset_dir, raw_dataset_dir


def verify_one(
    roots: Roots,
    name: str,
    num_processes: int,
    output: Path | None = None,
    prefix: str = "nnunet-core verify",
    *,
    progress: bool = True,
) -> None:
    """Verify one dataset; raise DatasetError (after one stderr line per problem) if broken.

    Shared with ``fingerprint`` / ``plan-and-preprocess --verify_dataset_integrity``.
    ``progress``: False shows none (the workflow's console: the problems are its first lines).
    """
    raw_dir = raw_dataset_dir(roots, name)
    # Resolve the report path first: a missing preprocessed root should fail before the work.
    output = output or preprocessed_dataset_dir(roots, name) / VERIFY_JSON
    # an older report must not outlive a failed (or interrupted) check; unlink is atomic
    remove_file(output, inside=[output.parent])
    # without progress: no bar, and its lines (stdout) go nowhere
    hidden = nullcontext() if progress else redirect_stdout(io.StringIO())
    with hidden:
        result = verify_dataset(
            raw_dir, name, num_processes=num_processes, disable_progress=None if progress else True
        )
    if len(result.problems) == 1:
        raise DatasetError(result.problems[0])
    if result.problems:
        for problem in result.problems:
            print(f"{prefix}: error: {problem}", file=sys.stderr)
        raise DatasetError(result.summary(name))
    for warning in result.warnings:
        print(f"{prefix}: warning: {warning}", file=sys.stderr)
    write_json(output, result.report)
    report = result.report
    tested = report.get("test_cases_checked", 0)
    test_part = f" + {tested} test case(s)" if tested else ""
    print(
        f"{name}: {report['cases_checked']} case(s){test_part} OK, "
        f"{len(report['channels'])} channel(s), "
        f"labels {report['labels_found']}, {len(result.warnings)} warning(s); report: {output}"
    )
