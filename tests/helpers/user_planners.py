"""A user's planner for the tests: a file written outside the repository, as a user's own."""

from __future__ import annotations

from pathlib import Path

PLANNER_CLASS = "BigPatchPlanner"
PLANS_NAME = "BigPatchPlans"  # the class's default plans name
PATCH_EDGE = 48  # larger than every tiny test image's axes
PLANNER_SOURCE = f'''
from nnunet_core import Planner


class {PLANNER_CLASS}(Planner):
    """A fixed patch of {PATCH_EDGE} voxels per axis, larger than the images (padded)."""

    def initial_patch_size(self, spacing, median_shape):
        return [{PATCH_EDGE}] * len(spacing)


class NotAPlanner:
    pass
'''


def write_planner(folder: Path) -> str:
    """The planner file written into ``folder``; returns its name, ``<file>.py:BigPatchPlanner``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "big_patch_planner.py"
    path.write_text(PLANNER_SOURCE)
    return f"{path}:{PLANNER_CLASS}"
