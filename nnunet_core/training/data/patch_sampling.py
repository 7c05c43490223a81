"""Where a training patch comes from: per-sample random generators and upstream's box rule.

Every random choice of a sample (case, foreground class and voxel, crop, augmentation) draws from
a generator derived from ``(seed, fold, epoch, iteration, sample_index, stream)`` only. A batch
is therefore the same whichever process builds it and whatever was drawn before it, which makes
resuming at an epoch boundary exact and lets workers split iterations freely.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.blosc2_store import read_patch
from nnunet_core.training.data.case_store import ClassKey

TRAIN_STREAM = 0
VAL_STREAM = 1
FOLD_ALL = 1_000_000  # fold "all" (train on every case); any int no real fold uses
OVERSAMPLE_FOREGROUND_PERCENT = 0.33  # upstream nnUNetTrainer default


def fold_number(fold: int | str) -> int:
    """The integer a fold contributes to the seed ('all' -> ``FOLD_ALL``)."""
    if isinstance(fold, str) and fold.strip().lower() == "all":
        return FOLD_ALL
    try:
        number = int(fold)
    except (TypeError, ValueError):
        number = -1
    if number < 0:
        msg = f"fold must be a non-negative int or 'all', got {fold!r}"
        raise ConfigurationError(msg)
    return number


def sample_seed(
    seed: int,
    fold: int | str,
    epoch: int,
    iteration: int,
    sample_index: int,
    stream: int = TRAIN_STREAM,
) -> np.random.SeedSequence:
    """The seed sequence of one sample; a pure function of its arguments."""
    parts = (int(seed), fold_number(fold), int(epoch), int(iteration), int(sample_index), stream)
    if min(parts) < 0:
        msg = f"sample seeds need non-negative seed/epoch/iteration/sample, got {parts}"
        raise ConfigurationError(msg)
    return np.random.SeedSequence(list(parts))


def sample_rng(
    seed: int,
    fold: int | str,
    epoch: int,
    iteration: int,
    sample_index: int,
    stream: int = TRAIN_STREAM,
) -> np.random.Generator:
    """The sampling generator of one sample (case, foreground decision and voxel, crop)."""
    sequence = sample_seed(seed, fold, epoch, iteration, sample_index, stream)
    return np.random.Generator(np.random.PCG64(sequence))


def transform_rng(
    seed: int,
    fold: int | str,
    epoch: int,
    iteration: int,
    sample_index: int,
    stream: int = TRAIN_STREAM,
) -> np.random.Generator:
    """The augmentation generator of one sample: a child of its seed, independent of sampling."""
    sequence = sample_seed(seed, fold, epoch, iteration, sample_index, stream)
    return np.random.Generator(np.random.PCG64(sequence.spawn(1)[0]))


def forced_mask(batch_size: int, percent: float = OVERSAMPLE_FOREGROUND_PERCENT) -> list[bool]:
    """Which batch positions must contain foreground: the last ones, as upstream.

    Sample ``j`` is forced iff ``j >= round(batch_size * (1 - percent))``: bs 2 forces sample 1,
    bs 12 forces samples 8-11.
    """
    if batch_size < 1 or not 0.0 <= percent <= 1.0:
        msg = (
            f"forced_mask needs batch_size >= 1 and 0 <= percent <= 1, got {batch_size}, {percent}"
        )
        raise ConfigurationError(msg)
    first = round(batch_size * (1 - percent))
    return [j >= first for j in range(batch_size)]


def sampling_patch(patch_size: Sequence[int]) -> tuple[int, ...]:
    """The 3-D box read from a (c, z, y, x) case: a 2-D patch becomes one slice ``(1, y, x)``."""
    patch = tuple(int(p) for p in patch_size)
    if len(patch) not in (2, 3) or min(patch) < 1:
        msg = f"patch size must be 2-D or 3-D and positive, got {list(patch_size)}"
        raise ConfigurationError(msg)
    return (1, *patch) if len(patch) == 2 else patch


def box_bounds(
    shape: Sequence[int], patch: Sequence[int], final_patch: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest lower corner of a box (upstream ``get_bbox``'s ``lbs``/``ubs``).

    ``need_to_pad = patch - final_patch`` lets the final patch reach the image border; it is
    enlarged so that an image smaller than the patch still fits. Both bounds are inclusive.
    Upstream writes ``- need_to_pad[i] // 2``, which Python reads as ``(-need) // 2``: an odd
    need pads one voxel more below than above, and so do we.
    """
    shape_a = np.asarray(shape, dtype=np.int64)
    patch_a = np.asarray(patch, dtype=np.int64)
    need = np.asarray(patch, dtype=np.int64) - np.asarray(final_patch, dtype=np.int64)
    need = np.where(need + shape_a < patch_a, patch_a - shape_a, need)
    lbs = (-need) // 2
    ubs = shape_a + need // 2 + need % 2 - patch_a
    return lbs, ubs


