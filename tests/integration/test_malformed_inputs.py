"""Malformed files (issue 51, part 5): each is one line naming the file and key, exit 2, no
traceback, and nothing written where the output would go.

- ``apply-postprocessing --pp-file``: a binary file, text that is not JSON, JSON nested past
  Python's recursion, a list or a number instead of an object, and each key of the wrong type;
- ``ensemble``: an ``.npz`` of object arrays (never unpickled: one holding a payload that would
  run a command leaves no marker), empty, text, truncated, damaged inside, without
  ``probabilities``, of strings, of another shape or channel count, or claiming a shape its bytes
  cannot hold.

Most cases run the real parser in this process (``main``); one of each kind runs
``python -m nnunet_core`` in a subprocess, where the exit code and stderr are the user's.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from nnunet_core.evaluation.postprocessing_file import KEEP_LARGEST
from tests.helpers.cli_lines import one_line, run_cli, run_main

DATASET = "Dataset900_Synth"
CASES = ("synth_000", "synth_001")


def snapshot(root: Path) -> dict[str, int]:
    """Every path under ``root`` with its size (a new or rewritten file changes it)."""
    return {
        str(p.relative_to(root)): (p.lstat().st_size if not p.is_dir() else -1)
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory, make_raw_dataset) -> Path:
    """``segs/`` (two label maps + dataset.json) and two prediction folders ``a/``, ``b/`` with
    each case's 3-channel probabilities (``.npz``) and segmentation, as ``predict
    --save_probabilities`` leaves them."""
    root = tmp_path_factory.mktemp("malformed")
    raw = make_raw_dataset(root / "raw" / DATASET, num_training=2, num_test=0, shape=(8, 16, 16))
    segs = root / "segs"
    shutil.copytree(raw / "labelsTr", segs)
    shutil.copy(raw / "dataset.json", segs / "dataset.json")
    rng = np.random.default_rng(0)
    for member in ("a", "b"):
        folder = root / member
        folder.mkdir()
        shutil.copy(raw / "dataset.json", folder / "dataset.json")
        for case in CASES:
            shutil.copy(segs / f"{case}.nii.gz", folder / f"{case}.nii.gz")
            probabilities = rng.random((3, 8, 16, 16), dtype=np.float32)
            np.savez_compressed(folder / f"{case}.npz", probabilities=probabilities)
    return root


# ---------------------------------------------------------------- postprocessing JSON


def _steps(fns: object, kwargs: object) -> bytes:
    return json.dumps({"postprocessing_fns": fns, "postprocessing_kwargs": kwargs}).encode()


def _keep(labels: object) -> bytes:
    return _steps([KEEP_LARGEST], [{"labels_or_regions": labels}])


# id -> (the file's bytes, what the line says after the path)
BAD_PP_FILES: dict[str, tuple[bytes, str]] = {
    "binary": (b"\x89PNG\r\n\x1a\n\x00\xff\xfe", "is not text (a binary file, or not UTF-8)"),
    "empty": (b"", "is not valid JSON (Expecting value: line 1 column 1)"),
    "not_json": (b"{postprocessing_fns: []", "is not valid JSON (Expecting property name"),
    "nested_too_deep": (b"[" * 100_000 + b"]" * 100_000, "is nested too deeply to read"),
    "a_list": (b"[1, 2]", "must hold a JSON object, not a list"),
    "a_number": (b"42", "must hold a JSON object, not an integer"),
    "a_string": (b'"postprocessing"', "must hold a JSON object, not a string"),
    "no_keys": (b"{}", "'postprocessing_fns' must be a list, not null"),
    "fns_a_string": (_steps(KEEP_LARGEST, []), "'postprocessing_fns' must be a list, not a string"),
    "kwargs_an_object": (
        _steps([], {"labels_or_regions": 1}),
        "'postprocessing_kwargs' must be a list, not an object",
    ),
    "lengths_differ": (
        _steps([KEEP_LARGEST], []),
        "'postprocessing_fns' (1) and 'postprocessing_kwargs' (0) differ in length",
    ),
    "function_unknown": (
        _steps(["os.system"], [{"labels_or_regions": 1}]),
        f"postprocessing_fns[0] is 'os.system'; the only postprocessing function is "
        f"'{KEEP_LARGEST}'",
    ),
    "function_a_number": (_steps([5], [{"labels_or_regions": 1}]), "postprocessing_fns[0] is 5"),
    "kwargs_entry_a_number": (
        _steps([KEEP_LARGEST], [3]),
        "postprocessing_kwargs[0] must be an object with 'labels_or_regions', not an integer",
    ),
    "kwargs_entry_without_labels": (
        _steps([KEEP_LARGEST], [{}]),
        "postprocessing_kwargs[0] has no 'labels_or_regions'",
    ),
    "label_a_string": (
        _keep("1"),
        "labels_or_regions: '1' is a string, not a label (0-2147483647) or a list of labels",
    ),
    "label_a_boolean": (_keep(True), "labels_or_regions: True is a boolean"),
    "label_a_float": (_keep(1.5), "labels_or_regions: 1.5 is a number"),
    "label_negative": (_keep(-1), "labels_or_regions: -1 is an integer, not a label"),
    "label_huge": (_keep(10**30), f"labels_or_regions: {10**30} is an integer, not a label"),
    "labels_empty": (_keep([]), "labels_or_regions: [] names no label"),
    "labels_nested_three_deep": (_keep([[[1]]]), "labels_or_regions: [1] is a list, not a label"),
    "label_null_in_region": (_keep([[1, None]]), "labels_or_regions: None is null"),
}


@pytest.mark.parametrize("case", list(BAD_PP_FILES), ids=list(BAD_PP_FILES))
def test_a_malformed_postprocessing_file_is_one_line_and_writes_nothing(
    root: Path, case: str, capsys
) -> None:
    content, needle = BAD_PP_FILES[case]
    pp_file = root / "pp" / f"{case}.json"
    pp_file.parent.mkdir(exist_ok=True)
    pp_file.write_bytes(content)
    output = root / f"out_{case}"
    before = snapshot(root)
    code, err = run_main(
        capsys, "apply-postprocessing", "-i", root / "segs", "-o", output, "--pp-file", pp_file
    )
    assert code == 2, err
    one_line(err, "apply-postprocessing", f"{pp_file}: ", needle)
    assert not output.exists()
    assert snapshot(root) == before


def test_the_well_formed_file_of_these_cases_is_applied(root: Path, capsys) -> None:
    """The control: the same folder and a valid file of both forms of step run."""
    pp_file = root / "pp_valid.json"
    pp_file.write_bytes(
        _steps(
            [KEEP_LARGEST, KEEP_LARGEST],
            [{"labels_or_regions": [1, [1, 2]]}, {"labels_or_regions": 2}],
        )
    )
    output = root / "out_valid"
    code, err = run_main(
        capsys, "apply-postprocessing", "-i", root / "segs", "-o", output, "--pp-file", pp_file
    )
    assert code == 0, err
    for name in (*(f"{case}.nii.gz" for case in CASES), "dataset.json"):
        assert (output / name).is_file(), name


def test_a_binary_postprocessing_file_through_the_real_cli(root: Path) -> None:
    pp_file = root / "pp_cli.json"
    pp_file.write_bytes(os.urandom(64) + b"\xff")
    output = root / "out_cli"
    code, err = run_cli(
        root, "apply-postprocessing", "-i", root / "segs", "-o", output, "-pp_pkl_file", pp_file
    )
    assert code == 2, err
    one_line(err, "apply-postprocessing", f"{pp_file}: the postprocessing file is not text")
    assert not output.exists()


# ---------------------------------------------------------------- ensemble .npz


class _RunsACommand:
    """Unpickling this runs ``touch marker``: a hostile object array."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _object_array(path: Path) -> None:
    np.savez(path, probabilities=np.array([{"a": 1}, None], dtype=object))


