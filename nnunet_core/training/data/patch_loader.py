"""Batch assembly: sample patches, augment them, and build the training/validation batch.

``PatchLoader(epoch, iteration)`` is the ``make_batch`` that ``workers.BatchStream`` runs in its
worker processes. Each sample draws everything from its own generator
(``patch_sampling.sample_rng``), so a batch is a pure function of ``(seed, fold, epoch,
iteration)``. Samples are written into preallocated numpy buffers (any strides the transform
returns, e.g. mirrored views, are fine)
that become tensors without a copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from nnunet_core.errors import ConfigurationError
from nnunet_core.training.augmentation.pipeline import reads_region
from nnunet_core.training.data.case_store import Case, CaseStore
from nnunet_core.training.data.patch_sampling import (
    OVERSAMPLE_FOREGROUND_PERCENT,
    TRAIN_STREAM,
    VAL_STREAM,
    choose_box,
    crop_and_pad,
    crop_and_pad_previous_stage,
    forced_mask,
    sample_rng,
    sampling_patch,
    transform_rng,
)
from nnunet_core.training.deep_supervision import downsample_targets

# (data (c, *initial), seg (1, *initial), rng) -> (data (c, *final), seg (k, *final))
Transform = Callable[[np.ndarray, np.ndarray, np.random.Generator], tuple[Any, Any]]
Batch = dict[str, Any]
PAD_DATA = 0.0
PAD_SEG = -1  # outside the image; becomes background (0) before the loss sees it


class SampleError(RuntimeError):
    """Building one sample failed; the message names the case and the batch position."""


class PatchLoader:
    """Builds batch ``(epoch, iteration)`` of one fold's cases (training or validation).

    ``patch_size`` is the final patch the network gets; ``initial_patch_size`` the larger one
    cropped before a spatial transform (defaults to the final patch). Forced-foreground
    positions follow upstream's "last 33 %" rule unless ``forced_positions`` is given (DDP
    ranks pass their slice of the global pattern).
    ``sample_offset`` shifts the sample indices in the seed (rank r of a split global batch).
    """

    def __init__(
        self,
        store: CaseStore,
        batch_size: int,
        patch_size: Sequence[int],
        initial_patch_size: Sequence[int] | None = None,
        *,
        seed: int = 0,
        fold: int | str = 0,
        stream: int = TRAIN_STREAM,
        oversample_foreground_percent: float = OVERSAMPLE_FOREGROUND_PERCENT,
        forced_positions: Sequence[bool] | None = None,
        transform: Transform | None = None,
        ds_scales: Sequence[Sequence[float]] | None = None,
        sample_offset: int = 0,
    ) -> None:
        self.store = store
        self.batch_size = int(batch_size)
        self.patch_size = tuple(int(p) for p in patch_size)
        initial = self.patch_size if initial_patch_size is None else initial_patch_size
        self.initial_patch_size = tuple(int(p) for p in initial)
        if len(self.initial_patch_size) != len(self.patch_size) or any(
            i < f for i, f in zip(self.initial_patch_size, self.patch_size, strict=True)
        ):
            msg = (
                f"initial patch {list(self.initial_patch_size)} must be at least the patch "
                f"{list(self.patch_size)} on every axis"
            )
            raise ConfigurationError(msg)
        if transform is None and self.initial_patch_size != self.patch_size:
            msg = "without a transform the initial patch must equal the patch (nothing crops it)"
            raise ConfigurationError(msg)
        self._box = sampling_patch(self.initial_patch_size)
        self._final_box = sampling_patch(self.patch_size)
        self.is_2d = len(self.patch_size) == 2
        self.seed, self.fold, self.stream = int(seed), fold, int(stream)
        self.oversample_foreground_percent = float(oversample_foreground_percent)
        if forced_positions is None:
            forced_positions = forced_mask(self.batch_size, self.oversample_foreground_percent)
        if len(forced_positions) != self.batch_size:
            msg = (
                f"forced_positions has {len(forced_positions)} entries for batch size "
                f"{self.batch_size}"
            )
            raise ConfigurationError(msg)
        self.forced_positions = tuple(bool(f) for f in forced_positions)
        self.transform = transform
        self.ds_scales = None if ds_scales is None else [list(s) for s in ds_scales]
        if self.ds_scales is not None and any(
            len(s) != len(self.patch_size) for s in self.ds_scales
        ):
            msg = (
                f"deep supervision scales {self.ds_scales} do not match the "
                f"{len(self.patch_size)}-D patch"
            )
            raise ConfigurationError(msg)
        self.sample_offset = int(sample_offset)

    def rngs(
        self, epoch: int, iteration: int, j: int
    ) -> tuple[np.random.Generator, np.random.Generator]:
        """Sampling and augmentation generators of batch position ``j``."""
        key = (self.seed, self.fold, epoch, iteration, self.sample_offset + j, self.stream)
        return sample_rng(*key), transform_rng(*key)

    def locate(
        self, epoch: int, iteration: int, j: int
    ) -> tuple[str, Case, tuple[int, ...], np.random.Generator]:
        """``(case_id, case, lower, augmentation_rng)`` of position ``j``: the initial-patch box
        starts at ``lower`` (spatial, 3-D) of the opened case; nothing is read yet."""
        rng, aug_rng = self.rngs(epoch, iteration, j)
        case_id = self.store.case_ids[int(rng.integers(len(self.store.case_ids)))]
        forced = self.forced_positions[j]
        try:
            case = self.store.case(case_id)
            lower = choose_box(
                case.shape, self._box, self._final_box, forced, case.class_locations, rng
            )
        except Exception as exc:
            raise _sample_error(exc, case_id, epoch, iteration, j) from exc
        return case_id, case, lower, aug_rng

    def read(
        self, case: Case, lower: Sequence[int], box: Sequence[int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(data, seg)`` of the 3-D ``box`` at ``lower`` in the case, padded outside it: data
        float32 with 0, seg int16 with -1; a cascade stage's seg gets a second channel, the
        previous stage cropped and padded alike. 2-D patches drop the (single) slice axis."""
        data = crop_and_pad(case.data, lower, box, PAD_DATA)
        seg = crop_and_pad(case.seg, lower, box, PAD_SEG)
        if case.previous is not None:
            previous = crop_and_pad_previous_stage(case.previous, lower, box, PAD_SEG)
            seg = np.concatenate((seg.astype(np.int16, copy=False), previous))
        if self.is_2d:
            data, seg = data[:, 0], seg[:, 0]
        return data, seg

    def crop_sample(
        self, epoch: int, iteration: int, j: int
    ) -> tuple[str, np.ndarray, np.ndarray, np.random.Generator]:
        """``(case_id, data, seg, augmentation_rng)``: the padded initial-patch crop, untransformed.

        data is float32 ``(c, *initial)`` padded with 0, seg int16 ``(1, *initial)`` with -1; a
        cascade stage's seg has a second channel, the previous stage cropped and padded alike
        (the transform moves it into the data as one-hot).
        """
        case_id, case, lower, aug_rng = self.locate(epoch, iteration, j)
        try:
            data, seg = self.read(case, lower, self._box)
        except Exception as exc:
            raise _sample_error(exc, case_id, epoch, iteration, j) from exc
        return case_id, data, seg, aug_rng

    def sample(self, epoch: int, iteration: int, j: int) -> tuple[str, Any, Any]:
        """``(case_id, data, seg)`` of position ``j`` after the transform (if any).

        Our training pipeline reads only the part of the initial patch its drawn spatial
        transform needs (``TrainingTransforms.transform_region``): the same sample, read 2-4x
        less of a real-size case.
        """
        if self.transform is not None and reads_region(self.transform):
            case_id, case, lower, aug_rng = self.locate(epoch, iteration, j)

            def read(part_lower: Sequence[int], size: Sequence[int]) -> tuple[Any, Any]:
                if self.is_2d:  # the box's single slice stays whole
                    part_lower, size = (0, *part_lower), (1, *size)
                start = [a + b for a, b in zip(lower, part_lower, strict=True)]
                return self.read(case, start, size)

            # the part of the initial patch inside the case (the rest is padding)
            inside = [
                (max(-a, 0), min(n, s - a))
                for a, n, s in zip(lower, self._box, case.shape, strict=True)
            ]
            filled = tuple(a for a, _ in inside), tuple(max(b - a, 0) for a, b in inside)
            if self.is_2d:
                filled = filled[0][1:], filled[1][1:]
            try:
                data, seg = self.transform.transform_region(
                    read, self.initial_patch_size, aug_rng, filled
                )
            except Exception as exc:
                raise _sample_error(exc, case_id, epoch, iteration, j) from exc
            return case_id, data, seg
        case_id, data, seg, aug_rng = self.crop_sample(epoch, iteration, j)
        if self.transform is not None:
            try:
                data, seg = self.transform(data, seg, aug_rng)
            except Exception as exc:
                raise _sample_error(exc, case_id, epoch, iteration, j) from exc
        return case_id, data, seg

    def __call__(self, epoch: int, iteration: int) -> Batch:
        """``{'data': (b, c, *patch) float32, 'target': [DS targets] or tensor, 'keys': [...]}``."""
        keys: list[str] = []
        data_all: np.ndarray | None = None
        seg_all: np.ndarray | None = None
        for j in range(self.batch_size):
            case_id, data, seg = self.sample(epoch, iteration, j)
            try:
                data, seg = np.asarray(data), np.asarray(seg)
                if data_all is None or seg_all is None:
                    data_all, seg_all = self._buffers(data, seg)
                data_all[j] = data
                seg_all[j] = seg
            except Exception as exc:
                raise _sample_error(exc, case_id, epoch, iteration, j) from exc
            keys.append(case_id)
        assert data_all is not None and seg_all is not None
        seg_all[seg_all == PAD_SEG] = 0
        target = torch.from_numpy(seg_all)
        batch_target: Any = target
        if self.ds_scales is not None:
            batch_target = downsample_targets(target, self.ds_scales)
        return {"data": torch.from_numpy(data_all), "target": batch_target, "keys": keys}

    def _buffers(self, data: np.ndarray, seg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Batch buffers shaped like the first sample, which must have the final patch size."""
        for name, array in (("data", data), ("seg", seg)):
            if tuple(array.shape[1:]) != self.patch_size:
                msg = (
                    f"{name} sample has shape {tuple(array.shape)}, expected (channels, "
                    f"*{list(self.patch_size)})"
                )
                raise ConfigurationError(msg)
        seg_dtype = seg.dtype if np.issubdtype(seg.dtype, np.signedinteger) else np.int16
        return (
            np.empty((self.batch_size, *data.shape), dtype=np.float32),
            np.empty((self.batch_size, *seg.shape), dtype=seg_dtype),
        )


def _sample_error(exc: Exception, case_id: str, epoch: int, iteration: int, j: int) -> SampleError:
    if isinstance(exc, SampleError):
        return exc
    msg = (
        f"case {case_id} (epoch {epoch}, iteration {iteration}, sample {j}): {type(exc).__name__}: "
        f"{exc}"
    )
    return SampleError(msg)


def validation_loader(
    store: CaseStore,
    batch_size: int,
    patch_size: Sequence[int],
    *,
    seed: int = 0,
    fold: int | str = 0,
    oversample_foreground_percent: float = OVERSAMPLE_FOREGROUND_PERCENT,
    forced_positions: Sequence[bool] | None = None,
    ds_scales: Sequence[Sequence[float]] | None = None,
    sample_offset: int = 0,
    transform: Transform | None = None,
) -> PatchLoader:
    """The validation sampler: same rules, no augmentation, final patch cropped directly;
    ``transform`` is upstream's validation pipeline where it does more than seg -1 -> 0 (the
    cascade's one-hot)."""
    return PatchLoader(
        store,
        batch_size,
        patch_size,
        seed=seed,
        fold=fold,
        stream=VAL_STREAM,
        oversample_foreground_percent=oversample_foreground_percent,
        forced_positions=forced_positions,
        ds_scales=ds_scales,
        sample_offset=sample_offset,
        transform=transform,
    )
