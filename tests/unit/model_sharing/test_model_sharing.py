"""Model archives (issue 13 part 5): export in upstream's layout, install safely; the flags of
predict-from-modelfolder, export and move-plans (move-plans itself: ``test_move_plans.py``).

Everything runs in-process through ``nnunet_core.cli.main`` on the fake results tree of
``tests/helpers/model_sharing.py``; the cross-checks against upstream's own commands are in
``tests/integration/test_model_sharing_cli.py``.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from nnunet_core.cli import main
from tests.helpers.model_sharing import (
    DATASET,
    MODELS,
    UPSTREAM_LAYOUT,
    files_under,
    make_results,
    members,
)
from tests.helpers.paths import TEST_DATA

UPSTREAM_ZIP = TEST_DATA / "upstream_model" / "upstream_model.zip"


def export(results: Path, output: Path, *flags: str) -> int:
    command = ["export-model-to-zip", "-d", DATASET, "-o", str(output), "--results", str(results)]
    return main([*command, *flags])


def install(archive: Path, results: Path, *flags: str) -> int:
    command = ["install-pretrained-model-from-zip", str(archive), "--results", str(results)]
    return main([*command, *flags])


def one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"nnunet-core {command}: error: "), err
    return err


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return make_results(tmp_path / "results")


def test_export_writes_upstreams_member_list_in_its_order(results, tmp_path) -> None:
    archive = tmp_path / "model.zip"
    assert export(results, archive, "-c", "3d_fullres", "2d", "-f", "0") == 0
    assert members(archive) == UPSTREAM_LAYOUT
    with zipfile.ZipFile(archive) as handle:
        assert {i.compress_type for i in handle.infolist()} == {zipfile.ZIP_DEFLATED}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.zip", "results"]


def test_export_by_id_with_checkpoints_and_cv_predictions(results, tmp_path) -> None:
    archive = tmp_path / "cv.zip"
    code = main(["export-model-to-zip", "-d", "901", "-o", str(archive), "--results", str(results),
                 "-c", "2d", "-f", "0", "-chk", "checkpoint_final.pth", "checkpoint_best.pth",
                 "--exp_cv_preds"])  # fmt: skip
    assert code == 0
    model, ensemble = f"{DATASET}/{MODELS['2d']}", f"{DATASET}/ensembles"
    assert members(archive) == [
        f"{model}/fold_0/debug.json",
        f"{model}/fold_0/checkpoint_final.pth",
        f"{model}/fold_0/checkpoint_best.pth",
        f"{model}/fold_0/progress.png",
        # every validation file but the .npz (and .pkl), sorted by name
        f"{model}/fold_0/validation/case_0.json",
        f"{model}/fold_0/validation/case_0.nii.gz",
        f"{model}/fold_0/validation/summary.json",
        f"{model}/crossval_results_folds_0/case_0.nii.gz",
        f"{model}/crossval_results_folds_0/postprocessing.json",
        f"{model}/crossval_results_folds_0/postprocessing.pkl",  # made from the JSON
        f"{model}/crossval_results_folds_0/summary.json",
        f"{model}/plans.json",
        f"{model}/dataset_fingerprint.json",
        f"{model}/dataset.json",
        # the ensemble has a 3d_fullres member, which -c 2d does not export: left out
        f"{DATASET}/inference_information.json",
    ]
    assert not any(m.startswith(ensemble) for m in members(archive))


def test_export_then_install_gives_the_same_bytes(results, tmp_path) -> None:
    archive = tmp_path / "model.zip"
    assert export(results, archive, "-c", "3d_fullres", "2d", "-f", "0") == 0
    fresh = tmp_path / "fresh"
    assert install(archive, fresh) == 0
    installed = files_under(fresh)
    assert sorted(installed) == sorted(UPSTREAM_LAYOUT)
    original = files_under(results)
    made = {n for n in installed if n.endswith("/postprocessing.pkl")}  # the archive made these
    assert made and all(installed[name] == original[name] for name in set(installed) - made)


def test_export_missing_configuration_is_strict_unless_not_strict(
    results, tmp_path, capsys
) -> None:
    archive = tmp_path / "model.zip"
    assert export(results, archive, "-f", "0") == 2  # upstream's default -c: 3d_lowres missing
    err = one_line_error(capsys, "export-model-to-zip")
    assert "nnUNetTrainer__nnUNetPlans__3d_lowres: no trained model" in err
    assert "--not_strict" in err and not archive.exists()
    assert export(results, archive, "-f", "0", "--not_strict") == 0
    assert members(archive) == UPSTREAM_LAYOUT  # -c order 3d_lowres 3d_fullres 2d ...: the same


def test_export_missing_checkpoint_or_fold_writes_nothing(results, tmp_path, capsys) -> None:
    archive = tmp_path / "out" / "model.zip"
    assert export(results, archive, "-c", "2d", "-f", "0", "-chk", "checkpoint_latest.pth") == 2
    err = one_line_error(capsys, "export-model-to-zip")
    assert "fold_0/checkpoint_latest.pth: checkpoint not found" in err
    assert export(results, archive, "-c", "2d", "-f", "0", "1") == 2
    assert "requested fold folder(s) missing: fold_1" in one_line_error(
        capsys, "export-model-to-zip"
    )
    assert not archive.parent.exists() or not any(archive.parent.iterdir())


def test_export_replaces_an_old_archive_only_when_complete(results, tmp_path) -> None:
    archive = tmp_path / "model.zip"
    archive.write_bytes(b"old archive")
    assert export(results, archive, "-c", "2d", "-f", "0", "-chk", "nope.pth") == 2
    assert archive.read_bytes() == b"old archive"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.zip", "results"]


def _zip(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as handle:
        for name, data in entries.items():
            handle.writestr(name, data)
    return path


@pytest.mark.parametrize(
    "member",
    ["../evil.txt", "Dataset1_A/../../evil.txt", "/tmp/evil.txt", "./.install-h-1-x/tree/a"],
)
def test_install_refuses_members_outside_the_root(tmp_path, capsys, member) -> None:
    archive = _zip(tmp_path / "bad.zip", {"Dataset001_A/ok.json": b"{}", member: b"gotcha"})
    root = tmp_path / "root" / "results"
    assert install(archive, root) == 2
    err = one_line_error(capsys, "install-pretrained-model-from-zip")
    assert str(archive) in err and repr(member) in err and "nothing was installed" in err
    assert not root.exists() and not (tmp_path / "evil.txt").exists()
    assert not (tmp_path / "root" / "evil.txt").exists()


def test_install_refuses_a_file_that_is_no_zip(tmp_path, capsys) -> None:
    archive = tmp_path / "model.zip"
    archive.write_bytes(b"PK\x03\x04 this is no archive" * 10)
    root = tmp_path / "results"
    assert install(archive, root) == 2
    err = one_line_error(capsys, "install-pretrained-model-from-zip")
    assert f"{archive}: not a readable zip archive" in err and not root.exists()
    assert install(tmp_path / "missing.zip", root) == 2
    assert "missing.zip: no such file" in one_line_error(
        capsys, "install-pretrained-model-from-zip"
    )


def test_install_refuses_a_corrupt_member_and_leaves_the_root_as_it_was(tmp_path, capsys) -> None:
    good = b"weights " * 1000
    archive = _zip(
        tmp_path / "model.zip", {"Dataset001_A/M/a.json": b"{}", "Dataset001_A/M/b.pth": good}
    )
    data = bytearray(archive.read_bytes())
    at = data.index(b"weights weights")  # stored uncompressed: flip a byte of the second member
    data[at] ^= 0xFF
    archive.write_bytes(bytes(data))
    root = tmp_path / "results"
    (root / "Dataset001_A" / "M").mkdir(parents=True)
    (root / "Dataset001_A" / "M" / "a.json").write_text("old")
    assert install(archive, root) == 2
    err = one_line_error(capsys, "install-pretrained-model-from-zip")
    assert "'Dataset001_A/M/b.pth' is corrupt" in err and "nothing was installed" in err
    assert files_under(root) == {"Dataset001_A/M/a.json": b"old"}
    assert [p.name for p in root.iterdir()] == ["Dataset001_A"]  # no staging folder left


def test_install_refuses_a_file_and_a_folder_of_one_name(tmp_path, capsys) -> None:
    archive = _zip(
        tmp_path / "m.zip", {"Dataset001_A/M": b"file", "Dataset001_A/M/plans.json": b"{}"}
    )
    root = tmp_path / "results"
    assert install(archive, root) == 2
    err = one_line_error(capsys, "install-pretrained-model-from-zip")
    assert "'Dataset001_A/M/plans.json' cannot be unpacked" in err
    assert list(root.iterdir()) == []


def test_install_merges_into_an_existing_model_folder_replacing_only_with_overwrite(
    tmp_path, capsys
) -> None:
    root = tmp_path / "results"
    (root / "Dataset001_A" / "M" / "fold_1").mkdir(parents=True)
    (root / "Dataset001_A" / "M" / "fold_1" / "keep.pth").write_bytes(b"fold 1")
    (root / "Dataset001_A" / "M" / "plans.json").write_text("old plans")
    entries = {
        "Dataset001_A/M/plans.json": b"new plans",
        "Dataset001_A/M/fold_0/checkpoint_final.pth": b"fold 0",
    }
    archive = _zip(tmp_path / "m.zip", entries)
    before = files_under(root)
    assert install(archive, root) == 2
    err = one_line_error(capsys, "install-pretrained-model-from-zip")
    assert "would replace 1 installed file(s)" in err and "Dataset001_A/M/plans.json" in err
    assert "nothing was installed" in err and "--overwrite" in err
    assert files_under(root) == before and sorted(p.name for p in root.iterdir()) == [
        "Dataset001_A"
    ]
    assert install(archive, root, "--overwrite") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"replaced {root / 'Dataset001_A' / 'M' / 'plans.json'}"
    assert out[1] == f"installed Dataset001_A into {root}" and len(out) == 2
    assert files_under(root) == {
        "Dataset001_A/M/fold_1/keep.pth": b"fold 1",
        "Dataset001_A/M/plans.json": b"new plans",
        "Dataset001_A/M/fold_0/checkpoint_final.pth": b"fold 0",
    }


@pytest.mark.skipif(
    not UPSTREAM_ZIP.is_file(), reason="tests/data/upstream_model/upstream_model.zip absent"
)
def test_install_an_archive_upstream_exported(tmp_path) -> None:
    root = tmp_path / "results"
    assert install(UPSTREAM_ZIP, root) == 0
    with zipfile.ZipFile(UPSTREAM_ZIP) as handle:
        expected = {name: handle.read(name) for name in handle.namelist()}
    assert files_under(root) == expected


# ---------------------------------------------------------------------- predict-from-modelfolder
UPSTREAM_PREDICT_FROM_MODELFOLDER_FLAGS = (
    "-i", "-o", "-m", "-f", "-step_size", "--disable_tta", "--verbose", "--save_probabilities",
    "--continue_prediction", "--c", "-chk", "-npp", "-nps", "-prev_stage_predictions", "-device",
    "--disable_progress_bar", "--not_on_device",
)  # fmt: skip
UPSTREAM_EXPORT_FLAGS = (
    "-d",
    "-o",
    "-c",
    "-tr",
    "-p",
    "-f",
    "-chk",
    "--not_strict",
    "--exp_cv_preds",
)


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        ("predict-from-modelfolder", UPSTREAM_PREDICT_FROM_MODELFOLDER_FLAGS),
        ("export-model-to-zip", UPSTREAM_EXPORT_FLAGS),
        ("move-plans-between-datasets", ("-s", "-t", "-sp", "-tp")),
    ],
)
def test_help_lists_upstreams_flags(command, flags, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main([command, "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    missing = [
        f for f in flags if f" {f} " not in out and f" {f}," not in out and f"[{f}" not in out
    ]
    assert not missing, out


def test_predict_from_modelfolder_needs_m_and_has_no_dataset_flags(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["predict-from-modelfolder", "-i", "in", "-o", "out"])
    assert stop.value.code == 2 and "-m" in capsys.readouterr().err
    for flags in (["-d", "900"], ["-c", "3d_fullres"]):  # never read as -device / -chk
        assert main(["predict-from-modelfolder", "-i", "in", "-o", "out", "-m", "M", *flags]) == 2
        err = one_line_error(capsys, "predict-from-modelfolder")
        assert f"-m names the model; {flags[0]} would name another" in err
