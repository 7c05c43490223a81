"""The blosc2 case store: upstream's chunk/block rule, atomic writes, lazy memory-mapped reads."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import blosc2
import numpy as np
import pytest

from nnunet_core.errors import DatasetError
from nnunet_core.io.blosc2_store import (
    comp_blosc2_params,
    open_array,
    open_case,
    read_patch,
    save_array,
    save_case,
    select_filter,
)
from tests.helpers.paths import TEST_DATA

VECTORS = TEST_DATA / "preprocessing" / "comp_blosc2_params_vectors.json"


def test_comp_blosc2_params_matches_all_upstream_vectors() -> None:
    vectors = json.loads(VECTORS.read_text())
    assert len(vectors) == 102
    for v in vectors:
        blocks, chunks = comp_blosc2_params(v["image_size"], v["patch_size"], v["bytes_per_pixel"])
        assert (list(blocks), list(chunks)) == (v["blocks"], v["chunks"]), v


def test_comp_blosc2_params_documented_examples() -> None:
    assert comp_blosc2_params((1, 300, 400, 400), (128, 128, 128)) == (
        (1, 32, 32, 32),
        (1, 96, 128, 128),
    )
    assert comp_blosc2_params((1, 300, 400, 400), (128, 128, 128), 2) == (
        (1, 64, 32, 32),
        (1, 128, 192, 128),
    )
    # 2-D patches: (1, y, x) blocks and chunks that never grow along z
    assert comp_blosc2_params((1, 80, 512, 512), (512, 512)) == ((1, 1, 256, 128), (1, 1, 512, 512))


def _case(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(2, 20, 70, 60)).astype(np.float32)
    seg = rng.integers(-1, 3, size=(1, 20, 70, 60)).astype(np.int16)
    return data, seg


def test_save_and_open_case_round_trip(tmp_path: Path) -> None:
    data, seg = _case()
    props = {"spacing": [2.5, 0.8, 0.8], "class_locations": {"1": [[0, 1, 2, 3]], "2": []}}
    layout = save_case(tmp_path, "c1", data, seg, props, (16, 32, 32))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c1.b2nd", "c1.json", "c1_seg.b2nd"]
    d, s, p = open_case(tmp_path, "c1")
    assert isinstance(d, blosc2.NDArray) and isinstance(s, blosc2.NDArray)
    assert d.dtype == np.float32 and s.dtype == np.int16
    assert np.array_equal(d[:], data) and np.array_equal(s[:], seg) and p == props
    assert list(d.chunks) == layout["data"]["chunks"] and list(s.blocks) == layout["seg"]["blocks"]
    cparams = d.schunk.cparams
    assert cparams.codec == blosc2.Codec.LZ4HC and cparams.clevel == 5
    if sys.platform.startswith("linux"):  # memory-mapped: the files show up in our mappings
        maps = Path("/proc/self/maps").read_text()
        assert str(tmp_path / "c1.b2nd") in maps and str(tmp_path / "c1_seg.b2nd") in maps
    # overwriting works (blosc2 itself refuses existing files) and leaves no temporary files
    save_case(tmp_path, "c1", data + 1, seg, props, (16, 32, 32))
    assert np.array_equal(open_case(tmp_path, "c1")[0][:], data + 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c1.b2nd", "c1.json", "c1_seg.b2nd"]


def test_missing_case_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="c9.b2nd"):
        open_case(tmp_path, "c9")


def test_select_filter_measures_and_ties_go_to_nofilter() -> None:
    zeros = np.zeros((1, 8, 32, 32), np.float32)
    assert select_filter(zeros, (1, 8, 32, 32), (1, 8, 32, 32))[0] == blosc2.Filter.NOFILTER
    smooth = np.linspace(0, 1, 8 * 64 * 64, dtype=np.float32).reshape(1, 8, 64, 64)
    assert select_filter(smooth, (1, 8, 32, 32), (1, 8, 64, 64))[0] == blosc2.Filter.SHUFFLE


def test_read_patch_equals_the_region_and_pads_outside(tmp_path: Path) -> None:
    data, _ = _case(1)
    save_array(data, tmp_path / "a.b2nd", chunks=(1, 5, 35, 30), blocks=(1, 5, 16, 16))
    array = open_array(tmp_path / "a.b2nd")
    box = (slice(1, 2), slice(3, 17), slice(10, 60), slice(5, 45))
    assert np.array_equal(read_patch(array, box), data[box])
    assert np.array_equal(read_patch(array, box[:2]), data[1:2, 3:17])
    padded = read_patch(
        array, (slice(0, 2), slice(-3, 4), slice(65, 75), slice(0, 60)), pad_value=-1
    )
    assert padded.shape == (2, 7, 10, 60)
    assert np.all(padded[:, :3] == -1) and np.all(padded[:, :, 5:] == -1)
    assert np.array_equal(padded[:, 3:, :5], data[:, 0:4, 65:70])


def test_a_patch_decompresses_only_the_chunks_it_touches(tmp_path: Path) -> None:
    """Garble the compressed streams of every chunk but one inside the file, keeping headers.

    A memory-mapped read of a patch inside the intact chunk still returns the right values, so
    nothing else was decompressed; any read that touches another chunk returns garbage.
    """
    data = np.random.default_rng(2).normal(size=(1, 4, 64, 64)).astype(np.float32)
    path = tmp_path / "case.b2nd"
    save_array(data, path, chunks=(1, 1, 32, 32), blocks=(1, 1, 16, 16))
    schunk = open_array(path).schunk
    assert schunk.nchunks == 16
    raw = bytearray(path.read_bytes())
    keep = 5  # chunk grid (1, 4, 2, 2): z=1, y=0, x=1
    header = 32 + 4 * 4  # chunk header + one offset per block (4 blocks per chunk)
    for index in range(schunk.nchunks):
        chunk = schunk.get_chunk(index)
        start = raw.find(chunk)
        assert start >= 0 and raw.find(chunk, start + 1) < 0
        if index != keep:
            raw[start + header : start + len(chunk)] = b"\xff" * (len(chunk) - header)
    garbled = tmp_path / "garbled.b2nd"
    garbled.write_bytes(bytes(raw))
    array = open_array(garbled)
    inside = (slice(0, 1), slice(1, 2), slice(3, 30), slice(40, 64))
    assert np.array_equal(read_patch(array, inside), data[inside])
    other = (slice(0, 1), slice(0, 1), slice(0, 10), slice(0, 10))
    try:
        assert not np.array_equal(read_patch(array, other), data[other])
    except RuntimeError:
        pass  # blosc2 may also refuse to decompress the garbled chunk
