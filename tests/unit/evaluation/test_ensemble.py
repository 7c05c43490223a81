"""Ensembles average probabilities per case; missing inputs are named with the command to fix
them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from nnunet_core.errors import DatasetError
from nnunet_core.evaluation.ensemble import (
    average_probabilities,
    ensemble_crossval,
    ensemble_folders,
)
from nnunet_core.layout.results import TrainedModel, ensemble_name, members_from_ensemble_name
from tests.helpers.fake_results import (
    CASES,
    DATASET_JSON,
    ORIGIN,
    SPACING,
    exact,
    make_tree,
    one_hot,
    read_seg_file,
    reference,
    write_prediction,
)


def _prediction_folder(folder: Path, probabilities: dict[str, np.ndarray]) -> Path:
    folder.mkdir(parents=True)
    (folder / "dataset.json").write_text(json.dumps(DATASET_JSON))
    for case, p in probabilities.items():
        write_prediction(folder, case, p)
    return folder


def test_average_probabilities_is_the_float32_mean(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    arrays = [rng.random((3, 2, 4, 4)).astype(np.float16) for _ in range(3)]
    files = []
    for i, array in enumerate(arrays):
        np.savez_compressed(tmp_path / f"m{i}.npz", probabilities=array)
        files.append(tmp_path / f"m{i}.npz")
    mean = average_probabilities(files)
    assert mean.dtype == np.float32
    np.testing.assert_allclose(
        mean, np.mean([a.astype(np.float32) for a in arrays], axis=0), rtol=1e-6
    )


def test_the_average_can_flip_the_argmax(tmp_path: Path) -> None:
    gt = reference(0)
    a, b = one_hot(gt), one_hot(gt)
    a[:, 0, 0, 0] = (0.4, 0.6, 0.0)  # member A says label 1 ...
    b[:, 0, 0, 0] = (0.9, 0.1, 0.0)  # ... B says background more strongly: mean (0.65, 0.35, 0)
    a[:, 5, 9, 9] = (0.3, 0.0, 0.7)  # A says label 2 strongly, B weakly prefers background
    b[:, 5, 9, 9] = (0.6, 0.0, 0.4)  # mean (0.45, 0, 0.55) -> 2
    folder_a = _prediction_folder(tmp_path / "a", {"case_0": a})
    folder_b = _prediction_folder(tmp_path / "b", {"case_0": b})
    cases = ensemble_folders([folder_a, folder_b], tmp_path / "out", save_npz=True)
    assert cases == ["case_0"]
    assert read_seg_file(folder_a / "case_0.nii.gz")[0, 0, 0] == 1
    seg = read_seg_file(tmp_path / "out/case_0.nii.gz")
    assert seg[0, 0, 0] == 0 and seg[5, 9, 9] == 2
    expected = gt.copy()
    expected[5, 9, 9] = 2
    assert np.array_equal(seg, expected)  # elsewhere both members agree with gt
    with np.load(tmp_path / "out/case_0.npz") as saved:
        np.testing.assert_allclose(saved["probabilities"], (a + b) / 2, rtol=1e-6)
    image = sitk.ReadImage(str(tmp_path / "out/case_0.nii.gz"))
    assert image.GetSpacing() == SPACING and image.GetOrigin() == ORIGIN
    assert (tmp_path / "out/dataset.json").is_file() and (tmp_path / "out/case_0.json").is_file()


def test_ensemble_folders_need_the_same_cases(tmp_path: Path) -> None:
    gt = reference(0)
    folder_a = _prediction_folder(tmp_path / "a", {"case_0": one_hot(gt), "case_1": one_hot(gt)})
    folder_b = _prediction_folder(tmp_path / "b", {"case_0": one_hot(gt)})
    with pytest.raises(DatasetError, match=r"b: no case_1.npz"):
        ensemble_folders([folder_a, folder_b], tmp_path / "out")


def test_ensemble_crossval_writes_the_pair_folder_and_its_summary(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    noise = {i: rng.random((3, 6, 10, 10)).astype(np.float32) for i in range(len(CASES))}

    def noisy_a(index: int, gt: np.ndarray) -> np.ndarray:
        p = one_hot(gt, 0.5) + 0.6 * noise[index]
        return p / p.sum(0)

    def noisy_b(index: int, gt: np.ndarray) -> np.ndarray:
        p = one_hot(gt, 0.5) + 0.6 * noise[index][::-1]
        return p / p.sum(0)

    dirs = make_tree(tmp_path, {"2d": noisy_a, "3d_fullres": noisy_b})
    models = [TrainedModel("2d"), TrainedModel("3d_fullres")]
    summary = ensemble_crossval(dirs, models)
    name = (
        "ensemble___nnUNetTrainer__nnUNetPlans__2d___"
        "nnUNetTrainer__nnUNetPlans__3d_fullres___0_1_2_3_4"
    )
    assert ensemble_name(models) == name and members_from_ensemble_name(name) == models
    output = dirs.results / "ensembles" / name
    assert json.loads((output / "summary.json").read_text())["foreground_mean"][
        "Dice"
    ] == pytest.approx(summary["foreground_mean"]["Dice"])
    flips = 0
    for i, case in enumerate(CASES):
        a, b = noisy_a(i, reference(i)), noisy_b(i, reference(i))
        expected = ((a + b) / 2).argmax(0)
        assert np.array_equal(read_seg_file(output / f"{case}.nii.gz"), expected)
        flips += int(np.count_nonzero(expected != a.argmax(0)))
    assert flips > 0  # the noise makes the mean disagree with member A somewhere


def test_missing_npz_names_configuration_fold_case_and_command(tmp_path: Path) -> None:
    dirs = make_tree(tmp_path, {"2d": exact, "3d_fullres": exact})
    (dirs.model_dir(TrainedModel("3d_fullres")) / "fold_4/validation/case_5.npz").unlink()
    pattern = (
        r"3d_fullres fold 4: case case_5 has no probabilities .*`nnunet-core train Dataset901_Fake "
        r"3d_fullres 4 --val --npz`"
    )
    with pytest.raises(DatasetError, match=pattern):
        ensemble_crossval(dirs, [TrainedModel("2d"), TrainedModel("3d_fullres")])


def test_trained_without_npz_is_reported_for_the_first_fold(tmp_path: Path) -> None:
    dirs = make_tree(tmp_path, {"2d": exact, "3d_fullres": exact}, npz=False)
    with pytest.raises(DatasetError, match=r"2d fold 0: case case_0 has no probabilities"):
        ensemble_crossval(dirs, [TrainedModel("2d"), TrainedModel("3d_fullres")])
