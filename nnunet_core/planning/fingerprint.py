"""Dataset fingerprint: spacings, shapes after cropping and foreground intensity statistics.

Same numbers as upstream's ``DatasetFingerprintExtractor`` (v2.8.1), computed faster:

* Upstream draws ``int(10e7 // n_cases)`` foreground samples per case and channel with replacement
  (``RandomState(1234)`` per case, channels in order) and takes statistics of the concatenation
  (~1e8 floats). Here the very same random indices are drawn (in chunks, which leaves the stream
  unchanged) but only *counted*: each case returns its distinct foreground values with their
  sample multiplicities. Min, max and the linear-interpolated percentiles of the weighted
  multiset equal those of the concatenated samples, without sorting 1e8 floats. Mean and std
  are upstream's float32 ``np.mean``/``np.std`` to the last bit: their rounding depends on the
  order of the samples, so each case also returns its samples in draw order (float32, as
  upstream holds them) and ``float32_sums`` redoes numpy's pairwise float32 summation over them.
* Cropping needs only the bounding box of the nonzero mask. Filling holes (upstream's
  ``crop_to_nonzero``) cannot move that box, since a hole is enclosed by the mask, so it is skipped.
  Foreground is ``seg > 0`` inside the box, exactly as upstream (``-1`` marks never count).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from nnunet_core.dataset.discovery import training_cases
from nnunet_core.errors import DatasetError
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.io.readers import reader_by_name, reader_for_dataset
from nnunet_core.layout.raw import DATASET_JSON, IMAGES_TR
from nnunet_core.planning.float32_sums import float32_mean, float32_std
from nnunet_core.preprocessing.cropping import bbox_of, slicer
from nnunet_core.runtime.heap import keep_freed_memory
from nnunet_core.runtime.parallel import map_cases

TOTAL_FOREGROUND_SAMPLES = 10e7
SAMPLING_SEED = 1234
PERCENTILES = (0.5, 50.0, 99.5)
# 2**21 draws (16 MB of indices): below glibc's largest mmap threshold, so each chunk reuses the
# last one's freed memory instead of mapping and faulting in fresh pages (at 2**22, always mapped)
_DRAW_CHUNK = 1 << 21

# (distinct values float32, how often each was sampled int64) per channel
WeightedValues = tuple[np.ndarray, np.ndarray]


def sample_counts(num_voxels: int, num_samples: int, rng: np.random.RandomState) -> np.ndarray:
    """How often each voxel index is drawn by ``rng.choice(num_voxels, num_samples)``.

    ``choice`` with replacement is ``randint(0, n, size)``; drawing it in chunks consumes the
    stream identically, so memory stays bounded for huge ``num_samples``.
    """
    counts = np.zeros(num_voxels, dtype=np.int64)
    remaining = num_samples
    while remaining > 0:
        size = min(remaining, _DRAW_CHUNK)
        counts += np.bincount(rng.randint(0, num_voxels, size=size), minlength=num_voxels)
        remaining -= size
    return counts


def weighted_foreground(
    values: np.ndarray, num_samples: int, rng: np.random.RandomState
) -> WeightedValues:
    """The sampled multiset of one channel's foreground values as (distinct values, counts)."""
    return sample_foreground(values, num_samples, rng)[0]


def sample_foreground(
    values: np.ndarray, num_samples: int, rng: np.random.RandomState
) -> tuple[WeightedValues, np.ndarray]:
    """The sampled multiset (distinct values, counts) and the samples in draw order (float32),
    the draws of upstream's ``rng.choice(values, num_samples)``, made in chunks."""
    if values.size == 0:
        return (np.empty(0, np.float32), np.empty(0, np.int64)), np.empty(0, np.float32)
    counts = np.zeros(values.size, dtype=np.int64)
    samples = np.empty(num_samples, np.float32)
    position = 0
    while position < num_samples:
        size = min(num_samples - position, _DRAW_CHUNK)
        draws = rng.randint(0, values.size, size=size)
        counts += np.bincount(draws, minlength=values.size)
        np.take(values, draws, out=samples[position : position + size])
        position += size
    drawn = counts > 0
    return merge_weighted([(values[drawn], counts[drawn])]), samples


