"""Malformed ``dataset.json`` values (issue 14's corpus): each is refused when dataset.json is
parsed, so ``verify`` (and every command reading it) exits 2 with one line naming the file and
the key, and writes nothing. Valid upstream forms (regions with ``regions_class_order``, the
``ignore`` label, background 0) stay accepted.

The CLI runs in-process (``nnunet_core.cli.main``): parsing fails before any worker starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nnunet_core.cli import main
from nnunet_core.errors import DatasetError
from nnunet_core.io.dataset_json import parse_dataset_json

DATASET = "Dataset901_Tiny"
TINY = {"num_training": 3, "num_test": 0, "shape": (8, 16, 16)}
LABELS = {"background": 0, "organ": 1, "lesion": 2}  # the generator's labels

# id -> (changes to dataset.json, what the one line must say besides the file name)
MALFORMED: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "label_value_string": (
        {"labels": {**LABELS, "organ": "1"}},
        ("labels['organ']", "'1' (a string)"),
    ),
    "label_value_non_integer": (
        {"labels": {**LABELS, "organ": 1.5}},
        ("labels['organ']", "1.5 (a float)"),
    ),
    "label_value_boolean": (
        {"labels": {**LABELS, "organ": True}},
        ("labels['organ']", "True (a boolean)"),
    ),
    "label_value_negative": (
        {"labels": {**LABELS, "lesion": -1}},
        ("labels['lesion']", "got -1"),
    ),
    "region_with_a_string_member": (
        {"labels": {**LABELS, "whole": [1, "2"]}, "regions_class_order": [1, 2, 2]},
        ("labels['whole']", "[1, '2']"),
    ),
    "two_labels_with_the_same_value": (
        {"labels": {"background": 0, "organ": 1, "lesion": 1}},
        ("labels['organ'] and labels['lesion']", "same value 1"),
    ),
    "two_identical_regions": (
        {"labels": {"background": 0, "a": [1, 2], "b": [2, 1]}, "regions_class_order": [1, 2]},
        ("labels['a'] and labels['b']", "same region [1, 2]"),
    ),
    "regions_class_order_without_regions": (
        {"regions_class_order": [1, 2]},
        ("'regions_class_order'", "no label is a region"),
    ),
    "regions_class_order_not_a_list": (
        {"labels": {**LABELS, "whole": [1, 2]}, "regions_class_order": "1,2"},
        ("'regions_class_order'", "must be a list of label values"),
    ),
    "regions_class_order_wrong_length": (
        {"labels": {**LABELS, "whole": [1, 2]}, "regions_class_order": [1, 2]},
        ("'regions_class_order'", "one entry per region", "3 region(s), got 2"),
    ),
    "unknown_reader_name": (
        {"overwrite_image_reader_writer": "SimpleITKIo"},
        ("overwrite_image_reader_writer", "'SimpleITKIo'", "did you mean SimpleITKIO?"),
    ),
    "reader_name_not_a_string": (
        {"overwrite_image_reader_writer": 3},
        ("overwrite_image_reader_writer", "unknown"),
    ),
}


@pytest.fixture
def dataset(tmp_path: Path, make_raw_dataset) -> Path:
    return make_raw_dataset(tmp_path / "raw" / DATASET, **TINY)


def edit_json(dataset_dir: Path, changes: dict[str, Any]) -> Path:
    path = dataset_dir / "dataset.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return path


def files_under(folder: Path) -> set[Path]:
    return set(folder.rglob("*")) if folder.exists() else set()


def run_cli(
    capsys: pytest.CaptureFixture[str], root: Path, command: str, *extra: str
) -> tuple[int, str]:
    flags = ["--raw", str(root / "raw"), "--preprocessed", str(root / "pre")]
    code = main([command, "-d", "901", *flags, *extra])
    return code, capsys.readouterr().err


def assert_one_line(code: int, err: str, command: str, *needles: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith(f"nnunet-core {command}: error: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_verify_refuses_malformed_dataset_json(dataset: Path, case: str, capsys) -> None:
    changes, needles = MALFORMED[case]
    path = edit_json(dataset, changes)
    root = dataset.parent.parent
    before = files_under(root)
    code, err = run_cli(capsys, root, "verify", "-np", "1")
    assert_one_line(code, err, "verify", f"{path}:", *needles)
    assert files_under(root) == before  # no verify.json, no preprocessed folder
    assert not (root / "pre").exists()


@pytest.mark.parametrize(
    ("command", "extra"),
    [("fingerprint", ["-np", "1"]), ("plan", []), ("splits", [])],
    ids=["fingerprint", "plan", "splits"],
)
def test_a_non_integer_label_never_reaches_the_preprocessed_dataset_json(
    dataset: Path, command: str, extra: list[str], capsys
) -> None:
    """Upstream reads 1.5 as label 1; the planner used to copy it into preprocessed/D."""
    path = edit_json(dataset, {"labels": {**LABELS, "organ": 1.5}})
    root = dataset.parent.parent
    (root / "pre" / DATASET).mkdir(parents=True)  # plan reads from this root
    code, err = run_cli(capsys, root, command, *extra)
    assert_one_line(code, err, command, f"{path}:", "labels['organ']", "1.5")
    assert files_under(root / "pre") == {root / "pre" / DATASET}


BASE = {"channel_names": {"0": "MR"}, "numTraining": 0, "file_ending": ".nii.gz"}


@pytest.mark.parametrize(
    "content",
    [
        {"labels": {"background": 0, "organ": 1, "lesion": 2}},
        {"labels": {"background": 0, "organ": 1, "lesion": 2, "ignore": 3}},
        {
            "labels": {"background": 0, "whole": [1, 2, 3], "core": [2, 3], "enhancing": 3},
            "regions_class_order": [1, 2, 3],
        },
        {
            "labels": {"background": 0, "whole": [1, 2], "core": [2], "ignore": 3},
            "regions_class_order": [1, 2],
        },
        {"labels": {"background": 0, "a": 1}, "regions_class_order": None},
        {"labels": {"background": 0, "a": 1}, "overwrite_image_reader_writer": "None"},
        {"labels": {"background": 0, "a": 1}, "overwrite_image_reader_writer": "NibabelIO"},
    ],
    ids=[
        "labels",
        "ignore_label",
        "brats_regions",
        "regions_and_ignore",
        "null_regions_class_order",
        "reader_None_string",
        "known_reader",
    ],
)
def test_valid_upstream_forms_stay_accepted(content: dict[str, Any]) -> None:
    parsed = parse_dataset_json({**BASE, **content})
    assert parsed.label_spec.all_labels[0] == 0


def test_regions_keep_their_order_and_heads() -> None:
    parsed = parse_dataset_json(
        {
            **BASE,
            "labels": {"background": 0, "whole": [1, 2, 3], "core": [2, 3], "enhancing": 3},
            "regions_class_order": [1, 2, 3],
        }
    )
    spec = parsed.label_spec
    assert spec.has_regions and spec.regions_class_order == (1, 2, 3)
    assert spec.num_segmentation_heads == 3


def test_errors_name_the_source_given() -> None:
    with pytest.raises(DatasetError, match=r"^/m/dataset\.json: labels\['a'\]"):
        parse_dataset_json({**BASE, "labels": {"background": 0, "a": "1"}}, "/m/dataset.json")
