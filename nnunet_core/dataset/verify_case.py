"""Integrity checks of one training case: files, geometry, intensities and label values.

Runs in a worker process and returns every problem it finds as text (instead of raising at the
first), so that ``verify`` can list all broken cases in one run.

Geometry tolerance: spacing and origin agree if ``|a - b| <= 1e-4 + 1e-4 * |b|`` (mm), direction
cosines if ``|a - b| <= 1e-4``. NIfTI stores pixdim and the qform/sform in float32 (relative
rounding ~6e-8, i.e. ~3e-5 mm at 500 mm) and converters (DICOM, NRRD, MHA -> NIfTI) round
differently, so exact equality would reject valid data. The bound stays below 0.06 mm for origins
within 500 mm and 1e-4 relative for spacings, far below any voxel, so a real misalignment fails.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import SimpleITK as sitk

from nnunet_core.dataset.discovery import RawCase
from nnunet_core.dataset.nifti_check import NiftiProblem, is_nifti, scan_nifti

RTOL = 1e-4
ATOL = 1e-4
DIRECTION_ATOL = 1e-4
MAX_LISTED_VALUES = 20


@dataclass
class CaseCheck:
    """What one case's check found; ``shape``/``spacing`` are numpy order ((z,) y, x)."""

    identifier: str
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    ndim: int | None = None
    shape: tuple[int, ...] | None = None
    spacing: tuple[float, ...] | None = None
    voxels_per_label: dict[int, int] = field(default_factory=dict)
    has_foreground: bool | None = None

    def problem(self, text: str) -> None:
        self.problems.append(f"case {self.identifier}: {text}")

    def warning(self, text: str) -> None:
        self.warnings.append(f"case {self.identifier}: {text}")


def display_path(path: Path, raw_dir: Path) -> str:
    """``imagesTr/la_003_0000.nii.gz`` for files inside the dataset, else the full path."""
    try:
        return path.relative_to(raw_dir).as_posix()
    except ValueError:
        return str(path)


