"""Check prediction inputs as ``verify`` checks test images, before anything is predicted.

ITK reads a truncated NIfTI as zeros and NaN/inf voxels as 0, so without this a broken input
is predicted (exit 0, a segmentation written). Each case's channel files get ``verify``'s
per-file checks (``dataset.verify_case.check_test_case``: complete and readable, finite voxels,
the channels' geometry agrees) with the model's reader, and all cases must share one
dimensionality. Problems are one line each naming the file; the error is a DatasetError (exit 2).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from nnunet_core.dataset.discovery import RawCase
from nnunet_core.dataset.verify_case import check_test_case, display_path
from nnunet_core.errors import DatasetError
from nnunet_core.io.plans import Plans
from nnunet_core.io.readers import reader_for_plans
from nnunet_core.runtime.parallel import map_cases

PREFIX = "nnunet-core predict"


def input_problems(
    cases: Sequence[RawCase], folder: Path, plans: Plans, num_processes: int = 1
) -> list[str]:
    """Every problem of the input ``cases`` (files shown relative to ``folder``'s parent)."""
    reader = reader_for_plans(plans).name
    tasks = [(case.identifier, (case, folder.parent, (), None, reader)) for case in cases]
    checks = map_cases(check_test_case, tasks, num_processes, "check inputs")
    problems = [p for check in checks.values() for p in check.problems]
    dims = {cid: check.ndim for cid, check in checks.items() if check.ndim is not None}
    counts = {d: sum(1 for v in dims.values() if v == d) for d in set(dims.values())}
    if len(counts) > 1:
        majority = max(counts, key=lambda d: (counts[d], d))
        for case in cases:
            ndim = dims.get(case.identifier)
            if ndim is not None and ndim != majority:
                name = display_path(case.images[0], folder.parent)
                problems.append(
                    f"case {case.identifier}: {name}: {ndim}-D image but {counts[majority]} other "
                    f"input(s) are {majority}-D (2-D and 3-D inputs mixed)"
                )
    return problems


def check_inputs(
    cases: Sequence[RawCase], folder: str | Path, plans_file: Path, num_processes: int = 1
) -> None:
    """Raise a DatasetError if any input is broken: one problem is the error's one line; with
    several, each is printed to stderr first and the error sums them up."""
    folder = Path(folder)
    problems = input_problems(cases, folder, Plans.load(plans_file), num_processes)
    if len(problems) == 1:
        raise DatasetError(problems[0])
    if problems:
        for problem in problems:
            print(f"{PREFIX}: error: {problem}", file=sys.stderr)
        msg = f"{len(problems)} problem(s) in the input images in {folder}; nothing was predicted"
        raise DatasetError(msg)
