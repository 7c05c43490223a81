"""A dataset.json file_ending typo is named as such, with the endings the images have."""

from __future__ import annotations

from pathlib import Path

import pytest

from nnunet_core.dataset.file_endings import ending_mismatch, endings_found, file_ending_of
from nnunet_core.dataset.verify import verify_dataset
from nnunet_core.errors import DatasetError
from nnunet_core.layout.raw import DATASET_JSON, IMAGES_TR


@pytest.mark.parametrize(
    ("name", "ending"),
    [
        ("case_0000.nii.gz", ".nii.gz"),
        ("case.v2_0001.nii", ".nii"),  # a dot in the case id is not the ending
        ("case_0000.mha", ".mha"),
        ("notes.txt", ".txt"),
        ("scan.nii.gz", ".nii.gz"),
        ("README", ""),
    ],
)
def test_the_ending_of_a_file_name(name: str, ending: str) -> None:
    assert file_ending_of(name) == ending


def test_endings_are_counted_hidden_files_left_out(tmp_path: Path) -> None:
    for name in ("a_0000.nii.gz", "b_0000.nii.gz", "c_0000.mha", ".DS_Store"):
        (tmp_path / name).write_bytes(b"")
    assert endings_found(tmp_path) == {".nii.gz": 2, ".mha": 1}
    assert endings_found(tmp_path / "missing") == {}


def test_a_mismatch_names_file_ending_and_what_the_folder_holds(tmp_path: Path) -> None:
    images = tmp_path / IMAGES_TR
    images.mkdir()
    for case in range(3):
        (images / f"c{case}_0000.nii.gz").write_bytes(b"")
    json_path = tmp_path / DATASET_JSON
    assert ending_mismatch(json_path, ".nii", images) == (
        f'{json_path} file_ending is ".nii" but {IMAGES_TR} holds ".nii.gz" files (3): '
        "set file_ending to the images' ending"
    )
    assert ending_mismatch(json_path, ".nii.gz", images) is None  # no typo
    assert ending_mismatch(json_path, ".nii", tmp_path / "empty") is None  # nothing to compare


def test_verify_names_file_ending_instead_of_an_empty_dataset(make_raw_dataset, tmp_path) -> None:
    raw = make_raw_dataset(tmp_path / "Dataset900_Synth", num_training=3, num_test=0)
    json_path = raw / DATASET_JSON
    json_path.write_text(json_path.read_text().replace('".nii.gz"', '".nii"'))
    with pytest.raises(DatasetError) as info:
        verify_dataset(raw, raw.name, disable_progress=True)
    message = str(info.value)
    assert 'file_ending is ".nii"' in message and '".nii.gz" files (3)' in message, message
    assert "no training cases" not in message
