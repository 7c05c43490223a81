"""The evaluation commands as a user (or Snakemake) runs them: real subprocesses on a fake tree.

Independent commands run concurrently (each start imports torch through the CLI): crossval,
ensemble-cv, ensemble, find-best-config (on its own tree) and a failing ensemble-cv first; then
apply-postprocessing with the selected postprocessing.json, and evaluate.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.helpers.fake_results import (
    CASES,
    DATASET,
    DATASET_JSON,
    SPLITS,
    make_tree,
    one_hot,
    read_seg_file,
)

BLOB = (5, slice(8, 10), slice(0, 2))  # a false label-1 piece, apart from both boxes


def with_blob(_index: int, gt: np.ndarray) -> np.ndarray:
    seg = gt.copy()
    seg[BLOB] = 1
    return one_hot(seg)


def unsure_with_blob(index: int, gt: np.ndarray) -> np.ndarray:
    seg = gt.copy()
    seg[BLOB] = 1
    for z, y, x in np.argwhere(gt == 2)[: index + 1]:
        seg[z, y, x] = 0  # misses some label 2
    return one_hot(seg, 0.7)


def start(root: Path, *args: str) -> subprocess.Popen:
    roots = ["--results", str(root / "results"), "--preprocessed", str(root / "preprocessed")]
    needs_roots = args[0] in ("crossval", "ensemble-cv", "find-best-config")
    command = [sys.executable, "-m", "nnunet_core", *args, *(roots if needs_roots else [])]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(*processes: subprocess.Popen) -> list[tuple[int, str, str]]:
    results = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        results.append((process.returncode, out, err))
    return results


def ok(result: tuple[int, str, str]) -> str:
    code, out, err = result
    assert code == 0, f"exit {code}\n{out}\n{err}"
    return out


def test_selection_commands_write_their_files(tmp_path: Path) -> None:
    dirs = make_tree(tmp_path, {"2d": with_blob, "3d_fullres": unsure_with_blob})
    make_tree(tmp_path / "bare", {"2d": with_blob, "3d_fullres": with_blob}, npz=False)
    # "test set" prediction folders as `predict --save_probabilities` leaves them
    for config, folder in (("2d", "test_a"), ("3d_fullres", "test_b")):
        target = tmp_path / folder
        target.mkdir()
        (target / "dataset.json").write_text(json.dumps(DATASET_JSON))
        source = dirs.results / f"nnUNetTrainer__nnUNetPlans__{config}" / "fold_0" / "validation"
        for case in SPLITS[0]["val"]:
            for ending in (".nii.gz", ".npz", ".json"):
                shutil.copy(source / f"{case}{ending}", target / f"{case}{ending}")
    selection = make_tree(tmp_path / "sel", {"2d": with_blob, "3d_fullres": unsure_with_blob})
    d = ["-d", DATASET, "-np", "1"]
    crossval, ensemble_cv, ensemble, missing_npz, best = finish(
        start(tmp_path, "crossval", *d, "-c", "2d"),
        start(tmp_path, "ensemble-cv", *d, "-c", "2d", "3d_fullres"),
        start(
            tmp_path,
            "ensemble",
            "-i",
            str(tmp_path / "test_a"),
            str(tmp_path / "test_b"),
            "-o",
            str(tmp_path / "test_ens"),
            "--save_npz",
            "-np",
            "1",
        ),
        start(tmp_path / "bare", "ensemble-cv", *d, "-c", "2d", "3d_fullres"),
        start(tmp_path / "sel", "find-best-config", *d, "-c", "2d", "3d_fullres"),
    )
    assert "foreground-mean Dice" in ok(crossval)
    ok(ensemble_cv)
    assert "2 cases ensembled" in ok(ensemble)
    code, _, err = missing_npz
    assert code == 2
    assert "2d fold 0: case case_0 has no probabilities" in err
    assert "nnunet-core train Dataset901_Fake 2d 0 --val --npz" in err and "Traceback" not in err
    assert "best: " in ok(best)

    crossval_summary = (
        dirs.results
        / "nnUNetTrainer__nnUNetPlans__2d/crossval_results_folds_0_1_2_3_4/summary.json"
    )
    ensemble_dir = dirs.results / (
        "ensembles/ensemble___nnUNetTrainer__nnUNetPlans__2d___"
        "nnUNetTrainer__nnUNetPlans__3d_fullres___0_1_2_3_4"
    )
    assert len(json.loads(crossval_summary.read_text())["metric_per_case"]) == len(CASES)
    assert sorted(p.name for p in ensemble_dir.glob("*.nii.gz")) == [f"{c}.nii.gz" for c in CASES]
    assert (ensemble_dir / "summary.json").is_file()
    info = json.loads((selection.results / "inference_information.json").read_text())
    assert info["winner"] == max(info["all_results"], key=lambda k: info["all_results"][k])
    assert len(info["candidates"]) == 3
    pp_file = Path(info["best_model_or_ensemble"]["postprocessing_file"])
    assert pp_file.name == "postprocessing.json" and pp_file.is_file()
    assert {
        "function": "remove_all_but_largest_component_from_segmentation",
        "labels_or_regions": 1,
    } in info["postprocessing"]["steps"]
    assert (
        info["postprocessing"]["foreground_mean_dice_after"]
        > info["postprocessing"]["foreground_mean_dice_before"]
    )
    assert (
        "nnunet-core apply-postprocessing"
        in (selection.results / "inference_instructions.txt").read_text()
    )

    applied, evaluated = finish(
        start(
            tmp_path,
            "apply-postprocessing",
            "-i",
            str(tmp_path / "test_ens"),
            "-o",
            str(tmp_path / "test_pp"),
            "--pp-file",
            str(pp_file),
            "-np",
            "1",
        ),
        start(
            tmp_path,
            "evaluate",
            str(dirs.gt_dir),
            str(tmp_path / "test_ens"),
            "-np",
            "1",
            "--chill",
        ),
    )
    ok(applied)
    assert "2 cases" in ok(evaluated) and (tmp_path / "test_ens/summary.json").is_file()
    for case in SPLITS[0]["val"]:
        assert np.all(read_seg_file(tmp_path / f"test_ens/{case}.nii.gz")[BLOB] == 1)
        assert np.all(read_seg_file(tmp_path / f"test_pp/{case}.nii.gz")[BLOB] == 0)
        assert (tmp_path / f"test_ens/{case}.npz").is_file()
