"""Hostile files, built byte by byte: zips (crafted member names, declared sizes, link members),
pickles that call ``os.system`` when loaded, a trainer record with its carried source."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np


def write_zip(path: Path, members: dict[str, bytes]) -> Path:
    """A plain deflated zip of ``members`` (names taken as they are: ``../x`` or ``/x`` too)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as handle:
        for name, data in members.items():
            handle.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), data)
    return path


def write_link_zip(path: Path, name: str, target: str) -> Path:
    """A zip whose member ``name`` is a symbolic link (Unix mode in its external attributes)."""
    info = zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0))
    info.create_system = 3  # Unix
    info.external_attr = (0o120777 << 16) | 0
    with zipfile.ZipFile(path, "w") as handle:
        handle.writestr(info, target)
    return path


def write_declared_bomb(path: Path, prefix: str, members: int, declared: int) -> Path:
    """A zip of ``members`` stored members of 16 bytes each that declare ``declared`` bytes
    uncompressed (local headers and central directory alike): a bomb by its headers."""
    data = b"zip bomb member\n"
    crc = zlib.crc32(data)
    local, central, offset = io.BytesIO(), io.BytesIO(), 0
    for index in range(members):
        name = f"{prefix}/part_{index:03d}.bin".encode()
        header = struct.pack(
            "<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, crc, len(data), declared, len(name), 0
        )
        local.write(header + name + data)
        fields = (0x02014B50, 20, 20, 0, 0, 0, 0x21, crc, len(data), declared, len(name))
        entry = struct.pack("<IHHHHHHIIIHHHHHII", *fields, 0, 0, 0, 0, 0, offset)
        central.write(entry + name)
        offset += len(header) + len(name) + len(data)
    directory = central.getvalue()
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, members, members, len(directory), offset, 0)
    path.write_bytes(local.getvalue() + directory + end)
    return path


def write_ratio_bomb(path: Path, name: str, size: int) -> Path:
    """One deflated member of ``size`` zero bytes (about 1000:1)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as handle:
        info = zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED  # a ZipInfo's own default is stored
        with handle.open(info, "w") as sink:
            block = bytes(1 << 20)
            for _ in range(size >> 20):
                sink.write(block)
    return path


class SystemCall:
    """Pickled as ``os.system(command)``: loading it with an unsafe unpickler runs the command."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def write_pickle_checkpoint(path: Path, marker: Path) -> Path:
    """A ``.pth`` (torch's zip of a pickle) whose pickle holds a REDUCE to ``os.system``."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"network_weights": SystemCall(f"touch {marker}")}, path)
    return path


def write_object_npz(path: Path, marker: Path) -> Path:
    """An ``.npz`` whose ``probabilities`` is an object array (a pickle with the REDUCE)."""
    array = np.empty(1, dtype=object)
    array[0] = SystemCall(f"touch {marker}")
    with open(path, "wb") as handle:
        np.savez(handle, probabilities=array)
    return path


def evil_source(marker: Path, class_name: str = "Carried") -> str:
    """A trainer source that creates ``marker`` when imported (its class is a real trainer)."""
    return (
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).touch()\n"
        "from nnunet_core import Trainer\n\n\n"
        f"class {class_name}(Trainer):\n    pass\n"
    )


BENIGN_SOURCE = (
    '"""A user\'s trainer, carried in its model folder."""\n'
    "from nnunet_core import Trainer\n\n\n"
    "class Carried(Trainer):\n    pass\n"
)


def trainer_record(source_name: str, source: str, *, recorded: str | None = None) -> dict:
    """``trainer.json`` for ``trainer_source/<source_name>`` (sha256 of ``recorded`` if given:
    a record that no longer matches its file)."""
    digest = hashlib.sha256((recorded or source).encode()).hexdigest()
    return {
        "trainer": f"{source_name}:Carried",
        "class": "Carried",
        "found_by": "file",
        "module": Path(source_name).stem,
        "original_file": f"/home/someone/{source_name}",
        "source": f"trainer_source/{source_name}",
        "sha256": digest,
    }


def carry_code(model: Path, source: str, *, recorded: str | None = None) -> Path:
    """Add ``trainer.json`` + ``trainer_source/carried.py`` to a model folder."""
    (model / "trainer_source").mkdir(exist_ok=True)
    (model / "trainer_source" / "carried.py").write_text(source)
    record = trainer_record("carried.py", source, recorded=recorded)
    (model / "trainer.json").write_text(json.dumps(record, indent=1))
    return model


def copy_folder(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    return target
