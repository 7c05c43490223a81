"""The streamed probabilities npz is the one ``np.savez_compressed`` would write, to any reader."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from nnunet_core.inference import npz_stream
from nnunet_core.inference.npz_stream import ProbabilityFile


@pytest.mark.parametrize("threads", [1, 3])
def test_rows_in_any_order_make_the_array(tmp_path: Path, monkeypatch, threads: int) -> None:
    monkeypatch.setattr(npz_stream, "PIECE_BYTES", 1000)  # many pieces, odd sizes
    monkeypatch.setattr(npz_stream, "CHUNK_BYTES", 7000)
    rng = np.random.default_rng(0)
    expected = rng.random((3, 9, 11, 13), dtype=np.float32).round(2)
    with ProbabilityFile(tmp_path, expected.shape) as spill:
        spill.fill_rows(0, 0, 2, 1.0)
        expected[0, :2] = 1.0
        expected[1:, :2] = 0.0  # never written: zeros
        for start, stop in ((6, 9), (2, 4), (4, 6)):
            spill.write_rows(start, expected[:, start:stop])
        spill.save_npz(tmp_path / "case.npz", threads)
    with zipfile.ZipFile(tmp_path / "case.npz") as archive:
        assert archive.namelist() == ["probabilities.npy"]
        assert archive.testzip() is None  # the CRC of the inflated stream matches
        assert archive.infolist()[0].compress_type == zipfile.ZIP_DEFLATED
    loaded = np.load(tmp_path / "case.npz")["probabilities"]
    assert loaded.dtype == np.float32 and loaded.flags.c_contiguous
    np.testing.assert_array_equal(loaded, expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case.npz"]  # no spill file left
