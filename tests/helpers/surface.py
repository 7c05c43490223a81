"""Masks with known surface distances for the HD95/NSD tests (unit and command line)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def ball(
    shape: Sequence[int], spacing: Sequence[float], centre_mm: Sequence[float], radius_mm: float
) -> np.ndarray:
    """Voxels (numpy order) whose centres lie within ``radius_mm`` of ``centre_mm``."""
    axes = [np.arange(n) * s for n, s in zip(shape, spacing, strict=True)]
    grids = np.meshgrid(*axes, indexing="ij")
    return sum((g - c) ** 2 for g, c in zip(grids, centre_mm, strict=True)) <= radius_mm**2