def _hostile(path: Path) -> None:
    payload = np.empty(1, dtype=object)
    payload[0] = _RunsACommand(path.parent / "PWNED")
    np.savez(path, probabilities=payload)


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:200])


def _damaged_inside(path: Path) -> None:
    """A few bytes flipped in the middle of the deflated data: the directory and header are
    intact, so only reading the array shows it (the member's CRC)."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 40] = bytes(b ^ 0xFF for b in data[middle : middle + 40])
    path.write_bytes(bytes(data))


def _forged_shape(path: Path) -> None:
    """A header claiming 10**12 values over a member of a few bytes (loading it would try to
    allocate terabytes)."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 100000, 100000, 100), }"
    npy = b"\x93NUMPY\x01\x00" + len(header.ljust(118) + "\n").to_bytes(2, "little")
    npy += (header.ljust(118) + "\n").encode() + b"\x00" * 64
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("probabilities.npy", npy)


# id -> (how synth_001.npz of member b is broken, what the line says after the path)
BAD_NPZ: dict[str, tuple[Callable[[Path], None], str]] = {
    "object_array": (_object_array, "'probabilities' holds Python objects (dtype object)"),
    "hostile_object_array": (_hostile, "which are never unpickled"),
    "empty_file": (lambda p: p.write_bytes(b""), "not a readable .npz archive"),
    "text_file": (lambda p: p.write_text("probabilities"), "not a readable .npz archive"),
    "truncated": (_truncated, "not a readable .npz archive (truncated or damaged"),
    "no_probabilities": (
        lambda p: np.savez(p, logits=np.zeros(3), other=np.ones(2)),
        "no 'probabilities' array (keys: logits, other)",
    ),
    "strings": (
        lambda p: np.savez(p, probabilities=np.array(["a", "b"])),
        "'probabilities' is <U1, not floating-point probabilities",
    ),
    "integers": (
        lambda p: np.savez(p, probabilities=np.zeros((3, 8, 16, 16), dtype=np.int64)),
        "'probabilities' is int64, not floating-point probabilities",
    ),
    "other_channel_count": (
        lambda p: np.savez(p, probabilities=np.zeros((2, 8, 16, 16), dtype=np.float32)),
        "probabilities of shape (2, 8, 16, 16); this dataset needs 3 channels",
    ),
    "other_shape": (
        lambda p: np.savez(p, probabilities=np.zeros((3, 8, 16, 15), dtype=np.float32)),
        "probabilities of shape (3, 8, 16, 15) differ from",
    ),
    "forged_shape": (_forged_shape, "claims shape (3, 100000, 100000, 100) of float32"),
}


