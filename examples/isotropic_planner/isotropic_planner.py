"""A planner of one's own: isotropic voxels at full resolution.

nnU-Net keeps the median spacing of each axis, so thick-slice scans stay anisotropic and the
network pools the fine axes first. This planner resamples every axis to the finest median
spacing instead; patch, batch size and topology then follow from that spacing as usual.
"""

import numpy as np

from nnunet_core import Planner


class IsotropicPlanner(Planner):
    """Full resolution at the finest median spacing on every axis (plans: IsotropicPlans)."""

    def target_spacing(self, spacings, shapes):
        median = super().target_spacing(spacings, shapes)
        return np.full_like(median, median.min())
