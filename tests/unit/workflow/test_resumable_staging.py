"""A killed prediction job's staging folder is kept only while its inputs and settings hold."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nnunet_core.errors import ConfigurationError
from nnunet_core.workflow import resumable_staging as staging


@pytest.fixture()
def run(tmp_path: Path) -> tuple[Path, Path, Path]:
    predictions = tmp_path / "predictions"
    folder = predictions / "3d_fullres.partial"
    model = tmp_path / "model.json"
    model.write_text("{}")
    return predictions, folder, model


def attempt(predictions: Path, folder: Path, key: str) -> bool:
    kept = staging.prepare(folder, predictions, key)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "case_1.nii.gz").write_bytes(b"seg")
    return kept


def test_the_same_inputs_and_settings_keep_the_written_cases(run) -> None:
    predictions, folder, model = run
    key = staging.staging_key("3d_fullres -f 0", [model])
    assert not attempt(predictions, folder, key)
    assert staging.prepare(folder, predictions, staging.staging_key("3d_fullres -f 0", [model]))
    assert (folder / "case_1.nii.gz").read_bytes() == b"seg"


def test_a_kept_folder_loses_the_killed_writes_temporaries(run) -> None:
    """A case whose write was killed before its rename leaves atomic_path's temporary; the
    continued folder must not carry it into the finished predictions (fault campaign, ede638c)."""
    predictions, folder, model = run
    key = staging.staging_key("2d -f 0", [model])
    attempt(predictions, folder, key)
    torn = folder / ".synth_t001.nii.gz.ymopg6bc.nii.gz"
    torn.write_bytes(b"half")
    assert staging.prepare(folder, predictions, key)
    assert not torn.exists()
    assert (folder / "case_1.nii.gz").read_bytes() == b"seg"


@pytest.mark.parametrize("change", ["settings", "input time", "input size"])
def test_a_changed_input_or_setting_starts_the_folder_again(run, change: str) -> None:
    predictions, folder, model = run
    attempt(predictions, folder, staging.staging_key("3d_fullres -f 0", [model]))
    settings = "3d_fullres -f 0"
    if change == "settings":
        settings = "3d_fullres -f 0 1"
    elif change == "input time":
        os.utime(model, ns=(1, 1))
    else:
        model.write_text("{ }")
    assert not staging.prepare(folder, predictions, staging.staging_key(settings, [model]))
    assert not folder.exists()  # every case is predicted again


def test_a_folder_without_its_key_is_not_trusted(run) -> None:
    predictions, folder, model = run
    folder.mkdir(parents=True)
    (folder / "case_1.nii.gz").write_bytes(b"from an older version")
    assert not staging.prepare(folder, predictions, staging.staging_key("s", [model]))
    assert not folder.exists()


def test_finish_renames_and_drops_the_key(run) -> None:
    predictions, folder, model = run
    attempt(predictions, folder, staging.staging_key("s", [model]))
    output = predictions / "3d_fullres"
    staging.finish(folder, output, predictions)
    assert (output / "case_1.nii.gz").is_file()
    assert not folder.exists() and not staging.key_file(folder).exists()


def test_a_staging_folder_outside_the_predictions_is_refused(run, tmp_path: Path) -> None:
    predictions, _, model = run
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    with pytest.raises(ConfigurationError, match="refusing"):
        staging.prepare(outside, predictions, "key")
    assert (outside / "keep.txt").read_text() == "mine"


def test_the_command_line_prepares_and_says_it_continues(run, capsys) -> None:
    predictions, folder, model = run
    arguments = ["prepare", "--inside", str(predictions), "--key", "s", str(folder), str(model)]
    assert staging.main(arguments) == 0
    folder.mkdir()
    assert staging.main(arguments) == 0
    assert "continuing the last attempt's cases" in capsys.readouterr().err
