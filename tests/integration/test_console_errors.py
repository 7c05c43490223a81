"""What the console shows of a user's errors, through the real Snakemake (issue 46, item 5).

A configuration error is its one line; the raw dataset's integrity problems are the run's first
lines, one each, and the run stops before any job. Both stop while the workflow is read, so each
run here takes seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import SimpleITK as sitk

from nnunet_core.layout.work import work_lock_file
from tests.helpers.workflow import DATASET, snakemake, tiny_config

# Snakemake's own line before it reads the Snakefile (the repository's workflow profile)
PROFILE_NOTICE = "Using workflow specific profile"


def _own_lines(result) -> list[str]:
    """stderr without Snakemake's profile notice: what the workflow printed."""
    return [line for line in result.stderr.splitlines() if not line.startswith(PROFILE_NOTICE)]


def _assert_no_job_and_no_noise(result, tmp_path: Path) -> None:
    output = result.stdout + result.stderr
    for noise in ("Error in", "Exception", "Traceback", 'File "', "Building DAG", "Job "):
        assert noise not in output, output
    # no job started: no log but the work_dir lock, which the check takes first
    lock = work_lock_file(tmp_path / "work")
    assert [p for p in (tmp_path / "work").rglob("*") if p.is_file() and p != lock] == []


@pytest.mark.slow
def test_a_configuration_error_is_its_one_line(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "work")
    config["training"]["folds"] = [7]
    result = snakemake(tmp_path, config, check=False)  # a real run, not a preview
    assert result.returncode == 2, result.stdout + result.stderr
    assert _own_lines(result) == [
        "config training.folds: fold 7 does not exist: splits.num_folds is 5, so the folds are "
        "0-4 (or 'all')"
    ]
    assert "ConfigurationError" not in result.stdout + result.stderr
    _assert_no_job_and_no_noise(result, tmp_path)
    assert not (tmp_path / "work").exists()


def _users_dataset(tmp_path: Path, make_raw_dataset) -> tuple[dict, Path]:
    raw = make_raw_dataset(tmp_path / "raw" / DATASET, num_training=4, num_test=1)
    config = tiny_config(tmp_path / "work", raw_root=str(tmp_path / "raw"))
    config["dataset"]["synthetic"]["enabled"] = False
    return config, raw


@pytest.mark.slow
def test_a_file_ending_typo_names_file_ending_and_the_endings_found(
    tmp_path: Path, make_raw_dataset
) -> None:
    config, raw = _users_dataset(tmp_path, make_raw_dataset)
    dataset_json = raw / "dataset.json"
    dataset_json.write_text(dataset_json.read_text().replace('".nii.gz"', '".nii"'))
    result = snakemake(tmp_path, config, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    assert _own_lines(result) == [
        f'nnunet-core verify: error: {dataset_json} file_ending is ".nii" but imagesTr holds '
        '".nii.gz" files (4): set file_ending to the images\' ending'
    ]
    _assert_no_job_and_no_noise(result, tmp_path)


def _crop_label(path: Path) -> None:
    """The label two voxels narrower than its image (its geometry otherwise kept)."""
    image = sitk.ReadImage(str(path))
    cropped = sitk.GetImageFromArray(sitk.GetArrayFromImage(image)[:, :, :-2])
    cropped.CopyInformation(image[:-2, :, :])
    sitk.WriteImage(cropped, str(path))


@pytest.mark.slow
def test_the_integrity_problems_are_the_first_lines_one_each_and_no_job_starts(
    tmp_path: Path, make_raw_dataset
) -> None:
    config, raw = _users_dataset(tmp_path, make_raw_dataset)
    for case in ("synth_001", "synth_003"):
        _crop_label(raw / "labelsTr" / f"{case}.nii.gz")
    result = snakemake(tmp_path, config, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = _own_lines(result)
    assert len(lines) == 3, result.stderr
    for line, case in zip(lines, ("synth_001", "synth_003"), strict=False):
        assert line.startswith(f"nnunet-core verify: error: case {case}: shape "), line
        assert f"of labelsTr/{case}.nii.gz differs from" in line, line
    assert lines[2].startswith("nnunet-core verify: error: 2 problem(s) in Dataset900_Synth: ")
    assert result.stdout == ""  # no progress lines, nothing else of the run
    _assert_no_job_and_no_noise(result, tmp_path)
    assert not (tmp_path / "work" / "preprocessed" / DATASET / "verify.json").exists()


@pytest.mark.slow
def test_a_clean_dataset_is_checked_once_before_the_jobs(tmp_path: Path, make_raw_dataset) -> None:
    """Its report written by the check, the verify_dataset job has nothing to do; a second run
    does not check again, and a touched raw file does (as the job's own mtime rule would)."""
    config, raw = _users_dataset(tmp_path, make_raw_dataset)
    report = tmp_path / "work" / "preprocessed" / DATASET / "verify.json"
    first = snakemake(tmp_path, config, str(report))
    ok = f"{DATASET}: 4 case(s) + 1 test case(s) OK"
    assert first.stdout.startswith(ok), first.stdout
    assert report.is_file()
    assert "Nothing to be done" in first.stderr, first.stderr
    again = snakemake(tmp_path, config, str(report))
    assert ok not in again.stdout and "Nothing to be done" in again.stderr
    image = sorted((raw / "imagesTr").iterdir())[0]
    image.touch()
    touched = snakemake(tmp_path, config, str(report))
    assert touched.stdout.count(ok) == 1 and "Nothing to be done" in touched.stderr


# ---------------------------------------------------------------- resources (issue 46, item 8)


@pytest.mark.slow
def test_a_set_resources_for_the_fold_jobs_is_said_once_at_start(tmp_path: Path) -> None:
    """The config's training.mem_mb (the demo's 4000) against --set-resources: the override
    is used, and said once, first (while the workflow is read, before any job)."""
    config = tiny_config(tmp_path / "work")
    result = snakemake(tmp_path, config, "-n", "--set-resources", "train:mem_mb=12345")
    said = [line for line in result.stderr.splitlines() if line.startswith("rule train: mem_mb")]
    assert said == [
        "rule train: mem_mb 12345 from the set-resources of a profile or the command line is "
        'used, not training.mem_mb 4000 of the config (docs/clusters.md, "Resources: the '
        'config or the profile")'
    ], result.stderr
    assert _own_lines(result)[0] == said[0]  # the first line the workflow prints
    assert "mem_mb=12345" in result.stdout + result.stderr  # the job asks for it


@pytest.mark.slow
def test_a_gpu_count_against_gpus_per_job_is_refused_in_one_line(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "work")
    config["training"]["gpus_per_job"] = 1
    result = snakemake(tmp_path, config, "-n", "--set-resources", "train:gpu=2", check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = _own_lines(result)
    assert len(lines) == 1 and lines[0].startswith("config training.gpus_per_job: 1, but "), lines
    assert "rule train gpu=2" in lines[0]
    _assert_no_job_and_no_noise(result, tmp_path)
