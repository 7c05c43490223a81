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

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nnunet_core.dataset.discovery import RawCase, not_a_file
from nnunet_core.dataset.nifti_check import NiftiProblem, is_nifti, scan_nifti
from nnunet_core.errors import DatasetError
from nnunet_core.io.readers import FileImage, ImageReader, reader_by_name

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


def _compare_geometry(
    check: CaseCheck, ref: tuple[str, FileImage], other: tuple[str, FileImage]
) -> None:
    """Add a problem for each way ``other`` differs from the reference (channel 0)."""
    ref_name, ref_image = ref
    name, image = other
    if len(image.file_shape) != len(ref_image.file_shape):
        check.problem(
            f"{name} is {len(image.file_shape)}-D but {ref_name} is {len(ref_image.file_shape)}-D"
        )
        return
    if image.file_shape != ref_image.file_shape:
        check.problem(
            f"shape {image.file_shape} of {name} differs from {ref_image.file_shape} of {ref_name}"
        )
    for what, value in image.geometry.items():
        ref_value = ref_image.geometry.get(what)
        if ref_value is None or len(ref_value) != len(value):
            continue
        rtol, atol = (0.0, DIRECTION_ATOL) if what == "direction" else (RTOL, ATOL)
        if not np.allclose(value, ref_value, rtol=rtol, atol=atol):
            check.problem(
                f"{what} {_rounded(value)} of {name} differs from {_rounded(ref_value)} of "
                f"{ref_name}"
            )


def _reason(exc: DatasetError, path: Path) -> str:
    """The reader's message without its leading path (verify names files relative to the
    dataset)."""
    text = str(exc)
    return text[len(f"{path}: ") :] if text.startswith(f"{path}: ") else text


def _read(
    check: CaseCheck, path: Path, name: str, what: str, reader: ImageReader
) -> FileImage | None:
    """Read ``path``; a missing, corrupt, non-finite or unsupported file becomes a problem."""
    if not path.is_file():
        reason = not_a_file(path)
        check.problem(f"{what} file {name} {reason}" if reason else f"missing {what} file {name}")
        return None
    nonfinite = None
    if is_nifti(path):
        # ITK silently zero-fills truncated NIfTI and zeroes NaN/inf: check the stored bytes,
        # whichever reader the dataset uses
        try:
            nonfinite = scan_nifti(path)
        except NiftiProblem as exc:
            check.problem(f"{name}: unreadable or corrupt image ({exc})")
            return None
    try:
        image = reader.read_label_file(path) if what == "label" else reader.read_file(path)
    except DatasetError as exc:
        check.problem(f"{name}: {_reason(exc, path)}")
        return None
    if nonfinite is None and np.issubdtype(image.array.dtype, np.floating):
        nonfinite = int(image.array.size - np.count_nonzero(np.isfinite(image.array)))
    if nonfinite:
        check.problem(f"{name} has {nonfinite} NaN/inf voxel(s)")
    return image


def _list(values: list[int] | list[float]) -> str:
    shown = ", ".join(str(v) for v in values[:MAX_LISTED_VALUES])
    return shown + (", ..." if len(values) > MAX_LISTED_VALUES else "")


def _check_labels(
    check: CaseCheck,
    name: str,
    image: FileImage,
    allowed: tuple[int, ...],
    ignore_label: int | None,
) -> None:
    array = image.array
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


def _read_channels(
    case: RawCase, raw_dir: Path, reader_name: str
) -> tuple[CaseCheck, ImageReader, list[tuple[str, FileImage]]]:
    """The case's check, its reader and the channels that read (problems go into the check)."""
    check = CaseCheck(case.identifier)
    reader = reader_by_name(reader_name)
    reader.quiet = True  # our one-line problem says it all
    channels: list[tuple[str, FileImage]] = []
    for index, path in enumerate(case.images):
        name = display_path(path, raw_dir)
        image = _read(check, path, name, f"channel {index}", reader)
        if image is not None:
            channels.append((name, image))
    return check, reader, channels


def check_case(
    case: RawCase,
    raw_dir: Path,
    allowed_labels: tuple[int, ...],
    ignore_label: int | None,
    reader_name: str = "SimpleITKIO",
) -> CaseCheck:
    """Every check of one case (read with the dataset's reader); never raises for the data."""
    check, reader, channels = _read_channels(case, raw_dir, reader_name)
    label: tuple[str, FileImage] | None = None
    if case.label is None:
        check.problem("no label file given")
    else:
        name = display_path(case.label, raw_dir)
        image = _read(check, case.label, name, "label", reader)
        if image is not None:
            label = (name, image)
            _check_labels(check, name, image, allowed_labels, ignore_label)
    reference = channels[0] if channels else label
    if reference is None:
        return check
    for other in [*channels[1:], *([label] if label and channels else [])]:
        _compare_geometry(check, reference, other)
    ref_image = reference[1]
    check.ndim = ref_image.ndim
    check.shape = tuple(int(v) for v in ref_image.file_shape)
    spacing = ref_image.geometry.get("spacing", ref_image.spacing)
    check.spacing = tuple(float(v) for v in spacing)
    return check


# ---------------------------------------------------------------- test cases, predict, evaluate


def check_test_case(
    case: RawCase,
    raw_dir: Path,
    allowed_labels: tuple[int, ...] = (),
    ignore_label: int | None = None,
    reader_name: str = "SimpleITKIO",
) -> CaseCheck:
    """``check_case`` for a case without a required label: an ``imagesTs`` case (its
    ``labelsTs`` file, if any, is checked as a training label) or a ``predict`` input."""
    if case.label is not None:
        return check_case(case, raw_dir, allowed_labels, ignore_label, reader_name)
    check, reader, channels = _read_channels(case, raw_dir, reader_name)
    if not channels:
        return check
    for other in channels[1:]:
        _compare_geometry(check, channels[0], other)
    ref_image = channels[0][1]
    check.ndim = ref_image.ndim
    check.shape = tuple(int(v) for v in ref_image.file_shape)
    check.spacing = tuple(float(v) for v in ref_image.geometry.get("spacing", ref_image.spacing))
    return check


def read_checked_label(
    path: Path, name: str, identifier: str, readers: list[ImageReader]
) -> FileImage:
    """A label map read with verify's checks (missing, truncated or corrupt, NaN/inf) by the first
    of ``readers`` that reads it; otherwise a DatasetError with verify's one line naming it."""
    first: list[str] = []
    for reader in readers:
        reader.quiet = True
        check = CaseCheck(identifier)
        image = _read(check, path, name, "label", reader)
        if image is not None:
            if check.problems:  # read, but with NaN/inf voxels
                raise DatasetError(check.problems[0])
            return image
        first = first or check.problems
    raise DatasetError(first[0] if first else f"case {identifier}: {name}: no reader")


def geometry_problems(
    identifier: str, reference: tuple[str, FileImage], other: tuple[str, FileImage]
) -> list[str]:
    """verify's shape/spacing/origin/direction comparison of ``other`` with ``reference``."""
    check = CaseCheck(identifier)
    _compare_geometry(check, reference, other)
    return check.problems
