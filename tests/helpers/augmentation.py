"""Inputs for the augmentation tests: patch sizes, a random image with a smooth label map, the
configured training pipeline, and a scripted stand-in for a random generator."""

from __future__ import annotations

import numpy as np
from scipy import ndimage as ndi

from nnunet_core.training.augmentation import configure_augmentation, training_transforms

PATCH_3D = (16, 20, 24)
PATCH_2D = (28, 32)


def labelled_sample(shape, n_labels=3, seed=0, channels=1):
    """Random image plus a smooth label map (values 0..n_labels-1) of ``shape``."""
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((channels, *shape)).astype(np.float32)
    field = ndi.gaussian_filter(rng.standard_normal(shape), 2.0)
    cuts = np.quantile(field, np.linspace(0, 1, n_labels + 1)[1:-1])
    return data, np.digitize(field, cuts).astype(np.int16)[None]


def configured_pipeline(patch):
    """Upstream's augmentation configuration for ``patch`` and the training pipeline it gives."""
    cfg = configure_augmentation(patch)
    tr = training_transforms(patch, cfg.rotation, cfg.do_dummy_2d, cfg.mirror_axes)
    return cfg, tr


class ScriptedRng:
    """Stands in for a Generator: random() and uniform() return scripted values."""

    def __init__(self, randoms, uniforms):
        self.randoms, self.uniforms = list(randoms), list(uniforms)

    def random(self):
        return self.randoms.pop(0)

    def uniform(self, _lo, _hi):
        return self.uniforms.pop(0)
