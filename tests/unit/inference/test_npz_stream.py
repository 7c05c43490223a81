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


@pytest.mark.parametrize("threads", [1, 2])
def test_noisy_pieces_are_stored_and_flat_ones_deflated(tmp_path: Path, monkeypatch, threads):
    """Deflate saves little on noisy float32 probabilities at several times the cost: such pieces
    are stored, while the background fill still shrinks to almost nothing; np.load reads both."""
    monkeypatch.setattr(npz_stream, "PIECE_BYTES", 2**18)
    expected = np.empty((2, 16, 64, 64), dtype=np.float32)  # 1 MiB per class
    expected[0] = 1.0
    expected[1] = np.random.default_rng(0).random(expected.shape[1:], dtype=np.float32)
    with ProbabilityFile(tmp_path, expected.shape) as spill:
        spill.write_rows(0, expected)
        spill.save_npz(tmp_path / "case.npz", threads)
    with zipfile.ZipFile(tmp_path / "case.npz") as archive:
        info = archive.infolist()[0]
        assert archive.testzip() is None
    noisy = expected[1].nbytes
    assert noisy <= info.compress_size <= noisy * 1.01  # stored, not deflated to ~90 %
    np.testing.assert_array_equal(np.load(tmp_path / "case.npz")["probabilities"], expected)