def annotated_key(class_locations: Mapping[ClassKey, np.ndarray]) -> ClassKey | None:
    """The 'any annotated voxel' key ``(-1, *labels)`` present with an ignore label, else None."""
    for key in class_locations:
        if isinstance(key, tuple) and key and key[0] == -1:
            return key
    return None


def _foreground_class(
    class_locations: Mapping[ClassKey, np.ndarray], rng: np.random.Generator
) -> ClassKey | None:
    """A class drawn uniformly among those with locations (annotated key only as last resort)."""
    eligible = [k for k, v in class_locations.items() if len(v) > 0]
    ignore_key = annotated_key(class_locations)
    if ignore_key in eligible and len(eligible) > 1:
        eligible.remove(ignore_key)
    if not eligible:
        return None
    return eligible[int(rng.integers(len(eligible)))]


def choose_box(
    shape: Sequence[int],
    patch: Sequence[int],
    final_patch: Sequence[int],
    forced: bool,
    class_locations: Mapping[ClassKey, np.ndarray],
    rng: np.random.Generator,
) -> tuple[int, ...]:
    """Lower corner of the ``patch`` box in a case of spatial ``shape`` (upstream ``get_bbox``).

    Unforced: uniform in ``[lbs, ubs]``, except with an ignore label, where the box is centred on
    a random annotated voxel. Forced: a class uniformly among the present ones, a voxel uniformly
    among its locations, and the box centred on it (``max(lbs, voxel - patch // 2)``; like
    upstream there is no upper clip, so the voxel stays central and inside the final patch). A
    case without foreground falls back to a random box. ``class_locations`` rows are spatial
    coordinates, as many columns as ``shape``.
    """
    lbs, ubs = box_bounds(shape, patch, final_patch)
    if forced:
        selected = _foreground_class(class_locations, rng)
    else:
        selected = annotated_key(class_locations)
        if selected is not None and len(class_locations[selected]) == 0:
            selected = None
    if selected is None:
        return tuple(int(v) for v in rng.integers(lbs, ubs + 1))
    locations = class_locations[selected]
    voxel = locations[int(rng.integers(len(locations)))]
    lower = np.maximum(lbs, voxel.astype(np.int64) - np.asarray(patch, dtype=np.int64) // 2)
    return tuple(int(v) for v in lower)


def crop_and_pad(
    array: object, lower: Sequence[int], size: Sequence[int], pad_value: float
) -> np.ndarray:
    """``array[:, box]`` for a (c, *spatial) array, padded with ``pad_value`` outside it.

    Only the in-bounds part is sliced, so a blosc2 array decompresses just the touched chunks.
    """
    slices = [slice(None), *(slice(lo, lo + s) for lo, s in zip(lower, size, strict=True))]
    return read_patch(array, slices, pad_value)  # type: ignore[arg-type]


def crop_and_pad_previous_stage(
    array: object, lower: Sequence[int], size: Sequence[int], pad_value: int
) -> np.ndarray:
    """``(1, *box)`` int16 of a 3-D previous-stage segmentation (no channel axis), cropped with
    the target's box and padded like it (upstream pads both with -1 as int16)."""
    slices = [slice(lo, lo + s) for lo, s in zip(lower, size, strict=True)]
    return read_patch(array, slices, pad_value, dtype=np.int16)[None]  # type: ignore[arg-type]
