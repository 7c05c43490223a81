"""The preprocessed case store: ``{case}.b2nd`` (data), ``{case}_seg.b2nd`` (seg), ``{case}.json``.

Arrays are blosc2 NDArrays laid out as upstream nnU-Net (>= 2.8) lays them out, so that a patch
read during training decompresses only the chunks (and blocks) it touches: chunk and block shapes
follow the patch size (``comp_blosc2_params``), the codec is LZ4HC level 5 and the first filter
is NOFILTER or SHUFFLE, whichever compresses a central slab smaller. Properties are JSON, never
pickle, so a store can be read without trusting it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import blosc2
import numpy as np

from nnunet_core.errors import ConfigurationError, DatasetError
from nnunet_core.io.atomic import atomic_path, read_json
from nnunet_core.layout.preprocessed import CASE_DATA_SUFFIX as DATA_SUFFIX
from nnunet_core.layout.preprocessed import CASE_PROPERTIES_SUFFIX as PROPERTIES_SUFFIX
from nnunet_core.layout.preprocessed import CASE_SEG_SUFFIX as SEG_SUFFIX

CODEC = blosc2.Codec.LZ4HC
CLEVEL = 5
MAX_BLOCK_NBYTES = 128 * 1024
MAX_CHUNK_NBYTES = 6 * 1024**2
MAX_CHUNK_TO_PATCH_RATIO = 1.5
# mmap does not work on Windows (upstream issue #2723)
_MMAP_KWARGS: dict[str, str] = {} if os.name == "nt" else {"mmap_mode": "r"}


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _pow2_below(n: int) -> int:
    """Largest power of two strictly below ``n`` (1 for n <= 2)."""
    return 1 if n <= 1 else 1 << ((n - 1).bit_length() - 1)


def comp_blosc2_params(
    image_size: Sequence[int],
    patch_size: Sequence[int],
    bytes_per_pixel: int = 4,
    max_block_nbytes: int = MAX_BLOCK_NBYTES,
    max_chunk_nbytes: int = MAX_CHUNK_NBYTES,
    max_chunk_to_patch_ratio_per_axis: float | None = MAX_CHUNK_TO_PATCH_RATIO,
) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
    """``(blocks, chunks)`` for a ``(c, z, y, x)`` array read in patches of ``patch_size``.

    Same rule as upstream so that stores are interchangeable: the block starts at the next power
    of two of the patch (capped by the image) and is halved on its most over-sized axis until it
    fits ``max_block_nbytes``; the chunk then grows in block steps on its least covered axis up to
    ``min(image, floor(ratio * patch))`` and ``max_chunk_nbytes``. A 2-D patch ``(y, x)`` is
    treated as ``(1, y, x)`` and its chunks never grow along z. The channel axis is always 1.
    """
    if len(image_size) != 4 or len(patch_size) not in (2, 3):
        msg = (
            f"comp_blosc2_params needs a (c, z, y, x) image and a 2-D/3-D patch, got {image_size} "
            f"and {patch_size}"
        )
        raise ConfigurationError(msg)
    image = tuple(int(s) for s in image_size[1:])
    is_2d = len(patch_size) == 2
    patch = (1, *map(int, patch_size)) if is_2d else tuple(int(p) for p in patch_size)
    if min(image) <= 0 or min(patch) <= 0 or bytes_per_pixel <= 0:
        msg = (
            f"comp_blosc2_params: sizes must be positive, got image {image_size}, patch "
            f"{patch_size}"
        )
        raise ConfigurationError(msg)
    if max_chunk_to_patch_ratio_per_axis is None:
        target = image
    else:
        target = tuple(
            max(1, min(i, math.floor(max_chunk_to_patch_ratio_per_axis * p)))
            for i, p in zip(image, patch, strict=False)
        )

    def nbytes(shape: Sequence[int]) -> int:
        return math.prod(shape) * bytes_per_pixel

    block = [min(_next_pow2(p), i) for p, i in zip(patch, image, strict=False)]
    block_cap = min(max_block_nbytes, max_chunk_nbytes)
    while nbytes(block) > block_cap:
        axes = [a for a in range(3) if block[a] > 1]
        if not axes:
            msg = (
                f"comp_blosc2_params: no block fits {block_cap} bytes at {bytes_per_pixel} bytes "
                "per voxel"
            )
            raise ConfigurationError(msg)
        # halve the axis most over-represented relative to its target; later axes win ties
        axis = max(axes, key=lambda a: (block[a] / target[a], a))
        block[axis] = _pow2_below(block[axis])

    chunk = list(block)
    while True:
        best: tuple[Any, ...] | None = None
        for a in range(3):
            if (is_2d and a == 0) or patch[a] == 1:
                continue
            if chunk[a] >= image[a] or chunk[a] >= target[a]:
                continue
            grown = min(chunk[a] + block[a], image[a], target[a])
            candidate = [*chunk[:a], grown, *chunk[a + 1 :]]
            size = nbytes(candidate)
            if size > max_chunk_nbytes:
                continue
            # least covered axis first; ties go to the larger image axis, then the lower axis
            key = (chunk[a] / target[a], -image[a], a, -size)
            if best is None or key < best[0]:
                best = (key, candidate)
        if best is None:
            break
        chunk = best[1]
    return (1, *block), (1, *chunk)


def select_filter(
    array: np.ndarray, blocks: Sequence[int], chunks: Sequence[int], nthreads: int = 1
) -> tuple[blosc2.Filter, bytes | None]:
    """NOFILTER or SHUFFLE, whichever compresses a centred slab of at most one chunk smaller.

    Resampled (continuous) intensities favour SHUFFLE, quantized ones NOFILTER; measuring is the
    only robust proxy. Ties go to NOFILTER. When the slab is the whole array, the winning trial's
    frame is returned too, so the caller can write it instead of compressing a third time.
    """
    slab_shape = [min(int(c), s) for c, s in zip(chunks, array.shape, strict=False)]
    start = [(s - t) // 2 for s, t in zip(array.shape, slab_shape, strict=False)]
    slab = np.ascontiguousarray(
        array[tuple(slice(b, b + t) for b, t in zip(start, slab_shape, strict=False))]
    )
    trial_blocks = tuple(max(1, min(int(b), t)) for b, t in zip(blocks, slab_shape, strict=False))
    same_layout = tuple(int(c) for c in chunks) == array.shape == tuple(slab_shape)
    whole = same_layout and trial_blocks == tuple(int(b) for b in blocks)
    best: tuple[int, blosc2.Filter, blosc2.NDArray] | None = None
    try:
        for filt in (blosc2.Filter.NOFILTER, blosc2.Filter.SHUFFLE):
            cparams = {"codec": CODEC, "clevel": CLEVEL, "nthreads": nthreads, "filters": [filt]}
            trial = blosc2.asarray(
                slab, chunks=tuple(slab_shape), blocks=trial_blocks, cparams=cparams
            )
            if best is None or trial.schunk.cbytes < best[0]:
                best = (trial.schunk.cbytes, filt, trial)
    except (RuntimeError, ValueError):  # as upstream: a failed trial means NOFILTER
        return blosc2.Filter.NOFILTER, None
    assert best is not None
    return best[1], (best[2].to_cframe() if whole else None)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# files get the permissions a plain open() would give them (mkstemp makes them 0600)
FILE_MODE = 0o666 & ~_umask()


def save_array(
    array: np.ndarray,
    path: str | os.PathLike,
    chunks: Sequence[int],
    blocks: Sequence[int],
    nthreads: int = 1,
) -> blosc2.Filter:
    """Write ``array`` to ``path`` atomically (``io.atomic``: a temporary in the same folder,
    renamed; not flushed to disk one by one, a preprocessing writes thousands and a crashed one
    is rerun)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    array = np.ascontiguousarray(array)
    filt, frame = select_filter(array, blocks, chunks, nthreads)
    with atomic_path(path, suffix=".tmp.b2nd", fsync=False) as tmp:
        if frame is not None:
            tmp.write_bytes(frame)
        else:
            cparams = {"codec": CODEC, "clevel": CLEVEL, "nthreads": nthreads, "filters": [filt]}
            blosc2.asarray(
                array,
                urlpath=str(tmp),
                mode="w",
                chunks=tuple(int(c) for c in chunks),
                blocks=tuple(int(b) for b in blocks),
                cparams=cparams,
            )
    return filt