def _argsort_float32(values: np.ndarray) -> np.ndarray:
    """Ascending order of float32 values (no NaN), many times faster than ``np.argsort``.

    Each value becomes an order-preserving uint32 key, packed with its index into a uint64 that
    numpy sorts with SIMD; the low 32 bits of the sorted keys are the permutation.
    """
    if values.dtype != np.float32 or values.size >= 2**32:
        return np.argsort(values)
    bits = values.view(np.uint32)
    keys = np.where(bits >> 31, ~bits, bits | np.uint32(0x80000000)).astype(np.uint64)
    packed = np.sort((keys << np.uint64(32)) | np.arange(values.size, dtype=np.uint64))
    return (packed & np.uint64(0xFFFFFFFF)).astype(np.intp)


def merge_weighted(parts: list[WeightedValues]) -> WeightedValues:
    """Union of weighted multisets: sorted distinct values, summed counts."""
    values = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.float32)
    counts = np.concatenate([p[1] for p in parts]) if parts else np.empty(0, np.int64)
    if values.size == 0:
        return values.astype(np.float32), counts.astype(np.int64)
    order = _argsort_float32(values)
    values, counts = values[order], counts[order]
    starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    return values[starts], np.add.reduceat(counts, starts).astype(np.int64)


def analyze_case(
    image_files: tuple[Path, ...],
    seg_file: Path,
    num_samples: int,
    reader_name: str = "SimpleITKIO",
) -> dict[str, Any]:
    """Crop box, spacing and the weighted foreground samples of one training case."""
    reader = reader_by_name(reader_name)
    data, properties = reader.read_images(list(image_files))
    seg, _ = reader.read_seg(seg_file)
    if seg.shape[1:] != data.shape[1:]:
        msg = f"{seg_file}: label shape {seg.shape[1:]} differs from image shape {data.shape[1:]}"
        raise DatasetError(msg)
    box = slicer(bbox_of(np.any(data != 0, axis=0)))
    foreground = seg[0][box] > 0
    rng = np.random.RandomState(SAMPLING_SEED)
    channels, samples = [], []
    for c in range(data.shape[0]):
        values = data[c][box][foreground]
        if np.isnan(values).any():
            msg = f"{image_files[c]}: image contains NaN values inside the foreground"
            raise DatasetError(msg)
        weighted, drawn = sample_foreground(values, num_samples, rng)
        channels.append(weighted)
        samples.append(drawn)
    shape_after = [s.stop - s.start for s in box]
    return {
        "shape_after_crop": shape_after,
        # the reader's number types, as upstream writes them (NaturalImage2DIO: ints 999, 1, 1)
        "spacing": [s if isinstance(s, int) else float(s) for s in properties["spacing"]],
        "relative_size": math.prod(shape_after) / math.prod(data.shape[1:]),
        "channels": channels,
        "samples": samples,
        "has_foreground": bool(foreground.any()),
    }


def _float32_key(value: float) -> int:
    """Order-preserving uint32 key of a float32 (the inverse of :func:`_key_float32`)."""
    bits = int(np.array(value, dtype=np.float32).view(np.uint32))
    return bits ^ 0xFFFFFFFF if bits >> 31 else bits | 0x80000000


def _key_float32(key: int) -> np.float32:
    bits = key ^ 0x80000000 if key >> 31 else key ^ 0xFFFFFFFF
    return np.array(bits, dtype=np.uint32).view(np.float32)[()]


class _WeightedUnion:
    """Order statistics of the union of per-case sorted multisets, without merging them.

    The k-th smallest sample is found by bisecting the float32 key space, counting the samples
    <= a candidate with one ``searchsorted`` per case: a few hundred cheap calls instead of
    concatenating and sorting up to 1e8 entries.
    """

    def __init__(self, parts: list[WeightedValues]) -> None:
        self.parts = [(v, np.concatenate(([0], np.cumsum(c)))) for v, c in parts if v.size]
        self.total = int(sum(cum[-1] for _, cum in self.parts))
        self.low_key = _float32_key(min(v[0] for v, _ in self.parts))
        self.high_key = _float32_key(max(v[-1] for v, _ in self.parts))

    def count_at_most(self, value: np.float32) -> int:
        return int(sum(cum[np.searchsorted(v, value, side="right")] for v, cum in self.parts))

    def kth(self, k: int) -> np.float32:
        low, high = self.low_key, self.high_key
        while low < high:
            middle = (low + high) // 2
            if self.count_at_most(_key_float32(middle)) > k:
                high = middle
            else:
                low = middle + 1
        return _key_float32(low) + np.float32(0.0)  # -0.0 -> 0.0

    def percentiles(self, percentiles: tuple[float, ...]) -> list[float]:
        """numpy's default (linear) percentiles, with numpy's interpolation arithmetic."""
        virtual = (self.total - 1) * (np.asarray(percentiles, dtype=np.float64) / 100)
        result = []
        for index in virtual:
            low = int(np.floor(index))
            a, b = self.kth(low), self.kth(min(low + 1, self.total - 1))
            gamma = index - low
            diff = np.float64(b - a)
            value = b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma
            result.append(float(value))
        return result


