"""``move-plans-between-datasets`` (upstream's ``nnUNetv2_move_plans_between_datasets``), run
in-process on a source plans file and a target raw dataset with one real image."""

from __future__ import annotations

import json
from pathlib import Path

import SimpleITK as sitk

from nnunet_core.cli import main


def one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"nnunet-core {command}: error: "), err
    return err


SOURCE, TARGET = "Dataset010_Source", "Dataset011_Target"
TARGET_JSON = {
    "channel_names": {"0": "MR"},
    "labels": {"background": 0, "x": 1},
    "numTraining": 1,
    "file_ending": ".nii.gz",
}


def _roots(tmp_path: Path, target_json: dict) -> tuple[Path, Path]:
    raw, pre = tmp_path / "raw", tmp_path / "pre"
    plans = {
        "dataset_name": SOURCE,
        "plans_name": "nnUNetPlans",
        "image_reader_writer": "SimpleITKIO",
        "configurations": {
            "2d": {"data_identifier": "nnUNetPlans_2d", "patch_size": [64, 64]},
            "3d_fullres": {"data_identifier": "custom_3d", "patch_size": [8, 16, 16]},
            "3d_lowres_big": {"inherits_from": "3d_fullres", "patch_size": [8, 8, 8]},
        },
        "foreground_intensity_properties_per_channel": {"0": {"mean": 1.0}},
    }
    (pre / SOURCE).mkdir(parents=True)
    (pre / SOURCE / "nnUNetPlans.json").write_text(json.dumps(plans))
    (raw / TARGET / "imagesTr").mkdir(parents=True)
    (raw / TARGET / "dataset.json").write_text(json.dumps(target_json))
    image = sitk.GetImageFromArray([[[0.0, 1.0], [2.0, 3.0]]])
    sitk.WriteImage(
        image, str(raw / TARGET / "imagesTr" / f"case_0000{target_json['file_ending']}")
    )
    return raw, pre


def move(raw: Path, pre: Path, *flags: str) -> int:
    return main(["move-plans-between-datasets", "-s", "10", "-t", "11", "--raw", str(raw),
                 "--preprocessed", str(pre), *flags])  # fmt: skip


def test_move_plans_rewrites_dataset_plans_name_and_data_identifiers(tmp_path) -> None:
    target_json = {**TARGET_JSON, "overwrite_image_reader_writer": "NibabelIOWithReorient"}
    raw, pre = _roots(tmp_path, target_json)
    assert move(raw, pre, "-sp", "nnUNetPlans", "-tp", "nnUNetPlansFrom10") == 0
    written = json.loads((pre / TARGET / "nnUNetPlansFrom10.json").read_text())
    source = json.loads((pre / SOURCE / "nnUNetPlans.json").read_text())
    assert written["dataset_name"] == TARGET and written["plans_name"] == "nnUNetPlansFrom10"
    assert written["image_reader_writer"] == "NibabelIOWithReorient"
    configurations = written["configurations"]
    assert configurations["2d"]["data_identifier"] == "nnUNetPlansFrom10_2d"
    assert configurations["3d_fullres"]["data_identifier"] == "nnUNetPlansFrom10_custom_3d"
    assert "data_identifier" not in configurations["3d_lowres_big"]
    assert list(written) == list(source)  # key order kept
    changed = ("dataset_name", "plans_name", "image_reader_writer", "configurations")
    assert all(written[k] == source[k] for k in source if k not in changed)
    assert configurations["2d"]["patch_size"] == source["configurations"]["2d"]["patch_size"]
    assert source["dataset_name"] == SOURCE  # the source is left alone


def test_move_plans_keeps_the_identifier_by_default_and_picks_the_reader_by_ending(
    tmp_path,
) -> None:
    target_json = {**TARGET_JSON, "file_ending": ".nrrd"}
    raw, pre = _roots(tmp_path, target_json)
    assert move(raw, pre, "-sp", "nnUNetPlans") == 0
    written = json.loads((pre / TARGET / "nnUNetPlans.json").read_text())
    assert (
        written["plans_name"] == "nnUNetPlans" and written["image_reader_writer"] == "SimpleITKIO"
    )
    assert written["configurations"]["3d_fullres"]["data_identifier"] == "custom_3d"


def test_move_plans_missing_source_plans_is_one_line(tmp_path, capsys) -> None:
    raw, pre = _roots(tmp_path, TARGET_JSON)
    assert move(raw, pre, "-sp", "nnUNetResEncUNetMPlans") == 2
    err = one_line_error(capsys, "move-plans-between-datasets")
    assert f"{pre / SOURCE / 'nnUNetResEncUNetMPlans.json'}: source plans not found" in err
    assert not (pre / TARGET).exists()
