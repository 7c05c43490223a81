"""Class locations for foreground oversampling, identical to upstream's (2.8.1) sampling.

Per class (or region), ``n = max(min(10000, total), ceil(0.01 * total))`` voxel coordinates are
drawn without replacement from one ``RandomState(1234)`` shared over the classes in order. The
candidates are the voxels of each label in C order (``argwhere`` of the 4-D seg, rows
``(0, z, y, x)``); a region's candidates are its labels' voxels label by label, in the region's
order, as upstream's stable sort by label lays them out. We draw from flat indices and unravel
only the chosen ones, which gives the same rows without building coordinate tables.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from nnunet_core.io.dataset_json import IGNORE_KEY, DatasetJson

SEED = 1234
MIN_SAMPLES = 10000
MIN_COVERAGE = 0.01

ClassKey = int | tuple[int, ...]


def num_samples(
    total: int, min_samples: int = MIN_SAMPLES, min_coverage: float = MIN_COVERAGE
) -> int:
    """How many locations to keep out of ``total`` voxels of a class."""
    return max(min(min_samples, total), int(math.ceil(total * min_coverage)))


def sample_class_locations(
    seg: np.ndarray,
    classes: Sequence[ClassKey],
    seed: int = SEED,
    min_samples: int = MIN_SAMPLES,
    min_coverage: float = MIN_COVERAGE,
) -> dict[ClassKey, np.ndarray]:
    """``{class: (n, seg.ndim) int64 coordinates}``; absent classes map to an empty ``(0, ndim)``
    array."""
    rng = np.random.RandomState(seed)
    flat_seg = seg.reshape(-1)
    voxels: dict[int, np.ndarray] = {}  # flat indices per label, computed once
    locations: dict[ClassKey, np.ndarray] = {}
    for key in classes:
        labels = key if isinstance(key, tuple) else (key,)
        for label in labels:
            if label not in voxels:
                voxels[label] = np.flatnonzero(flat_seg == label)
        parts = [voxels[label] for label in labels if voxels[label].size]
        if not parts:
            locations[key] = np.zeros((0, seg.ndim), dtype=np.int64)
            continue
        flat = parts[0] if len(parts) == 1 else np.concatenate(parts)
        count = num_samples(flat.size, min_samples, min_coverage)
        chosen = flat[rng.choice(flat.size, count, replace=False)]
        locations[key] = np.stack(np.unravel_index(chosen, seg.shape), axis=1).astype(np.int64)
    return locations


def sampling_classes(dataset_json: DatasetJson) -> list[ClassKey]:
    """What upstream collects locations for: foreground labels, or regions, plus the ignore key.

    Regions keep upstream's key types: a scalar label stays an int, a list becomes a tuple. With an
    ignore label, ``(-1, *all_labels)`` (every annotated voxel, incl. outside the body) is added.
    """
    spec = dataset_json.label_spec
    raw_labels: dict[str, Any] = dataset_json.raw["labels"]
    keys: list[ClassKey]
    if spec.has_regions:
        keys = []
        for name, value in raw_labels.items():
            if name == IGNORE_KEY:
                continue
            values = [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]
            if set(values) == {0}:
                continue
            keys.append(tuple(values) if isinstance(value, (list, tuple)) else values[0])
    else:
        keys = list(spec.foreground_labels)
    if spec.ignore_label is not None:
        annotated = [v for v in spec.all_labels if v != spec.ignore_label]
        keys.append((-1, *annotated))
    return keys


def class_key_name(key: ClassKey) -> str:
    """JSON key of a class: ``str(label)`` for ints, ``"(1, 2)"`` for tuples (Python's str)."""
    return str(key)


def parse_class_key(name: str) -> ClassKey:
    """Inverse of ``class_key_name``: ``"2"`` -> 2, ``"(1, 2)"`` -> (1, 2)."""
    value = ast.literal_eval(name)
    return tuple(int(v) for v in value) if isinstance(value, tuple) else int(value)


def locations_to_json(locations: dict[ClassKey, np.ndarray]) -> dict[str, list[list[int]]]:
    return {class_key_name(k): v.tolist() for k, v in locations.items()}


def locations_from_json(stored: dict[str, list[list[int]]]) -> dict[ClassKey, np.ndarray]:
    """``class_locations`` of a stored case back as ``{key: (n, 4) int64}`` (what loaders need)."""
    return {
        parse_class_key(k): np.asarray(v, dtype=np.int64).reshape(-1, 4) for k, v in stored.items()
    }
