"""The preprocessed cases of one data folder, opened lazily for patch sampling.

A training run touches a few cases per batch out of possibly thousands, so nothing is read up
front: a case's arrays are opened memory-mapped on first use (a patch read then decompresses only
the chunks it touches) and its class locations are parsed once into compact arrays. Opened cases
sit in a small per-process LRU cache; a forked worker starts with an empty one, so no blosc2
handle is ever shared across processes. A cascade stage's store also opens each case's previous
stage segmentation (``previous_stage_folder/<case>.b2nd``, 3-D, the data's spatial shape).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blosc2
import numpy as np

from nnunet_core.errors import DatasetError
from nnunet_core.io.blosc2_store import (
    DATA_SUFFIX,
    SEG_SUFFIX,
    load_properties,
    open_array,
    open_case,
)

ClassKey = int | tuple[int, ...]
DEFAULT_CACHE_SIZE = 128  # open cases per process: bounds file handles and location memory


def parse_class_key(name: str) -> ClassKey:
    """Inverse of the preprocessor's ``str(key)``: ``"2"`` -> 2, ``"(-1, 0, 1)"`` -> (-1, 0, 1)."""
    text = name.strip()
    try:
        if text[:1] in "([" and text[-1:] in ")]":
            return tuple(int(p) for p in text[1:-1].split(",") if p.strip())
        return int(text)
    except ValueError:
        msg = f"class_locations key {name!r} is neither a label nor a tuple of labels"
        raise DatasetError(msg) from None


def compact_locations(raw: dict[str, Any], ndim: int) -> dict[ClassKey, np.ndarray]:
    """``{class: (n, ndim) int32 spatial coordinates}`` from the JSON rows ``[0, z, y, x]``."""
    out: dict[ClassKey, np.ndarray] = {}
    for name, rows in raw.items():
        coords = np.asarray(rows, dtype=np.int32).reshape(-1, ndim + 1)
        out[parse_class_key(name)] = np.ascontiguousarray(coords[:, 1:])
    return out


@dataclass(frozen=True)
class Case:
    """One opened case: lazy ``data`` (c, z, y, x) float32, ``seg`` (1, z, y, x) int16 and, for
    a cascade stage, ``previous`` (z, y, x) uint8/uint16, the previous stage's segmentation."""

    case_id: str
    data: blosc2.NDArray
    seg: blosc2.NDArray
    class_locations: dict[ClassKey, np.ndarray]
    previous: blosc2.NDArray | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        """Spatial shape (z, y, x)."""
        return tuple(int(s) for s in self.data.shape[1:])


def list_case_ids(folder: str | os.PathLike) -> list[str]:
    """Sorted ids of the cases stored in ``folder`` (one per ``{case}_seg.b2nd``)."""
    folder = Path(folder)
    if not folder.is_dir():
        msg = f"{folder}: preprocessed folder not found (run `nnunet-core preprocess`)"
        raise DatasetError(msg)
    return sorted(p.name[: -len(SEG_SUFFIX)] for p in folder.glob(f"*{SEG_SUFFIX}"))


class CaseStore:
    """The cases of one preprocessed folder (optionally a subset, e.g. a fold's training keys)."""

    def __init__(
        self,
        folder: str | os.PathLike,
        case_ids: Sequence[str] | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        previous_stage_folder: str | os.PathLike | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.previous_stage_folder = (
            None if previous_stage_folder is None else Path(previous_stage_folder)
        )
        available = list_case_ids(self.folder)
        if case_ids is None:
            chosen = available
        else:
            present = set(available)
            missing = [c for c in case_ids if c not in present]
            if missing:
                msg = f"{self.folder}: case(s) {', '.join(missing[:5])} not preprocessed"
                raise DatasetError(msg)
            chosen = list(case_ids)
        if not chosen:
            msg = f"{self.folder}: no preprocessed cases"
            raise DatasetError(msg)
        self.case_ids: tuple[str, ...] = tuple(chosen)
        self.cache_size = max(1, int(cache_size))
        self._cache: OrderedDict[str, Case] = OrderedDict()
        self._pid = os.getpid()

    def __len__(self) -> int:
        return len(self.case_ids)

    def __getstate__(self) -> dict[str, Any]:
        # open handles never travel to another process
        return {**self.__dict__, "_cache": OrderedDict()}

    def case(self, case_id: str) -> Case:
        """The opened case, from this process's cache when recently used."""
        if self._pid != os.getpid():
            self._cache = OrderedDict()
            self._pid = os.getpid()
        found = self._cache.get(case_id)
        if found is not None:
            self._cache.move_to_end(case_id)
            return found
        data, seg, properties = open_case(self.folder, case_id)
        if data.shape[1:] != seg.shape[1:] or data.ndim != 4:
            msg = (
                f"case {case_id}: data {data.shape} and seg {seg.shape} are not (c, z, y, x) of "
                "one size"
            )
            raise DatasetError(msg)
        raw = properties.get("class_locations")
        if not isinstance(raw, dict):
            msg = (
                f"case {case_id}: properties have no class_locations (preprocessed without labels?)"
            )
            raise DatasetError(msg)
        previous = self._open_previous(case_id, data.shape[1:])
        case = Case(case_id, data, seg, compact_locations(raw, data.ndim - 1), previous)
        self._cache[case_id] = case
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return case

    def _open_previous(self, case_id: str, shape: tuple[int, ...]) -> blosc2.NDArray | None:
        """The previous stage's segmentation, checked against the data's spatial shape."""
        if self.previous_stage_folder is None:
            return None
        path = self.previous_stage_folder / f"{case_id}{DATA_SUFFIX}"
        previous = open_array(path)
        if tuple(previous.shape) != tuple(shape):
            msg = (
                f"case {case_id}: {path} has shape {list(previous.shape)}, the data "
                f"{list(shape)} (the previous stage predicted another geometry)"
            )
            raise DatasetError(msg)
        return previous

    def properties(self, case_id: str) -> dict[str, Any]:
        """The full properties JSON of a case (not cached: export and validation need it once)."""
        return load_properties(self.folder, case_id)
