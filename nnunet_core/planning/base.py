"""``Planner``: the experiment planner, a class whose hooks a user's planner overrides.

``from nnunet_core import Planner`` (or ``nnunet_core.planning.Planner``) is the public base of
a planner of one's own (docs/bring-your-own-method.md). Its defaults are nnU-Net v2.8.1's
``ExperimentPlanner`` number for number, and upstream's ResEnc planners are small subclasses of
it (``planning.presets``), so every plans file made here, ours or a user's, goes through the same
steps: target spacing, then per configuration a starting patch, its topology and network, shrunk
until the memory estimate fits the GPU memory target, then the batch size. The VRAM estimate is
computed analytically (``feature_map_size``) instead of by instantiating a torch network.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from nnunet_core.errors import ConfigurationError
from nnunet_core.planning.feature_map_size import (
    plain_unet_feature_map_size,
    resenc_unet_feature_map_size,
)
from nnunet_core.planning.plan_parts import (
    PLAIN_UNET,
    PREPROCESSOR_NAME,
    normalization_schemes,
    plain_number,
    reader_writer_name,
    resampling_settings,
    unet_architecture,
)
from nnunet_core.planning.target_spacing import (
    compute_new_shape,
    fullres_target_spacing,
    transpose_axes,
)
from nnunet_core.planning.topology import (
    DEFAULT_MIN_FEATURE_MAP_SIZE,
    Topology,
    pool_and_conv_props,
)

LOWRES, FULLRES, CASCADE = "3d_lowres", "3d_fullres", "3d_cascade_fullres"
REFERENCE_BATCH_SIZE = {2: 12, 3: 2}
MIN_BATCH_SIZE = 2
LOWRES_CREATION_THRESHOLD = 0.25
LOWRES_SPACING_STEP = 1.03


class Planner:
    """Plans an experiment from a dataset's fingerprint: override a hook to change one choice.

    The class attributes are the memory model: a network of ``network`` with these blocks per
    stage, and the feature-map sizes (``reference_3d``/``reference_2d``) that fit
    ``reference_gb`` GB at the reference batch size. ``plans_name`` names the plans file; left
    out, a subclass's plans are named after its class (``default_plans_name``).
    """

    plans_name: ClassVar[str | None] = None
    network: ClassVar[str] = PLAIN_UNET
    blocks_encoder: ClassVar[tuple[int, ...]] = (2,) * 14
    blocks_decoder: ClassVar[tuple[int, ...]] = (2,) * 13
    reference_3d: ClassVar[int] = 560_000_000
    reference_2d: ClassVar[int] = 85_000_000
    reference_gb: ClassVar[float] = 8
    max_dataset_covered: ClassVar[float] = 0.05

    def __init__(
        self,
        gpu_memory_target_gb: float | None = None,
        overwrite_target_spacing: Sequence[float] | None = None,
        plans_name: str | None = None,
    ) -> None:
        gb = gpu_memory_target_gb
        self.gpu_memory_target_gb = float(gb) if gb is not None else float(self.reference_gb)
        if self.gpu_memory_target_gb <= 0:
            msg = f"gpu memory target must be > 0 GB, got {gpu_memory_target_gb}"
            raise ConfigurationError(msg)
        self.overwrite_target_spacing = overwrite_target_spacing
        self.plans_identifier = plans_name or self.default_plans_name()
        self._estimates: dict[str, int] = {}

    # --- hooks ----------------------------------------------------------------------------------

    @classmethod
    def default_plans_name(cls) -> str:
        """The plans' name when none is given: the class's own ``plans_name``, else derived from
        the class name (``BigPatchPlanner`` -> ``BigPatchPlans``), so that a subclass never
        writes over the plans of the planner it extends."""
        own = vars(cls).get("plans_name")
        if own:
            return str(own)
        stem = re.sub(r"Planner$", "", cls.__name__)
        return f"{stem}Plans"

    def target_spacing(
        self, spacings: Sequence[Sequence[float]], shapes: Sequence[Sequence[int]]
    ) -> np.ndarray:
        """The full-resolution spacing (axes as in the images): the median, or the 10th
        percentile on a strongly anisotropic axis (upstream's rule)."""
        return fullres_target_spacing(spacings, shapes)

    def initial_patch_size(
        self, spacing: Sequence[float], median_shape: Sequence[float]
    ) -> Sequence[float]:
        """The patch to start from before it is shrunk to fit the memory target: 256**3 (2-D:
        2048**2) voxels in the spacing's aspect ratio, clipped to the median image shape."""
        dim = len(spacing)
        aspect = 1 / np.array(spacing, dtype=np.float64)
        volume = 256**3 if dim == 3 else 2048**2
        initial = [round(i) for i in aspect * (volume / np.prod(aspect)) ** (1 / dim)]
        return np.minimum(initial, np.asarray(median_shape[:dim]))

    def topology(self, spacing: Sequence[float], patch_size: Sequence[float]) -> Topology:
        """Pooling strides, kernel sizes and the patch padded to what the pooling divides."""
        return pool_and_conv_props(spacing, patch_size, DEFAULT_MIN_FEATURE_MAP_SIZE)

    def architecture(self, dim: int, topology: Topology) -> dict[str, Any]:
        """The plans' ``architecture`` entry for this topology (network class and its kwargs)."""
        return unet_architecture(
            self.network,
            dim,
            topology.strides,
            topology.kernel_sizes,
            self.blocks_encoder,
            self.blocks_decoder,
        )

    def memory_estimate(self, patch_size: Sequence[int], architecture: dict[str, Any]) -> int:
        """The memory proxy of one sample: the summed size of the network's feature maps."""
        kwargs = architecture["arch_kwargs"]
        key = f"{list(patch_size)}_{kwargs['strides']}"
        if key not in self._estimates:
            residual = "n_blocks_per_stage" in kwargs
            count = resenc_unet_feature_map_size if residual else plain_unet_feature_map_size
            self._estimates[key] = count(
                patch_size,
                kwargs["strides"],
                kwargs["features_per_stage"],
                kwargs["n_blocks_per_stage" if residual else "n_conv_per_stage"],
                kwargs["n_conv_per_stage_decoder"],
                self._num_classes,
            )
        return self._estimates[key]

    def memory_target(self, dim: int) -> float:
        """The estimate that fits the GPU memory target at the reference batch size."""
        reference = self.reference_3d if dim == 3 else self.reference_2d
        return reference * (self.gpu_memory_target_gb / self.reference_gb)

    def too_large(self, estimate: int, target: float, dim: int) -> bool:
        """Whether a patch must shrink (upstream's plain planner corrects for its reference
        batch size)."""
        return estimate / REFERENCE_BATCH_SIZE[dim] * 2 > target

    def batch_size(
        self, estimate: int, target: float, dim: int, patch_size: Sequence[int], voxels: float
    ) -> int:
        """As many samples as the memory target holds, at most ``max_dataset_covered`` of the
        dataset's ``voxels`` per batch, at least 2."""
        size = round(target / estimate * REFERENCE_BATCH_SIZE[dim])
        cap = round(voxels * self.max_dataset_covered / np.prod(patch_size, dtype=np.float64))
        return int(max(min(size, cap), MIN_BATCH_SIZE))

    def data_identifier(self, configuration: str) -> str:
        """The preprocessed data folder's name of a configuration (``<plans>_<configuration>``)."""
        return f"{self.plans_identifier}_{configuration}"

    def select_configurations(self, planned: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Which configurations the plans hold, from those planned (``2d``, ``3d_lowres``,
        ``3d_fullres``, ``3d_cascade_fullres`` where the images are large): all of them."""
        return planned

    # --- the steps --------------------------------------------------------------------------------

    def plan_configuration(
        self,
        spacing: Sequence[float],
        median_shape: Sequence[float],
        identifier: str,
        approx_n_voxels_dataset: float,
    ) -> dict[str, Any]:
        """One configuration: the largest patch whose estimate fits, then the batch size."""
        dim = len(spacing)
        if any(s <= 0 for s in spacing):
            msg = f"spacing must be > 0 on every axis, got {list(spacing)}"
            raise ConfigurationError(msg)
        topo = self.topology(spacing, self.initial_patch_size(spacing, median_shape))
        patch = list(topo.patch_size)
        architecture = self.architecture(dim, topo)
        estimate = self.memory_estimate(patch, architecture)
        target = self.memory_target(dim)
        while self.too_large(estimate, target, dim):
            # Shrink the axis largest relative to the median shape; the step is recomputed on
            # the shrunk size first so that valid sizes (224 between 256 and 192) are kept.
            ratios = [p / m for p, m in zip(patch, median_shape[:dim], strict=True)]
            axis = int(np.argsort(ratios)[-1])
            trial = list(patch)
            trial[axis] -= topo.divisible_by[axis]
            patch[axis] -= self.topology(spacing, trial).divisible_by[axis]
            if patch[axis] < 1:
                msg = f"no patch fits a GPU memory target of {self.gpu_memory_target_gb} GB"
                raise ConfigurationError(msg)
            topo = self.topology(spacing, patch)
            patch = list(topo.patch_size)
            architecture = self.architecture(dim, topo)
            estimate = self.memory_estimate(patch, architecture)
        return {
            "data_identifier": identifier,
            "preprocessor_name": PREPROCESSOR_NAME,
            "batch_size": self.batch_size(estimate, target, dim, patch, approx_n_voxels_dataset),
            "patch_size": [int(p) for p in patch],
            "median_image_size_in_voxels": [plain_number(m) for m in median_shape],
            "spacing": [float(s) for s in spacing],
            "normalization_schemes": list(self._schemes),
            "use_mask_for_norm": list(self._use_mask),
            **resampling_settings(),
            "architecture": architecture,
        }

    def plan_lowres(
        self, fullres: dict[str, Any], median_shape: np.ndarray, num_training: int
    ) -> dict[str, Any] | None:
        """Coarsen the spacing in 3% steps until the fullres patch covers >= 25% of the image;
        None unless the low-res image is at least 2x smaller than the full-res one."""
        fullres_spacing = np.array(fullres["spacing"], dtype=np.float64)
        spacing = fullres_spacing.copy()
        median_voxels = np.prod(median_shape, dtype=np.float64)
        patch_voxels = np.prod(fullres["patch_size"], dtype=np.float64)
        plan = None
        while patch_voxels / median_voxels < LOWRES_CREATION_THRESHOLD:
            coarse = max(spacing) / spacing > 2
            if np.any(coarse):
                spacing[coarse] *= LOWRES_SPACING_STEP
            else:
                spacing *= LOWRES_SPACING_STEP
            scaled = fullres_spacing / spacing * median_shape
            median_voxels = np.prod(scaled, dtype=np.float64)
            plan = self.plan_configuration(
                spacing.copy(),
                tuple(round(i) for i in scaled),
                self.data_identifier(LOWRES),
                float(median_voxels * num_training),
            )
            patch_voxels = np.prod(plan["patch_size"], dtype=np.int64)
        if np.prod(median_shape, dtype=np.float64) / median_voxels < 2:
            return None
        return plan

    def _fullres_spacing(self, spacings: Sequence, shapes: Sequence) -> np.ndarray:
        given = self.overwrite_target_spacing
        if given is None:
            return np.asarray(self.target_spacing(spacings, shapes), dtype=np.float64)
        if len(given) != len(spacings[0]) or min(given) <= 0:
            msg = f"target spacing {list(given)} must give {len(spacings[0])} values > 0"
            raise ConfigurationError(msg)
        return np.array(given, dtype=np.float64)

    def plan(
        self, fingerprint: dict[str, Any], dataset_json: dict[str, Any], dataset_name: str
    ) -> dict[str, Any]:
        """The whole plans dict (upstream's keys and order) for a fingerprint and dataset.json."""
        spacings, shapes = fingerprint["spacings"], fingerprint["shapes_after_crop"]
        fullres_spacing = self._fullres_spacing(spacings, shapes)
        forward, backward = transpose_axes(fullres_spacing)
        self._schemes, self._use_mask = normalization_schemes(
            dataset_json, fingerprint["median_relative_size_after_cropping"]
        )
        self._num_classes, self._estimates = len(dataset_json["labels"]), {}
        spacing_t = fullres_spacing[forward]
        new_shapes = [
            compute_new_shape(shape, sp, fullres_spacing)
            for sp, shape in zip(spacings, shapes, strict=True)
        ]
        median_t = np.median(new_shapes, 0)[forward]
        num_training = int(dataset_json["numTraining"])
        n_voxels = float(np.prod(median_t, dtype=np.float64) * num_training)
        configurations = self.select_configurations(
            self._planned(spacing_t, median_t, n_voxels, num_training)
        )
        check_configurations(type(self).__name__, configurations)
        return {
            "dataset_name": dataset_name,
            "plans_name": self.plans_identifier,
            "original_median_spacing_after_transp": [
                float(i) for i in np.median(spacings, 0)[forward]
            ],
            "original_median_shape_after_transp": [
                int(round(i)) for i in np.median(shapes, 0)[forward]
            ],
            "image_reader_writer": reader_writer_name(dataset_json),
            "transpose_forward": [int(i) for i in forward],
            "transpose_backward": [int(i) for i in backward],
            "configurations": configurations,
            "experiment_planner_used": type(self).__name__,
            "label_manager": "LabelManager",
            "foreground_intensity_properties_per_channel": fingerprint[
                "foreground_intensity_properties_per_channel"
            ],
        }

    def _planned(
        self, spacing_t: np.ndarray, median_t: np.ndarray, n_voxels: float, num_training: int
    ) -> dict[str, dict[str, Any]]:
        """Every configuration upstream plans, in its order (2d, 3d_lowres, 3d_fullres,
        3d_cascade_fullres)."""
        fullres = lowres = None
        if median_t[0] != 1:
            identifier = self.data_identifier(FULLRES)
            fullres = self.plan_configuration(spacing_t, median_t, identifier, n_voxels)
            lowres = self.plan_lowres(fullres, median_t, num_training)
            if lowres is not None:
                lowres["batch_dice"] = False
            fullres["batch_dice"] = lowres is not None
        plan_2d = self.plan_configuration(
            spacing_t[1:], median_t[1:], self.data_identifier("2d"), n_voxels
        )
        plan_2d["batch_dice"] = True
        configurations: dict[str, Any] = {"2d": plan_2d}
        if lowres is not None:
            configurations[LOWRES] = lowres
            lowres["next_stage"] = CASCADE
        if fullres is not None:
            configurations[FULLRES] = fullres
            if lowres is not None:
                configurations[CASCADE] = {"inherits_from": FULLRES, "previous_stage": LOWRES}
        return configurations


def check_configurations(planner: str, configurations: dict[str, Any]) -> None:
    """At least one configuration, and a cascade only with its previous stage (one line)."""
    if not configurations:
        msg = f"planner {planner}: select_configurations kept no configuration"
        raise ConfigurationError(msg)
    if CASCADE in configurations and LOWRES not in configurations:
        msg = f"planner {planner}: {CASCADE} needs {LOWRES}, which select_configurations dropped"
        raise ConfigurationError(msg)
    if LOWRES in configurations and CASCADE not in configurations:
        configurations[LOWRES].pop("next_stage", None)
