"""Checkpoints: atomic writes, safe loading, the resume order and pretrained weights.

A checkpoint is a dict of tensors and plain Python types only, so it loads with
``torch.load(weights_only=True)`` and opening one never runs code. It is written to a temporary
file in the same folder, flushed and fsynced, then renamed over the target (and the folder is
fsynced), so a kill at any moment leaves either the old or the new checkpoint, never a torn one.
Keys follow upstream's (``network_weights``, ``optimizer_state``, ``current_epoch``, ...).
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nnunet_core.errors import NnunetCoreError
from nnunet_core.io.atomic import atomic_path, remove_atomic_temporaries
from nnunet_core.io.removal import remove_file
from nnunet_core.layout.results import CHECKPOINT_BEST as BEST
from nnunet_core.layout.results import CHECKPOINT_FINAL as FINAL
from nnunet_core.layout.results import CHECKPOINT_LATEST as LATEST
from nnunet_core.model.upstream_names import (
    WeightNamesError,
    our_state_dict,
    upstream_state_dict,
)

RESUME_ORDER = (FINAL, LATEST, BEST)
_TMP_MARK = ".partial"
_HEAD_NAMES = {"heads", "seg_layers"}

_PLAIN = (str, int, float, bool, type(None), torch.Tensor, torch.Size, torch.dtype, torch.device)


class CheckpointError(NnunetCoreError):
    """A checkpoint cannot be written or read (names the file)."""


def _check_plain(value: Any, where: str) -> None:
    """Refuse anything ``weights_only`` loading would reject, before it reaches the disk."""
    if isinstance(value, _PLAIN):
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_plain(key, f"{where} key")
            _check_plain(item, f"{where}[{key!r}]")
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_plain(item, f"{where}[{index}]")
        return
    msg = (
        f"checkpoint entry {where} is a {type(value).__name__}; only tensors and plain types are "
        "stored"
    )
    raise CheckpointError(msg)


def temporary_path(target: Path) -> Path:
    """Where ``save_checkpoint`` writes before the rename (hidden, one per writer process)."""
    return target.with_name(f".{target.name}.{os.getpid()}{_TMP_MARK}")


def save_checkpoint(state: Mapping[str, Any], target: str | os.PathLike) -> Path:
    """Write ``state`` to ``target`` atomically; the previous file stays intact on any failure.

    A full, over-quota or read-only disk is an ``OSError`` naming ``target`` (torch reports it
    as a RuntimeError about its zip writer); the temporary file is removed in every case.
    """
    target = Path(target)
    _check_plain(state, "checkpoint")
    with atomic_path(target, temporary=temporary_path(target), sync_folder=True) as tmp:
        with open(tmp, "wb") as handle:
            torch.save(dict(state), handle)
    return target


def remove_stale_temporaries(folder: str | os.PathLike) -> list[Path]:
    """Delete the temporary files killed writers left in a fold folder: checkpoints that were
    never renamed, and ``io.atomic``'s temporaries (``progress.png``, ``debug.json``, ...)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    stale = [p for p in folder.glob(f".checkpoint_*.pth.*{_TMP_MARK}") if p.is_file()]
    for path in stale:
        remove_file(path, inside=[folder])
    return stale + remove_atomic_temporaries(folder)


RESUME_ADVICE = "delete it to resume from an older checkpoint or start over"


class InputCheckpointError(CheckpointError):
    """A checkpoint given to a command as its input (``predict -chk``) is broken: exit 2, as
    for any other broken input."""

    exit_code = 2


def _upstream_safe_globals() -> list[Any]:
    """The only non-plain types upstream's checkpoints hold: numpy float scalars (its logger's
    means and ``_best_ema``) and their dtype, also under numpy 1's module path (older files)."""
    import numpy as np

    try:
        from numpy._core.multiarray import scalar
    except ImportError:  # numpy 1
        from numpy.core.multiarray import scalar
    return [
        scalar,
        (scalar, "numpy.core.multiarray.scalar"),
        np.dtype,
        type(np.dtype(np.float64)),
        type(np.dtype(np.float32)),
    ]


