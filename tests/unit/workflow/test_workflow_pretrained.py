"""``training.pretrained_weights`` found and checked at workflow start
(nnunet_core.workflow.pretrained): a checkpoint file, a model folder and fold, a model zip and
fold (upstream's archive in tests/data/upstream_model); what is wrong is one line naming the key
and the path. Also the schema's reading of the key and the extraction of a zip member."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import yaml

from nnunet_core.errors import ConfigurationError
from nnunet_core.layout.work import PRETRAINED_FOLDER
from nnunet_core.workflow.config import check_config, coerce_command_line_values, schema_errors
from nnunet_core.workflow.pretrained import (
    extract_member,
    main,
    resolve_pretrained_weights,
)
from tests.helpers.paths import REPO

SCHEMA_FILE = REPO / "workflow" / "schemas" / "config.schema.yaml"
UPSTREAM_ZIP = REPO / "tests" / "data" / "upstream_model" / "upstream_model.zip"
UPSTREAM_MEMBER = (
    "Dataset950_UpstreamTiny/nnUNetTrainer_UpstreamTiny__nnUNetPlans__3d_fullres/"
    "fold_0/checkpoint_final.pth"
)


def model_folder(root: Path, folds: dict[str, list[str]]) -> Path:
    """A ``Trainer__Plans__Config`` folder with the named (empty) checkpoint files per fold."""
    model = root / "Dataset004_X" / "nnUNetTrainer__nnUNetPlans__3d_fullres"
    for fold, names in folds.items():
        (model / f"fold_{fold}").mkdir(parents=True)
        for name in names:
            (model / f"fold_{fold}" / name).write_bytes(b"weights")
    return model


def one_line_error(value, work_dir: Path, match: str) -> str:
    with pytest.raises(ConfigurationError, match=match) as info:
        resolve_pretrained_weights(value, work_dir)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("config training.pretrained_weights")
    return message


def test_unset_means_fresh_weights(tmp_path: Path) -> None:
    assert resolve_pretrained_weights(None, tmp_path) is None


def test_a_checkpoint_file_is_used_as_it_is(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "w.pth").write_bytes(b"weights")
    monkeypatch.chdir(tmp_path)  # relative to where Snakemake runs
    found = resolve_pretrained_weights("w.pth", "work")
    assert found is not None and found.checkpoint == tmp_path / "w.pth"
    assert found.archive is None and found.member is None


def test_a_missing_checkpoint_file_a_folder_or_a_zip_string_is_refused(tmp_path: Path) -> None:
    message = one_line_error(str(tmp_path / "no.pth"), tmp_path, "does not exist")
    assert str(tmp_path / "no.pth") in message
    one_line_error(str(tmp_path), tmp_path, r"is a folder; for a model folder give \{model: ")
    (tmp_path / "m.zip").write_bytes(b"zip")
    one_line_error(str(tmp_path / "m.zip"), tmp_path, r"is a model zip; give \{model: ")


def test_a_model_folder_and_fold_name_fold_k_and_its_checkpoint(tmp_path: Path) -> None:
    model = model_folder(tmp_path, {"0": ["checkpoint_final.pth", "checkpoint_best.pth"]})
    found = resolve_pretrained_weights({"model": str(model), "fold": 0}, tmp_path)
    assert found is not None and found.checkpoint == model / "fold_0" / "checkpoint_final.pth"
    best = {"model": str(model), "fold": "0", "checkpoint": "checkpoint_best.pth"}
    assert resolve_pretrained_weights(best, tmp_path).checkpoint.name == "checkpoint_best.pth"


def test_a_model_folder_without_the_fold_or_the_checkpoint_is_refused(tmp_path: Path) -> None:
    model = model_folder(tmp_path, {"0": ["checkpoint_latest.pth"], "all": []})
    message = one_line_error({"model": str(model), "fold": 3}, tmp_path, "has no fold_3")
    assert message.startswith(f"config training.pretrained_weights.fold: {model} has no fold_3")
    assert "(its folds: fold_0, fold_all;" in message
    message = one_line_error({"model": str(model), "fold": 0}, tmp_path, "does not exist")
    assert message == (
        f"config training.pretrained_weights.checkpoint: {model}/fold_0/checkpoint_final.pth "
        "does not exist (checkpoints there: checkpoint_latest.pth)"
    )
    one_line_error(
        {"model": str(tmp_path / "nowhere"), "fold": 0},
        tmp_path,
        r"\.model: .*nowhere does not exist \(a model folder or a model zip\)",
    )


def test_a_model_zip_names_its_member_and_where_it_is_extracted(tmp_path: Path) -> None:
    found = resolve_pretrained_weights({"model": str(UPSTREAM_ZIP), "fold": 0}, tmp_path / "work")
    assert found is not None
    assert (found.archive, found.member) == (UPSTREAM_ZIP, UPSTREAM_MEMBER)
    assert found.checkpoint == tmp_path / "work" / PRETRAINED_FOLDER / UPSTREAM_MEMBER


def test_a_zip_without_the_member_or_no_zip_at_all_is_refused(tmp_path: Path) -> None:
    message = one_line_error({"model": str(UPSTREAM_ZIP), "fold": 1}, tmp_path, "has no member")
    assert message == (
        f"config training.pretrained_weights: {UPSTREAM_ZIP} has no member "
        f"*/*/fold_1/checkpoint_final.pth (its checkpoints: {UPSTREAM_MEMBER})"
    )
    best = {"model": str(UPSTREAM_ZIP), "fold": 0, "checkpoint": "checkpoint_best.pth"}
    one_line_error(best, tmp_path, "has no member")
    (tmp_path / "model.zip").write_bytes(b"not a zip")
    one_line_error(
        {"model": str(tmp_path / "model.zip"), "fold": 0},
        tmp_path,
        r"\.model: .*model\.zip is neither a model folder nor a readable zip",
    )


def test_a_zip_with_the_fold_of_two_models_or_only_unsafe_members_is_refused(
    tmp_path: Path,
) -> None:
    archive = tmp_path / "two.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for configuration in ("2d", "3d_fullres"):
            model = f"Dataset004_X/nnUNetTrainer__nnUNetPlans__{configuration}"
            handle.writestr(f"{model}/fold_0/checkpoint_final.pth", b"weights")
        handle.writestr("../evil/fold_1/checkpoint_final.pth", b"weights")
    one_line_error({"model": str(archive), "fold": 0}, tmp_path, "of 2 models .*install it")
    one_line_error({"model": str(archive), "fold": 1}, tmp_path, "has no member")


def test_extracting_a_member_writes_it_whole_and_a_missing_one_is_one_line(tmp_path: Path) -> None:
    target = tmp_path / PRETRAINED_FOLDER / UPSTREAM_MEMBER
    assert main([str(UPSTREAM_ZIP), UPSTREAM_MEMBER, str(target)]) == 0
    with zipfile.ZipFile(UPSTREAM_ZIP) as handle:
        assert target.read_bytes() == handle.read(UPSTREAM_MEMBER)
    assert sorted(p.name for p in target.parent.iterdir()) == ["checkpoint_final.pth"]
    with pytest.raises(ConfigurationError, match="cannot extract nothing.pth") as info:
        extract_member(UPSTREAM_ZIP, "nothing.pth", tmp_path / "x.pth")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "x.pth").exists()
    assert [p.name for p in tmp_path.iterdir()] == [PRETRAINED_FOLDER]  # no temporary left


def test_the_schema_reads_each_spelling_and_names_a_wrong_key() -> None:
    def errors(value) -> list[str]:
        config = {"dataset": {"id": 4, "name": "X"}, "training": {"pretrained_weights": value}}
        return schema_errors(config, SCHEMA_FILE)

    for good in (None, "w.pth", {"model": "m", "fold": 0}, {"model": "m.zip", "fold": "all"}):
        assert errors(good) == [], good
    assert errors({"model": "m"}) == ["training.pretrained_weights: 'fold' is a required property"]
    assert errors({"model": "m", "fold": 0, "chk": "a.pth"}) == [
        "training.pretrained_weights.chk: unknown key (allowed: checkpoint, fold, model)"
    ]
    assert errors({"model": "m", "fold": -1}) == [
        "training.pretrained_weights.fold: -1 is less than the minimum of 0"
    ]
    assert errors(5) == ["training.pretrained_weights: 5 is not of type 'string', 'null', 'object'"]


def test_command_line_values_get_their_types() -> None:
    from snakemake.cli import parse_config

    given = parse_config(["training={pretrained_weights: {model: /m, fold: 2}}"])
    config = yaml.safe_load(yaml.safe_dump(given))
    coerce_command_line_values(config, given, yaml.safe_load(SCHEMA_FILE.read_text()))
    assert config["training"]["pretrained_weights"] == {"model": "/m", "fold": 2}


def test_check_config_refuses_a_bad_value_before_any_job(tmp_path: Path) -> None:
    model = model_folder(tmp_path, {"0": ["checkpoint_final.pth"]})
    config = {
        "work_dir": str(tmp_path / "work"),
        "dataset": {"id": 4, "name": "X", "synthetic": {"enabled": True}},
        "training": {"pretrained_weights": {"model": str(model), "fold": 0}},
    }
    check_config(config)
    config["training"]["pretrained_weights"]["fold"] = 1
    with pytest.raises(ConfigurationError, match=r"pretrained_weights\.fold: .* has no fold_1"):
        check_config(config)


def test_a_checkpoint_member_that_is_a_zip_bomb_is_refused_before_any_job(tmp_path: Path) -> None:
    # 64 MiB of zeros deflates to about 64 KiB (ratio ~1000:1): a bomb posing as a checkpoint
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as handle:
        handle.writestr(
            "Dataset004_X/nnUNetTrainer__nnUNetPlans__3d_fullres/fold_0/checkpoint_final.pth",
            bytes(64 << 20),
        )
    message = one_line_error({"model": str(archive), "fold": 0}, tmp_path / "work", "ratio")
    assert str(archive) in message
    assert not (tmp_path / "work").exists()
