"""numpy's float32 ``mean`` and ``std`` of a long sequence given in pieces, to the last bit.

Upstream's fingerprint calls ``np.mean`` and ``np.std`` on the concatenated float32 samples of all
cases (~1e8 values). numpy sums a contiguous float32 array pairwise in float32: a range of more
than 128 values is split at half its length rounded down to a multiple of 8 and the two sums
added; a range of 8 to 128 values is summed in 8 interleaved accumulators, combined as
``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, and the remainder added in order; fewer
than 8 values are added in order. Any other order rounds differently (the 7th significant digit
on a CT), so this module walks that tree over the pieces without concatenating them: a node that
lies inside one piece is that slice's own ``np.sum`` (the same tree, relative to the slice), a
node across pieces is split as numpy splits it and its halves added in float32.

``np.mean`` divides the float32 sum by the count in float64 and rounds to float32; ``np.std``
subtracts that float32 mean from every value in float32, squares in float32, sums pairwise as
above, divides likewise and takes the float32 square root.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BLOCK = 128  # numpy's PW_BLOCKSIZE: larger ranges are split in two
UNROLL = 8  # the split point is rounded down to a multiple of this


def pairwise_sum(pieces: Sequence[np.ndarray]) -> np.float32:
    """``np.sum`` of the float32 concatenation of ``pieces``, without concatenating them."""
    pieces = [np.ascontiguousarray(p, dtype=np.float32).ravel() for p in pieces]
    pieces = [p for p in pieces if p.size]
    if not pieces:
        return np.float32(0.0)
    ends = np.cumsum([p.size for p in pieces])

    def node(start: int, n: int) -> np.float32:
        index = int(np.searchsorted(ends, start, side="right"))
        begin = int(ends[index - 1]) if index else 0
        if start + n <= int(ends[index]):  # inside one piece: numpy's own sum of the slice
            return np.sum(pieces[index][start - begin : start - begin + n])
        if n <= BLOCK:  # a short range across pieces: numpy's block sum of its values
            stop = int(np.searchsorted(ends, start + n, side="left"))
            joined = np.concatenate(pieces[index : stop + 1])
            return np.sum(joined[start - begin : start - begin + n])
        half = n // 2
        half -= half % UNROLL
        return np.float32(node(start, half) + node(start + half, n - half))

    return node(0, int(ends[-1]))


def float32_mean(pieces: Sequence[np.ndarray]) -> np.float32:
    """``np.mean`` of the float32 concatenation of ``pieces``."""
    n = sum(int(np.asarray(p).size) for p in pieces)
    return np.float32(np.float64(pairwise_sum(pieces)) / np.float64(n))


def float32_std(
    pieces: Sequence[np.ndarray], mean: np.float32 | None = None, overwrite: bool = False
) -> np.float32:
    """``np.std`` (ddof 0) of the float32 concatenation of ``pieces``.

    ``overwrite``: the squared deviations replace the values in the pieces' own memory (float32
    pieces only), instead of a second copy of every sample (about 400 MB for a fingerprint,
    whose fresh pages cost more than the arithmetic)."""
    mean = float32_mean(pieces) if mean is None else np.float32(mean)
    n = sum(int(np.asarray(p).size) for p in pieces)
    squares = []
    for piece in pieces:
        piece = np.asarray(piece)
        in_place = overwrite and piece.dtype == np.float32
        deviation = np.subtract(piece, mean, out=piece if in_place else None, dtype=np.float32)
        squares.append(np.square(deviation, out=deviation))
    return np.sqrt(np.float32(np.float64(pairwise_sum(squares)) / np.float64(n)))