def _plain_values(value: Any) -> Any:
    """numpy scalars (from upstream's checkpoints) as Python numbers, containers rebuilt."""
    if isinstance(value, dict):
        return {key: _plain_values(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain_values(item) for item in value]
    if type(value) is tuple:  # not torch.Size
        return tuple(_plain_values(item) for item in value)
    item = getattr(value, "item", None)
    if item is not None and type(value).__module__ == "numpy":
        return item()
    return value


def _load_failure(exc: BaseException) -> str:
    """What a failed ``torch.load`` says, in a few words; torch's own advice (re-run with
    ``weights_only=False``, i.e. execute whatever the file holds) is never passed on."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()
    if isinstance(exc, EOFError) or not text:
        return "empty or truncated file"
    refused = re.search(r"(?:Unsupported global: GLOBAL|unsupported GLOBAL) (\S+)", text)
    refused = refused or re.search(
        r"allowlisted via `add_safe_globals`, but got <class '([^']+)'>", text
    )
    if refused:
        return (
            f"needs {refused.group(1)}, which no nnU-Net checkpoint holds; refused, because "
            "loading it could run code"
        )
    if "WeightsUnpickler error:" in text:
        detail = text.split("WeightsUnpickler error:", 1)[1].strip()
        detail = re.split(r"\s+was not an allowed global|\.\s|\n", detail, maxsplit=1)[0]
        return f"holds something other than tensors and plain values ({detail.strip()})"
    if "Weights only load failed" in text:
        return "holds something other than tensors and plain values"
    if isinstance(exc, PermissionError):
        return f"not readable ({exc.strerror})"
    if isinstance(exc, OSError):  # a truncated archive can fail as EINVAL when torch seeks in it
        return f"not a torch checkpoint archive ({exc.strerror or type(exc).__name__})"
    zip_error = re.search(r"failed reading zip archive: ([^.]+)", text)
    if zip_error:
        return f"not a torch checkpoint archive ({zip_error.group(1).strip()})"
    first = text.splitlines()[0]
    if "weights_only" in first:
        return type(exc).__name__
    return f"{type(exc).__name__}: {first[:160]}"


def load_checkpoint(
    path: str | os.PathLike,
    map_location: str | torch.device = "cpu",
    advice: str = RESUME_ADVICE,
    error: type[CheckpointError] = CheckpointError,
) -> dict:
    """Load a checkpoint (ours or upstream's) with ``weights_only=True`` and only the numpy types
    upstream writes allowed; a broken or hostile file is a one-line ``error`` naming it (and the
    type it needs), ending with ``advice``. numpy scalars come back as Python numbers."""
    path = Path(path)
    if not path.is_file():
        msg = f"{path}: checkpoint not found"
        raise error(msg)
    try:
        with warnings.catch_warnings():
            # e.g. "Detected pickle protocol 4": a second line on stderr about a file we refuse
            warnings.simplefilter("ignore", UserWarning)
            with torch.serialization.safe_globals(_upstream_safe_globals()):
                state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises RuntimeError, UnpicklingError, EOFError, ...
        msg = f"{path}: corrupted or not a checkpoint ({_load_failure(exc)}); {advice}"
        raise error(msg) from None
    if not isinstance(state, dict) or "network_weights" not in state:
        msg = f"{path}: not a training checkpoint (no 'network_weights' entry); {advice}"
        raise error(msg)
    return _plain_values(state)


def find_resume_checkpoint(fold_folder: str | os.PathLike) -> Path | None:
    """The checkpoint ``--c`` continues from: final, else latest, else best, else None.

    None is a normal first attempt (the workflow always passes ``--c``): the caller says so in one
    log line; a ``UserWarning`` here would open every fresh fold's log with a Python source line.
    """
    fold_folder = Path(fold_folder)
    for name in RESUME_ORDER:
        candidate = fold_folder / name
        if candidate.is_file():
            return candidate
    return None


def network_weights(network: nn.Module) -> dict[str, torch.Tensor]:
    """What a checkpoint stores as ``network_weights``: upstream's names (see
    ``model.upstream_names``), so upstream's tools load our checkpoints as they are."""
    return upstream_state_dict(network)


def _our_weights(
    weights: Mapping[str, torch.Tensor],
    path: str | os.PathLike,
    error: type[CheckpointError] = CheckpointError,
) -> dict:
    try:
        return our_state_dict(weights)
    except WeightNamesError as exc:
        msg = f"{path}: {exc}"
        raise error(msg) from None


def load_network_weights(
    network: nn.Module,
    weights: Mapping[str, torch.Tensor],
    path: str | os.PathLike,
    error: type[CheckpointError] = CheckpointError,
) -> None:
    """Load a checkpoint's ``network_weights`` (ours or upstream's names) with every tensor
    used; a mismatch is one line naming the file and the first names that do not fit."""
    ours = _our_weights(weights, path, error)
    expected = network.state_dict()
    missing = [k for k in expected if k not in ours]
    unexpected = [k for k in ours if k not in expected]
    wrong = [k for k in expected if k in ours and ours[k].shape != expected[k].shape]
    problems = [
        f"{label} {names[0]!r}" + (f" (and {len(names) - 1} more)" if len(names) > 1 else "")
        for label, names in (
            ("lacks", missing),
            ("has no place for", unexpected),
            ("has another shape for", wrong),
        )
        if names
    ]
    if problems:
        msg = f"{path}: the weights do not fit this network (other plans?): " + "; ".join(problems)
        raise error(msg)
    network.load_state_dict(ours)


def load_pretrained_weights(network: nn.Module, path: str | os.PathLike) -> list[str]:
    """Start ``network`` from a checkpoint's weights (ours or upstream's); returns the keys not
    loaded.

    Upstream's rule: every tensor but the segmentation heads (``decoder.heads``, upstream's
    ``seg_layers``) must be in the checkpoint with the same shape; the heads keep their fresh
    initialisation whatever the label count, so a model of other labels fine-tunes as well.
    """
    source = _our_weights(load_checkpoint(path)["network_weights"], path)
    target = network.state_dict()
    skipped: list[str] = []
    update: dict[str, torch.Tensor] = {}
    for key, value in target.items():
        if _HEAD_NAMES & set(key.split(".")):
            skipped.append(key)
            continue
        if key not in source:
            msg = f"{path}: pretrained weights lack {key!r} (another architecture?)"
            raise CheckpointError(msg)
        if tuple(source[key].shape) != tuple(value.shape):
            msg = (
                f"{path}: pretrained {key!r} has shape {tuple(source[key].shape)}, "
                f"the network needs {tuple(value.shape)}"
            )
            raise CheckpointError(msg)
        update[key] = source[key]
    network.load_state_dict({**target, **update})
    return skipped
