"""Raw NIfTI data checks that SimpleITK cannot do for us.

ITK's NIfTI reader (SimpleITK 2.5) zero-fills a truncated ``.nii``/``.nii.gz`` without an error
and turns NaN/inf voxels into 0 on read; nibabel (``NibabelIO``) sees the NaNs but may read a
short file lazily. So ``verify`` scans the stored voxel bytes of every NIfTI file itself, whatever
the dataset's reader: one streaming pass (bounded memory) that checks the gzip stream and its CRC,
the data length against the header, and counts non-finite floats.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

NIFTI_ENDINGS = (".nii", ".nii.gz")
CHUNK_BYTES = 8 * 1024 * 1024
# NIfTI datatype codes of floating-point voxels -> numpy kind (endianness added later).
FLOAT_TYPES = {16: "f4", 64: "f8"}


class NiftiProblem(Exception):
    """The file is not a complete NIfTI file; the message says why (no path)."""


@dataclass(frozen=True)
class NiftiHeader:
    endian: str
    datatype: int
    bitpix: int
    num_voxels: int
    vox_offset: int

    @property
    def data_bytes(self) -> int:
        return self.num_voxels * self.bitpix // 8


def is_nifti(path: Path) -> bool:
    return path.name.endswith(NIFTI_ENDINGS)


def _open(path: Path) -> BinaryIO:
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def _read_exactly(handle: BinaryIO, size: int, what: str) -> bytes:
    data = handle.read(size)
    if len(data) < size:
        msg = f"truncated file: {what} needs {size} bytes, found {len(data)}"
        raise NiftiProblem(msg)
    return data


def parse_header(head: bytes) -> NiftiHeader:
    """NIfTI-1 (348-byte) or NIfTI-2 (540-byte) header fields needed for the data size."""
    for endian in ("<", ">"):
        size = struct.unpack(f"{endian}i", head[:4])[0]
        if size == 348:
            ndim = struct.unpack(f"{endian}h", head[40:42])[0]
            dims = struct.unpack(f"{endian}7h", head[42:56])
            datatype, bitpix = struct.unpack(f"{endian}2h", head[70:74])
            vox_offset = int(struct.unpack(f"{endian}f", head[108:112])[0])
            break
        if size == 540:
            datatype, bitpix = struct.unpack(f"{endian}2h", head[12:16])
            ndim = struct.unpack(f"{endian}q", head[16:24])[0]
            dims = struct.unpack(f"{endian}7q", head[24:80])
            vox_offset = struct.unpack(f"{endian}q", head[168:176])[0]
            break
    else:
        msg = "not a NIfTI file (bad header size)"
        raise NiftiProblem(msg)
    if not 1 <= ndim <= 7 or any(d < 0 for d in dims[:ndim]) or bitpix <= 0:
        msg = f"invalid NIfTI header (dim[0]={ndim}, bitpix={bitpix})"
        raise NiftiProblem(msg)
    return NiftiHeader(
        endian, datatype, bitpix, int(np.prod(dims[:ndim], dtype=np.int64)), vox_offset
    )


def _count_nonfinite(handle: BinaryIO, header: NiftiHeader) -> int:
    """Stream the voxel bytes; count NaN/inf for float types; raise if the data is short."""
    kind = FLOAT_TYPES.get(header.datatype)
    dtype = np.dtype(header.endian + kind) if kind else None
    remaining, nonfinite, carry = header.data_bytes, 0, b""
    while remaining > 0:
        chunk = handle.read(min(CHUNK_BYTES, remaining))
        if not chunk:
            msg = (
                f"truncated file: voxel data has {header.data_bytes - remaining} of "
                f"{header.data_bytes} bytes"
            )
            raise NiftiProblem(msg)
        remaining -= len(chunk)
        if dtype is not None:
            chunk = carry + chunk
            usable = len(chunk) - len(chunk) % dtype.itemsize
            values = np.frombuffer(chunk[:usable], dtype=dtype)
            nonfinite += int(values.size - np.count_nonzero(np.isfinite(values)))
            carry = chunk[usable:]
    return nonfinite


def scan_nifti(path: Path) -> int:
    """Number of NaN/inf voxels; raises NiftiProblem for a truncated or corrupt file."""
    try:
        with _open(path) as handle:
            head = _read_exactly(handle, 348, "the header")
            if struct.unpack("<i", head[:4])[0] == 540 or struct.unpack(">i", head[:4])[0] == 540:
                head += _read_exactly(handle, 540 - 348, "the header")
            header = parse_header(head)
            if header.vox_offset > len(head):
                _read_exactly(handle, header.vox_offset - len(head), "the header extension")
            nonfinite = _count_nonfinite(handle, header)
            if path.name.endswith(".gz"):
                while handle.read(CHUNK_BYTES):  # reach the end so gzip checks the CRC
                    pass
            return nonfinite
    except EOFError:
        msg = "truncated file: the gzip stream ends before its end marker"
        raise NiftiProblem(msg) from None
    except (zlib.error, gzip.BadGzipFile) as exc:
        msg = f"damaged gzip stream ({exc or type(exc).__name__})"
        raise NiftiProblem(msg) from None
    except OSError as exc:
        msg = f"cannot read ({exc.strerror or exc})"
        raise NiftiProblem(msg) from None