def intensity_statistics(
    parts: list[WeightedValues], as_float32: bool, samples: list[np.ndarray] | None = None
) -> dict[str, float]:
    """Upstream's per-channel statistics of all cases' samples (keys sorted, as upstream writes);
    with ``samples`` (each case's, in draw order) mean and std in upstream's float32 arithmetic.
    The samples are used up: the std overwrites them with squared deviations."""
    parts = [(v, c) for v, c in parts if v.size]
    if not parts:
        msg = (
            "no foreground voxels (label > 0) in any training case: cannot compute intensity "
            "statistics"
        )
        raise DatasetError(msg)
    union = _WeightedUnion(parts)
    mean = sum(float(np.dot(v.astype(np.float64), c)) for v, c in parts) / union.total
    square = sum(float(np.dot((v.astype(np.float64) - mean) ** 2, c)) for v, c in parts)
    low, median, high = union.percentiles(PERCENTILES)

    def cast(x: float) -> float:
        # upstream reduces float32 samples, so its numbers are float32 values
        return float(np.float32(x)) if as_float32 else float(x)

    std = math.sqrt(square / union.total)
    if as_float32 and samples is not None:
        mean32 = float32_mean(samples)
        mean, std = float(mean32), float(float32_std(samples, mean32, overwrite=True))
    return {
        "max": cast(max(v[-1] for v, _ in parts)),
        "mean": cast(mean),
        "median": cast(median),
        "min": cast(min(v[0] for v, _ in parts)),
        "percentile_00_5": cast(low),
        "percentile_99_5": cast(high),
        "std": cast(std),
    }


def extract_fingerprint(raw_dir: Path, num_processes: int) -> dict[str, Any]:
    """The ``dataset_fingerprint.json`` content of a raw dataset (keys in upstream's order)."""
    raw_dir = Path(raw_dir)
    dataset_json = load_dataset_json(raw_dir / DATASET_JSON)
    cases = training_cases(raw_dir, dataset_json)
    if not cases:
        msg = f"{raw_dir}: no training cases found in {IMAGES_TR}"
        raise DatasetError(msg)
    num_samples = int(TOTAL_FOREGROUND_SAMPLES // len(cases))
    example = cases[0].images[0] if cases[0].images else None
    reader = reader_for_dataset(dataset_json.raw, str(raw_dir / DATASET_JSON), example)
    tasks = [
        (case.identifier, (case.images, case.label, num_samples, reader.name)) for case in cases
    ]
    # each worker draws its cases' 1e8 samples in chunks: freed blocks are reused, not faulted in
    # afresh (only in the workers: a caller's own process keeps glibc's defaults)
    by_case = map_cases(
        analyze_case, tasks, num_processes, "fingerprint", worker_setup=keep_freed_memory
    )
    results = list(by_case.values())
    # an empty case makes upstream's concatenation float64, so its statistics are not float32
    as_float32 = all(r["has_foreground"] for r in results)
    statistics = {}
    for c in range(dataset_json.num_channels):
        parts = [r["channels"][c] for r in results]
        samples = [r["samples"][c] for r in results]
        statistics[str(c)] = intensity_statistics(parts, as_float32, samples)
    return {
        "foreground_intensity_properties_per_channel": statistics,
        "median_relative_size_after_cropping": float(
            np.median([r["relative_size"] for r in results])
        ),
        "shapes_after_crop": [r["shape_after_crop"] for r in results],
        "spacings": [r["spacing"] for r in results],
    }