@pytest.mark.parametrize("case", list(BAD_NPZ), ids=list(BAD_NPZ))
def test_a_malformed_npz_is_one_line_and_writes_nothing(root: Path, case: str, capsys) -> None:
    breaker, needle = BAD_NPZ[case]
    member = root / f"b_{case}"
    shutil.copytree(root / "b", member)
    broken = member / "synth_001.npz"
    breaker(broken)
    output = root / f"ensemble_{case}"
    before = snapshot(root)
    code, err = run_main(capsys, "ensemble", "-i", root / "a", member, "-o", output, "-np", "1")
    assert code == 2, err
    one_line(err, "ensemble", f"{broken}: ", needle)
    assert not output.exists()  # every header is checked before the output folder is made
    assert not (member / "PWNED").exists()
    assert snapshot(root) == before


def test_an_npz_damaged_inside_is_one_line_naming_it(root: Path, capsys) -> None:
    """Only reading the data finds it: the cases before it may be written (each atomically)."""
    member = root / "b_damaged_inside"
    shutil.copytree(root / "b", member)
    broken = member / "synth_001.npz"
    _damaged_inside(broken)
    output = root / "ensemble_damaged_inside"
    code, err = run_main(capsys, "ensemble", "-i", root / "a", member, "-o", output, "-np", "1")
    assert code == 2, err
    one_line(err, "ensemble", f"{broken}: not a readable .npz archive (truncated or damaged")
    assert not (output / "synth_001.nii.gz").exists()


def test_an_ensemble_of_the_intact_folders_runs(root: Path, capsys) -> None:
    """The control: the folders every case above breaks one file of are ensembled."""
    output = root / "ensemble_ok"
    code, err = run_main(capsys, "ensemble", "-i", root / "a", root / "b", "-o", output, "-np", "1")
    assert code == 0, err
    assert (output / "synth_001.nii.gz").is_file()


def test_an_object_array_npz_through_the_real_cli(root: Path) -> None:
    member = root / "b_cli"
    shutil.copytree(root / "b", member)
    _hostile(member / "synth_000.npz")
    output = root / "ensemble_cli"
    code, err = run_cli(root, "ensemble", "-i", root / "a", member, "-o", output, "-np", "1")
    assert code == 2, err
    one_line(err, "ensemble", f"{member / 'synth_000.npz'}: 'probabilities' holds Python objects")
    assert not output.exists() and not (member / "PWNED").exists()
