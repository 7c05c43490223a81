"""numpy's float32 sum, mean and std of a concatenation, reproduced piece by piece to the bit."""

from __future__ import annotations

import numpy as np
import pytest

from nnunet_core.planning.float32_sums import float32_mean, float32_std, pairwise_sum


@pytest.mark.parametrize("n", [1, 7, 8, 127, 128, 129, 1000, 8193, 123_457, 2_000_003])
def test_pieces_give_numpys_bits(n: int) -> None:
    rng = np.random.default_rng(n)
    values = np.round(rng.normal(40.0, 300.0, n)).astype(np.float32)  # HU-like, many ties
    pieces = np.split(values, sorted(rng.integers(0, n, 4)))  # empty pieces included
    assert pairwise_sum(pieces) == np.sum(values)
    mean = float32_mean(pieces)
    assert mean == np.mean(values) and mean.dtype == np.float32
    assert float32_std(pieces, mean) == np.std(values)


def test_overwriting_std_gives_the_same_bits_and_uses_the_pieces_memory() -> None:
    rng = np.random.default_rng(5)
    values = np.round(rng.normal(40.0, 300.0, 300_001)).astype(np.float32)
    pieces = [piece.copy() for piece in np.split(values, [1000, 150_000])]
    mean = float32_mean(pieces)
    assert float32_std(pieces, mean, overwrite=True) == np.std(values)
    assert pieces[0][0] == np.square(values[0] - mean)  # the squares took the values' place
