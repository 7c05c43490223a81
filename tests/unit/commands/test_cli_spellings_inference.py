"""Upstream's spellings of the training, inference, selection and evaluation commands.

Pure aliases are checked at parse level (including argparse's prefix trap: a single-dash long
flag such as ``-pretrained_weights`` must never parse as ``-p retrained_weights``); flags that
change behaviour are run in-process through ``nnunet_core.cli.main`` on a fake results tree.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nnunet_core.cli import build_parser, main
from nnunet_core.errors import ConfigurationError, DatasetError
from tests.helpers.fake_results import (
    CASES,
    DATASET,
    DATASET_JSON,
    make_tree,
    one_hot,
    write_seg_file,
)


def parse(*argv: str):
    return build_parser(argv[0]).parse_args(list(argv))


def exact(_index, gt):
    return one_hot(gt)


# ------------------------------------------------------------------------------------ train
def test_train_parses_upstream_flags_without_the_prefix_trap() -> None:
    args = parse(
        "train", "900", "3d_fullres", "0", "-tr", "nnUNetTrainerNoMirroring", "-p", "P",
        "-pretrained_weights", "w.pth", "-num_gpus", "2", "--npz", "--disable_checkpointing",
        "-device", "cpu",
    )  # fmt: skip
    assert (args.trainer, args.plans, args.pretrained_weights) == (
        "nnUNetTrainerNoMirroring",
        "P",
        "w.pth",
    )
    assert args.num_gpus == 2 and args.npz and args.disable_checkpointing and args.device == "cpu"
    args = parse("train", "900", "3d_fullres", "0", "-pretrained_weights", "w.pth")
    assert args.plans == "nnUNetPlans"  # not "-p retrained_weights"
    args = parse("train", "900", "2d", "all", "--c", "--val_best")
    assert args.c and args.val_best and not args.val


def test_train_epochs_0_is_a_one_line_error(capsys) -> None:
    assert main(["train", "900", "3d_fullres", "0", "--epochs", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "nnunet-core train: error: --epochs must be >= 1, got 0"


def test_train_unknown_trainer_lists_the_known_names() -> None:
    from nnunet_core.commands.train import settings_from_args

    with pytest.raises(
        ConfigurationError, match=r"-tr nnUNetTrainerDA5: unknown trainer .*NoMirroring"
    ):
        settings_from_args(parse("train", "900", "2d", "0", "-tr", "nnUNetTrainerDA5"))


# ---------------------------------------------------------------------------------- predict
def test_predict_parses_every_upstream_flag() -> None:
    args = parse(
        "predict", "-i", "in", "-o", "out", "-d", "900", "-p", "P", "-tr", "T", "-c", "3d_fullres",
        "-f", "0", "1", "-step_size", "0.7", "--disable_tta", "--verbose", "--save_probabilities",
        "--continue_prediction", "-chk", "checkpoint_best.pth", "-npp", "1", "-nps", "2",
        "-num_parts", "3", "-part_id", "1", "-device", "cpu", "--disable_progress_bar",
        "--not_on_device",
    )  # fmt: skip
    assert (args.input, args.output, args.dataset, args.plans, args.trainer) == (
        "in",
        "out",
        "900",
        "P",
        "T",
    )
    assert (
        args.folds == ["0", "1"]
        and args.step_size == 0.7
        and args.checkpoint == "checkpoint_best.pth"
    )
    assert (args.npp, args.nps, args.num_parts, args.part_id) == (1, 2, 3, 1)
    assert args.disable_tta and args.verbose and args.continue_prediction and args.not_on_device
    # prefix trap: -part_id and -prev_stage_predictions are not -p
    args = parse(
        "predict",
        "-i",
        "a",
        "-o",
        "b",
        "-d",
        "9",
        "-c",
        "2d",
        "-part_id",
        "0",
        "-prev_stage_predictions",
        "x",
    )
    assert args.plans == "nnUNetPlans" and args.prev_stage_predictions == "x"
    for spelling in ("--prev_stage_predictions", "--prev-stage-predictions"):
        args = parse("predict", "-i", "a", "-o", "b", "-m", "model", spelling, "y")
        assert args.prev_stage_predictions == "y"
    assert parse("predict", "-i", "a", "-o", "b", "-m", "model", "--c").continue_prediction


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-m", "model", "-d", "900"], "-m names the model; -d"),
        (["-d", "900"], "name the model with -d DATASET -c CONFIGURATION"),
        ([], "name the model with -d DATASET -c CONFIGURATION"),
    ],
)
def test_predict_model_flags_must_name_one_model(extra, message) -> None:
    from nnunet_core.commands.predict import check_flags

    with pytest.raises(ConfigurationError, match=message):
        check_flags(parse("predict", "-i", "a", "-o", "b", *extra))


# ------------------------------------------------------------------------- find-best-config
def test_find_best_config_takes_upstreams_positional_dataset() -> None:
    from nnunet_core.commands.model_args import take_dataset

    args = parse("find-best-config", "900", "-p", "P", "-c", "2d", "-tr", "A", "B", "-np", "2",
                 "-f", "0", "1", "--disable_ensembling", "--no_overwrite")  # fmt: skip
    take_dataset(args)
    assert args.dataset == "900" and args.plans == ["P"] and args.trainer == ["A", "B"]
    assert args.num_processes == 2 and args.folds == [0, 1] and args.disable_ensembling
    args = parse("find-best-config", "-d", "900")
    take_dataset(args)
    assert args.dataset == "900"
    for argv, message in (
        (["find-best-config", "900", "-d", "901"], "differ"),
        (["find-best-config", "-c", "2d"], "name the dataset"),
    ):
        with pytest.raises(ConfigurationError, match=message):
            take_dataset(parse(*argv))


def test_find_best_config_no_overwrite_reuses_and_excludes_overwrite(
    tmp_path: Path, capsys
) -> None:
    dirs = make_tree(tmp_path, {"2d": exact})
    roots = [
        "--results",
        str(tmp_path / "results"),
        "--preprocessed",
        str(tmp_path / "preprocessed"),
    ]
    assert main(["find-best-config", DATASET, "-c", "2d", "-np", "1", *roots]) == 0
    summary = dirs.model_dir(dirs_model("2d")) / "crossval_results_folds_0_1_2_3_4" / "summary.json"
    before = summary.stat().st_mtime_ns
    assert (
        main(["find-best-config", DATASET, "-c", "2d", "-np", "1", "--no_overwrite", *roots]) == 0
    )
    assert summary.stat().st_mtime_ns == before  # reused, not recomputed
    assert (
        main(["find-best-config", DATASET, "-c", "2d", "--overwrite", "--no_overwrite", *roots])
        == 2
    )
    assert "--overwrite and --no_overwrite exclude each other" in capsys.readouterr().err


def dirs_model(configuration: str):
    from nnunet_core.layout.results import TrainedModel

    return TrainedModel(configuration)


# --------------------------------------------------------------------------------- crossval
def test_crossval_positional_dataset_and_output_folder(tmp_path: Path) -> None:
    make_tree(tmp_path, {"2d": exact})
    output = tmp_path / "merged"
    roots = [
        "--results",
        str(tmp_path / "results"),
        "--preprocessed",
        str(tmp_path / "preprocessed"),
    ]
    assert main(["crossval", DATASET, "-c", "2d", "-o", str(output), "-np", "1", *roots]) == 0
    summary = json.loads((output / "summary.json").read_text())
    assert len(summary["metric_per_case"]) == len(CASES)
    assert summary["foreground_mean"]["Dice"] == 1.0


# ----------------------------------------------------------------- ensemble, postprocessing
def test_ensemble_and_apply_postprocessing_parse_upstream_flags() -> None:
    args = parse("ensemble", "-i", "a", "b", "-o", "c", "-np", "3", "--save_npz")
    assert (args.input, args.output, args.num_processes, args.save_npz) == (
        ["a", "b"],
        "c",
        3,
        True,
    )
    args = parse("apply-postprocessing", "-i", "a", "-o", "b", "-pp_pkl_file", "pp.pkl", "-np", "2",
                 "-plans_json", "plans.json", "-dataset_json", "dataset.json")  # fmt: skip
    assert (args.pp_file, args.plans_json, args.dataset_json) == (
        "pp.pkl",
        "plans.json",
        "dataset.json",
    )


def _segmentations(folder: Path) -> None:
    from tests.helpers.fake_results import reference

    folder.mkdir(parents=True)
    (folder / "dataset.json").write_text(json.dumps(DATASET_JSON))
    for i, case in enumerate(CASES[:2]):
        write_seg_file(folder / f"{case}.nii.gz", reference(i))


def test_a_pickle_path_reads_the_json_beside_it_and_never_the_pickle(
    tmp_path: Path, capsys
) -> None:
    _segmentations(tmp_path / "in")
    pp = tmp_path / "pp"
    pp.mkdir()
    (pp / "postprocessing.pkl").write_bytes(b"not a pickle: opening it would fail")
    steps = {"postprocessing_fns": [], "postprocessing_kwargs": []}
    (pp / "postprocessing.json").write_text(json.dumps(steps))
    argv = [
        "apply-postprocessing",
        "-i",
        str(tmp_path / "in"),
        "-o",
        str(tmp_path / "out"),
        "-np",
        "1",
    ]
    assert main([*argv, "-pp_pkl_file", str(pp / "postprocessing.pkl")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").glob("*.nii.gz")) == [
        "case_0.nii.gz",
        "case_1.nii.gz",
    ]
    assert "postprocessing.json" in capsys.readouterr().err
    (pp / "postprocessing.json").unlink()
    assert main([*argv, "-pp_pkl_file", str(pp / "postprocessing.pkl")]) == 2
    err = capsys.readouterr().err.strip()
    assert "pickles are never opened" in err and "\n" not in err
    assert (
        main(
            [*argv, "-pp_pkl_file", str(pp / "x.json"), "-plans_json", str(tmp_path / "none.json")]
        )
        == 2
    )
    assert "-plans_json" in capsys.readouterr().err


# --------------------------------------------------------------------------------- evaluate
def test_evaluate_folder_flags_and_evaluate_simple_agree(tmp_path: Path, capsys) -> None:
    from tests.helpers.fake_results import reference

    gt, pred = tmp_path / "gt", tmp_path / "pred"
    for i, case in enumerate(CASES[:3]):
        write_seg_file(gt / f"{case}.nii.gz", reference(i))
        write_seg_file(pred / f"{case}.nii.gz", reference(i + 1))  # shifted: imperfect
    dj = tmp_path / "dataset.json"
    dj.write_text(json.dumps(DATASET_JSON))
    plans = tmp_path / "plans.json"
    plans.write_text("{}")
    folder_out, simple_out = tmp_path / "folder.json", tmp_path / "simple.json"
    base = [str(gt), str(pred), "-np", "1", "--chill"]
    assert (
        main(["evaluate", *base, "-djfile", str(dj), "-pfile", str(plans), "-o", str(folder_out)])
        == 0
    )
    assert main(["evaluate-simple", *base, "-l", "1", "2", "-o", str(simple_out)]) == 0
    folder, simple = json.loads(folder_out.read_text()), json.loads(simple_out.read_text())
    assert 0 < folder["foreground_mean"]["Dice"] < 1
    assert (
        simple["foreground_mean"] == folder["foreground_mean"] and simple["mean"] == folder["mean"]
    )
    assert main(["evaluate", *base, "-djfile", str(dj), "-pfile", str(tmp_path / "no.json")]) == 2
    assert "-pfile" in capsys.readouterr().err


def test_evaluate_simple_label_0_is_reported_but_not_foreground(tmp_path: Path) -> None:
    from tests.helpers.fake_results import reference

    gt, pred = tmp_path / "gt", tmp_path / "pred"
    write_seg_file(gt / "a.nii.gz", reference(0))
    write_seg_file(pred / "a.nii.gz", reference(0))
    out = tmp_path / "s.json"
    assert (
        main(["evaluate-simple", str(gt), str(pred), "-l", "0", "1", "-np", "1", "-o", str(out)])
        == 0
    )
    summary = json.loads(out.read_text())
    assert set(summary["mean"]) == {"0", "1"} and summary["foreground_mean"]["Dice"] == 1.0


def test_evaluate_simple_needs_a_reference_folder() -> None:
    from nnunet_core.commands.evaluate_simple import run

    with pytest.raises(DatasetError, match="reference folder not found"):
        run(parse("evaluate-simple", "/nonexistent", "/x", "-l", "1"))


def test_determine_postprocessing_takes_upstreams_flags(tmp_path: Path, capsys) -> None:
    """A false label-1 blob in every case: keeping the largest component is decided and applied."""
    from tests.helpers.fake_results import reference

    gt, pred = tmp_path / "gt", tmp_path / "pred"
    for i, case in enumerate(CASES[:3]):
        write_seg_file(gt / f"{case}.nii.gz", reference(i))
        seg = reference(i)
        seg[5, 8:10, 0:2] = 1  # apart from both boxes
        write_seg_file(pred / f"{case}.nii.gz", seg)
    dj = tmp_path / "dataset.json"
    dj.write_text(json.dumps(DATASET_JSON))
    argv = ["determine-postprocessing", "-i", str(pred), "-ref", str(gt), "-np", "1"]
    assert main([*argv, "-dataset_json", str(dj), "--remove_postprocessed"]) == 0
    steps = json.loads((pred / "postprocessing.json").read_text())["postprocessing_fns"]
    assert steps and not (pred / "postprocessed").exists()
    assert not list(pred.glob("*.pkl"))
    assert main(argv) == 2  # no dataset.json in -i and none given
    assert "pass -dataset_json" in capsys.readouterr().err