def _rounded(values: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(round(float(v), 6) for v in values)


def effective_ndim(image: sitk.Image) -> int:
    """2 for 2-D files and for 3-D files with a single slice (upstream treats both as 2-D)."""
    if image.GetDimension() == 2 or (image.GetDimension() == 3 and image.GetSize()[2] == 1):
        return 2
    return image.GetDimension()


def _compare_geometry(
    check: CaseCheck, ref: tuple[str, sitk.Image], other: tuple[str, sitk.Image]
) -> None:
    """Add a problem for each way ``other`` differs from the reference (channel 0)."""
    ref_name, ref_image = ref
    name, image = other
    if image.GetDimension() != ref_image.GetDimension():
        check.problem(
            f"{name} is {image.GetDimension()}-D but {ref_name} is {ref_image.GetDimension()}-D"
        )
        return
    shape, ref_shape = image.GetSize()[::-1], ref_image.GetSize()[::-1]
    if shape != ref_shape:
        check.problem(f"shape {shape} of {name} differs from {ref_shape} of {ref_name}")
    pairs = (
        ("spacing", image.GetSpacing()[::-1], ref_image.GetSpacing()[::-1], RTOL, ATOL),
        ("origin", image.GetOrigin()[::-1], ref_image.GetOrigin()[::-1], RTOL, ATOL),
        ("direction", image.GetDirection(), ref_image.GetDirection(), 0.0, DIRECTION_ATOL),
    )
    for what, value, ref_value, rtol, atol in pairs:
        if not np.allclose(value, ref_value, rtol=rtol, atol=atol):
            check.problem(
                f"{what} {_rounded(value)} of {name} differs from {_rounded(ref_value)} of {ref_name}"
            )


def _itk_reason(exc: RuntimeError) -> str:
    """The ``ITK ERROR: ...`` line of an ITK exception (its ``Reason:`` errno is often bogus)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if line.startswith("ITK ERROR:"):
            return line.split("): ", 1)[-1][:200]
    return (lines[-1] if lines else "unknown reason")[:200]


@contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Drop what C++ readers (MetaIO, NRRD) print to fd 2: our one-line message says it all."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _read(check: CaseCheck, path: Path, name: str, what: str) -> sitk.Image | None:
    """Read ``path``; a missing, corrupt, non-finite or unsupported file becomes a problem."""
    if not path.is_file():
        check.problem(f"missing {what} file {name}")
        return None
    nonfinite = None
    if is_nifti(path):
        # ITK silently zero-fills truncated NIfTI and zeroes NaN/inf: check the stored bytes.
        try:
            nonfinite = scan_nifti(path)
        except NiftiProblem as exc:
            check.problem(f"{name}: unreadable or corrupt image ({exc})")
            return None
    try:
        with _native_stderr_silenced():
            image = sitk.ReadImage(str(path))
    except RuntimeError as exc:
        check.problem(f"{name}: unreadable or corrupt image ({_itk_reason(exc)})")
        return None
    if image.GetNumberOfComponentsPerPixel() != 1:
        check.problem(f"{name}: multi-component (RGB/vector) pixels; store one channel per file")
        return None
    if image.GetDimension() not in (2, 3):
        check.problem(f"{name}: {image.GetDimension()}-D image; expected 2-D or 3-D")
        return None
    if nonfinite is None:
        array = sitk.GetArrayViewFromImage(image)
        if np.issubdtype(array.dtype, np.floating):
            nonfinite = int(array.size - np.count_nonzero(np.isfinite(array)))
    if nonfinite:
        check.problem(f"{name} has {nonfinite} NaN/inf voxel(s)")
    return image


def _list(values: list[int] | list[float]) -> str:
    shown = ", ".join(str(v) for v in values[:MAX_LISTED_VALUES])
    return shown + (", ..." if len(values) > MAX_LISTED_VALUES else "")


def _check_labels(
    check: CaseCheck,
    name: str,
    image: sitk.Image,
    allowed: tuple[int, ...],
    ignore_label: int | None,
) -> None:
    array = sitk.GetArrayViewFromImage(image)
    values, counts = np.unique(array, return_counts=True)
    if np.issubdtype(values.dtype, np.floating):
        fractional = [float(v) for v in values if not np.isfinite(v) or v != np.round(v)]
        if fractional:
            check.problem(f"{name} has non-integer label values [{_list(fractional)}]")
            return
    ints = [int(v) for v in values]
    undeclared = [v for v in ints if v not in allowed]
    if undeclared:
        check.problem(
            f"{name} has label values [{_list(undeclared)}] not declared in dataset.json "
            f"(declared: {_list(list(allowed))})"
        )
    check.voxels_per_label = {v: int(c) for v, c in zip(ints, counts, strict=True)}
    check.has_foreground = any(v not in (0, ignore_label) for v in ints)
    if not check.has_foreground:
        check.warning(f"no foreground in {name} (values: {_list(ints)})")


def check_case(
    case: RawCase,
    raw_dir: Path,
    allowed_labels: tuple[int, ...],
    ignore_label: int | None,
) -> CaseCheck:
    """Every check of one case; never raises for a problem of the data."""
    check = CaseCheck(case.identifier)
    channels: list[tuple[str, sitk.Image]] = []
    for index, path in enumerate(case.images):
        name = display_path(path, raw_dir)
        image = _read(check, path, name, f"channel {index}")
        if image is not None:
            channels.append((name, image))
    label: tuple[str, sitk.Image] | None = None
    if case.label is None:
        check.problem("no label file given")
    else:
        name = display_path(case.label, raw_dir)
        image = _read(check, case.label, name, "label")
        if image is not None:
            label = (name, image)
            _check_labels(check, name, image, allowed_labels, ignore_label)
    reference = channels[0] if channels else label
    if reference is None:
        return check
    for other in [*channels[1:], *([label] if label and channels else [])]:
        _compare_geometry(check, reference, other)
    ref_image = reference[1]
    check.ndim = effective_ndim(ref_image)
    check.shape = tuple(int(v) for v in ref_image.GetSize()[::-1])
    check.spacing = tuple(float(v) for v in ref_image.GetSpacing()[::-1])
    return check