def _dump_properties(properties: dict[str, Any]) -> str:
    def default(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return value.tolist()
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            return float(value)
        msg = f"cannot store {type(value).__name__} in case properties"
        raise TypeError(msg)

    # compact: class_locations hold up to tens of thousands of coordinates
    return json.dumps(properties, separators=(",", ":"), default=default)


def save_case(
    folder: str | os.PathLike,
    case_id: str,
    data: np.ndarray,
    seg: np.ndarray,
    properties: dict[str, Any],
    patch_size: Sequence[int],
    nthreads: int = 1,
) -> dict[str, Any]:
    """Store one case (data float32, seg int16) and its properties; returns the layout used."""
    folder = Path(folder)
    data = np.ascontiguousarray(data, dtype=np.float32)
    seg = np.ascontiguousarray(seg, dtype=np.int16)
    layout: dict[str, Any] = {}
    for name, array, suffix in (("data", data, DATA_SUFFIX), ("seg", seg, SEG_SUFFIX)):
        blocks, chunks = comp_blosc2_params(array.shape, patch_size, array.itemsize)
        filt = save_array(array, folder / f"{case_id}{suffix}", chunks, blocks, nthreads)
        layout[name] = {
            "shape": list(array.shape),
            "chunks": list(chunks),
            "blocks": list(blocks),
            "filter": filt.name,
        }
    with atomic_path(folder / f"{case_id}{PROPERTIES_SUFFIX}", suffix=".json") as tmp:
        tmp.write_text(_dump_properties(properties), encoding="utf-8")
        os.chmod(tmp, FILE_MODE)
    return layout


def open_array(path: str | os.PathLike) -> blosc2.NDArray:
    """Open a ``.b2nd`` lazily (memory-mapped where the OS allows), one decompression thread."""
    path = Path(path)
    if not path.is_file():
        msg = f"{path}: preprocessed array not found (run `nnunet-core preprocess`)"
        raise DatasetError(msg)
    return blosc2.open(str(path), mode="r", dparams={"nthreads": 1}, **_MMAP_KWARGS)


def load_properties(folder: str | os.PathLike, case_id: str) -> dict[str, Any]:
    path = Path(folder) / f"{case_id}{PROPERTIES_SUFFIX}"
    if not path.is_file():
        msg = f"{path}: properties of case {case_id} not found"
        raise DatasetError(msg)
    return read_json(path)


def open_case(
    folder: str | os.PathLike, case_id: str
) -> tuple[blosc2.NDArray, blosc2.NDArray, dict[str, Any]]:
    """``(data, seg, properties)`` of a stored case; the arrays decompress only what is sliced."""
    folder = Path(folder)
    data = open_array(folder / f"{case_id}{DATA_SUFFIX}")
    seg = open_array(folder / f"{case_id}{SEG_SUFFIX}")
    return data, seg, load_properties(folder, case_id)


def read_patch(
    array: blosc2.NDArray | np.ndarray,
    slices: Sequence[slice],
    pad_value: float = 0,
    dtype: np.dtype | type | None = None,
) -> np.ndarray:
    """Read ``array[slices]`` as numpy, padding with ``pad_value`` where the box leaves the array.

    ``slices`` hold explicit ``start``/``stop`` in array coordinates (a negative start means
    *before* the array, not Python's from-the-end), leading axes first; missing trailing axes are
    read whole. Only the in-bounds part is sliced, so blosc2 decompresses just the chunks (and
    blocks) that intersect the box. ``dtype`` (default: the array's) must hold ``pad_value``
    (a uint8 segmentation padded with -1 is read as int16).
    """
    shape = array.shape
    dtype = array.dtype if dtype is None else np.dtype(dtype)
    if len(slices) > len(shape):
        msg = f"read_patch: {len(slices)} slices for a {len(shape)}-D array"
        raise ConfigurationError(msg)
    lo, hi = [], []
    for axis, size in enumerate(shape):
        s = slices[axis] if axis < len(slices) else slice(None)
        if s.step not in (None, 1):
            msg = f"read_patch: step {s.step} on axis {axis} is not supported"
            raise ConfigurationError(msg)
        lo.append(0 if s.start is None else int(s.start))
        hi.append(size if s.stop is None else int(s.stop))
    inner = tuple(slice(max(a, 0), min(b, size)) for a, b, size in zip(lo, hi, shape, strict=False))
    if all(a >= 0 and b <= size for a, b, size in zip(lo, hi, shape, strict=False)):
        return np.asarray(array[inner], dtype=dtype)
    out = np.full([max(b - a, 0) for a, b in zip(lo, hi, strict=False)], pad_value, dtype=dtype)
    if all(s.stop > s.start for s in inner):
        where = tuple(slice(s.start - a, s.stop - a) for s, a in zip(inner, lo, strict=False))
        out[where] = array[inner]
    return out
