"""Keep large freed blocks in this process's heap, so that the next tile reuses them.

glibc serves a block above its mmap threshold (at most 32 MB) with a fresh mapping and unmaps it
when freed: every forward pass on the CPU then faults its activations in again page by page,
each page zeroed by the kernel (about 1 GB per 28x256x256 tile of the stand-in network, a fifth
of its time; the planned network's activations are larger still). With the threshold raised
and the heap's top kept, the freed blocks are reused; the peak stays what the live tensors need.
"""

from __future__ import annotations

import ctypes
import functools
import sys

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
HEAP_BLOCK_BYTES = 2**30  # blocks up to this size come from the heap
KEEP_TOP_BYTES = 2**31 - 1  # free memory at the heap's top kept up to this (an int)


@functools.cache
def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; False where there is no glibc
    ``mallopt`` (macOS, musl), which changes nothing there."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_MMAP_THRESHOLD, HEAP_BLOCK_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, KEEP_TOP_BYTES)
    )
