"""``{case}.npz`` written from slabs, without the whole (C, ...) array in memory.

The archive is what ``np.savez_compressed(f, probabilities=...)`` writes (one deflated
``probabilities.npy`` member, zip64; deflated faster, see ``LEVEL``), so ``np.load`` and upstream
read it as before. Deflate pays little on noisy float32 probabilities (about 10 % at several
times the cost of writing), so each piece whose sample deflates by less than ``MIN_SAVING`` is
stored (deflate's level 0: stored blocks in the same stream); the background fill and saturated
regions still deflate. Its array is class-major (C order), while export produces all classes of
a few rows at a time: the rows go to an uncompressed spill file first (the page cache, not this
process, holds it; the file has no name from the start, so nothing is left behind), and the
member is then deflated from that file class by class.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
import zlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from nnunet_core.io.atomic import atomic_path

CHUNK_BYTES = 2**24
PIECE_BYTES = 2**22  # deflated on their own by the threads
MEMBER = "probabilities.npy"
# deflate level 1: on float32 probabilities about 1.5x the speed of np.savez_compressed's level 6
# for a file about 1 % larger (measured on a real-size CT export); the array is the same
LEVEL = 1
# a piece is deflated when a sample of it shrinks by at least this much, else stored: on a
# real-size CT export level 1 ran at 14 MB/s for 12 % less on the noisy classes, storing at 110
SAMPLE_BYTES = 2**16
MIN_SAVING = 0.2


def worth_deflating(piece: memoryview, level: int = LEVEL) -> bool:
    """Whether deflate at ``level`` saves ``MIN_SAVING`` on a sample from ``piece``'s middle."""
    if len(piece) <= SAMPLE_BYTES:
        return True  # small: deflating costs next to nothing
    start = (len(piece) - SAMPLE_BYTES) // 2
    sample = piece[start : start + SAMPLE_BYTES]
    return len(zlib.compress(sample, level)) <= (1 - MIN_SAVING) * len(sample)


class ParallelDeflate:
    """zlib's compressor interface, deflating on threads (zlib lets go of the GIL), or in this
    thread without a pool.

    Each piece is raw-deflated on its own and ended with a sync flush (byte-aligned, not final);
    ``flush`` adds an empty final block. The concatenation is one valid deflate stream (pigz's
    layout), so any zip reader inflates it as if one compressor had made it.
    """

    def __init__(self, pool: ThreadPoolExecutor | None, level: int = LEVEL) -> None:
        self.pool = pool
        self.level = level

    def _piece(self, piece: memoryview) -> bytes:
        level = self.level if worth_deflating(piece, self.level) else 0
        compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
        return compressor.compress(piece) + compressor.flush(zlib.Z_SYNC_FLUSH)

    def compress(self, data: bytes | memoryview) -> bytes:
        view = memoryview(data).cast("B")
        pieces = [view[i : i + PIECE_BYTES] for i in range(0, len(view), PIECE_BYTES)]
        if self.pool is None:
            return b"".join(map(self._piece, pieces))
        return b"".join(self.pool.map(self._piece, pieces))

    def flush(self) -> bytes:
        return zlib.compressobj(self.level, zlib.DEFLATED, -15).flush(zlib.Z_FINISH)


class ProbabilityFile:
    """Rows of a float32 ``(C, *shape)`` array written in any order, then one ``.npz``."""

    def __init__(self, folder: Path, shape: Sequence[int]) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.class_bytes = int(np.prod(self.shape[1:])) * 4
        self.row_bytes = int(np.prod(self.shape[2:])) * 4
        handle, name = tempfile.mkstemp(prefix=".probabilities.", suffix=".spill", dir=folder)
        os.unlink(name)  # only the descriptor keeps it: a killed export leaves no file behind
        self.fd = handle
        os.ftruncate(self.fd, self.class_bytes * self.shape[0])  # zeros, without writing them

    def write_rows(self, first_row: int, rows: np.ndarray) -> None:
        """``rows`` ``(C, k, ...)`` float32 become rows ``first_row:first_row + k`` of each
        class."""
        for channel, block in enumerate(rows):
            self.write_rows_of(channel, first_row, block)

    def fill_rows(self, channel: int, first_row: int, stop_row: int, value: float) -> None:
        """Rows of one class set to ``value`` (background outside the crop box)."""
        row = np.full(self.shape[2:], value, dtype=np.float32)
        step = max(1, CHUNK_BYTES // max(1, self.row_bytes))
        for start in range(first_row, stop_row, step):
            count = min(step, stop_row - start)
            block = np.broadcast_to(row, (count, *row.shape))
            self.write_rows_of(channel, start, np.ascontiguousarray(block))

    def write_rows_of(self, channel: int, first_row: int, rows: np.ndarray) -> None:
        """Rows ``(k, ...)`` of one class, from ``first_row`` on."""
        data = memoryview(np.ascontiguousarray(rows, dtype=np.float32)).cast("B")
        offset = channel * self.class_bytes + first_row * self.row_bytes
        while data:  # pwrite may write less than asked
            written = os.pwrite(self.fd, data, offset)
            data, offset = data[written:], offset + written

    def save_npz(self, target: Path, threads: int = 1) -> None:
        """Deflate the spill file into ``target`` (atomically) as ``probabilities``, on
        ``threads`` threads."""
        header = {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")),
                  "fortran_order": False, "shape": self.shape}  # fmt: skip
        total = self.class_bytes * self.shape[0]
        with atomic_path(target, suffix=".npz") as tmp, open(tmp, "wb") as handle:
            with zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
                with (
                    archive.open(MEMBER, "w", force_zip64=True) as member,
                    ThreadPoolExecutor(max(1, threads)) as pool,
                ):
                    # zipfile's own deflater would use level 6 (and one thread)
                    member._compressor = ParallelDeflate(pool if threads > 1 else None)
                    np.lib.format.write_array_header_1_0(member, header)
                    for offset in range(0, total, CHUNK_BYTES):
                        member.write(os.pread(self.fd, min(CHUNK_BYTES, total - offset), offset))

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> ProbabilityFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
