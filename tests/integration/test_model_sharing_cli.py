"""Model archives cross between upstream nnU-Net 2.8.1 and us (issue 13 part 5), as commands.

With the peer venv (skipped only where it is absent): upstream's
``nnUNetv2_install_pretrained_model_from_zip`` installs our export byte for byte; upstream's
``nnUNetv2_export_model_to_zip`` on the same results tree writes exactly our member list (plain,
``--exp_cv_preds``, several ``-chk``) on a tree that has upstream's ``postprocessing.pkl``, and
ours installs upstream's archive byte for byte; our export of a tree without the pickle makes it.
Without it: ``predict-from-modelfolder`` predicts upstream's tiny model
(``tests/data/upstream_model``) as upstream did.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from nnunet_core.model_sharing.upstream_pickle import postprocessing_pickle
from tests.helpers.model_sharing import DATASET, UPSTREAM_LAYOUT, files_under, make_results, members
from tests.helpers.paths import TEST_DATA
from tests.helpers.peer import HAS_PEER, upstream
from tests.helpers.training import check, cli

pytestmark = pytest.mark.slow

UPSTREAM = TEST_DATA / "upstream_model"
EXPORTS = {
    "plain": ["-c", "3d_fullres", "2d", "-f", "0"],
    "cv_preds": ["-c", "2d", "3d_fullres", "-f", "0", "--exp_cv_preds"],
    "checkpoints": ["-c", "2d", "-f", "0", "-chk", "checkpoint_best.pth", "checkpoint_final.pth"],
}


def roots(root: Path, results: Path) -> dict[str, str]:
    """This environment with nnU-Net's three roots in ``root`` (results: ``results``)."""
    for name in ("raw", "preprocessed"):
        (root / name).mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "nnUNet_raw": str(root / "raw"),
        "nnUNet_preprocessed": str(root / "preprocessed"),
        "nnUNet_results": str(results),
    }


@pytest.mark.skipif(not HAS_PEER, reason="no peer venv (upstream nnU-Net) here")
def test_upstream_installs_our_archive(tmp_path) -> None:
    results = make_results(tmp_path / "results")
    archive = tmp_path / "ours.zip"
    env = roots(tmp_path, results)
    check(cli(env, "export-model-to-zip", "-d", DATASET, "-o", str(archive), *EXPORTS["plain"]))
    assert members(archive) == UPSTREAM_LAYOUT
    installed = tmp_path / "installed_by_upstream"
    upstream(roots(tmp_path, installed), "nnUNetv2_install_pretrained_model_from_zip", str(archive))
    original = files_under(results)
    got = files_under(installed)
    assert sorted(got) == sorted(UPSTREAM_LAYOUT)
    made = {name for name in got if name.endswith("/postprocessing.pkl")}  # from the JSON
    assert made and all(got[name] == original[name] for name in set(got) - made)


@pytest.mark.skipif(not HAS_PEER, reason="no peer venv (upstream nnU-Net) here")
@pytest.mark.parametrize("flags", list(EXPORTS), ids=list(EXPORTS))
def test_upstreams_export_has_our_layout_and_installs_here(tmp_path, flags) -> None:
    results = make_results(tmp_path / "results")
    for json_file in results.rglob("postprocessing.json"):  # a tree as upstream leaves it
        json_file.with_suffix(".pkl").write_bytes(postprocessing_pickle(json_file))
    env = roots(tmp_path, results)
    theirs, ours = tmp_path / "theirs.zip", tmp_path / "ours.zip"
    upstream(env, "nnUNetv2_export_model_to_zip", "-d", DATASET, "-o", str(theirs), *EXPORTS[flags])
    check(cli(env, "export-model-to-zip", "-d", DATASET, "-o", str(ours), *EXPORTS[flags]))
    assert members(ours) == members(theirs)
    installed = tmp_path / "installed_by_us"
    check(cli(env, "install-pretrained-model-from-zip", str(theirs), "--results", str(installed)))
    with zipfile.ZipFile(theirs) as handle:
        expected = {name: handle.read(name) for name in handle.namelist()}
    original = files_under(results)
    assert files_under(installed) == expected
    assert all(original[name] == data for name, data in expected.items())


def test_predict_from_modelfolder_predicts_upstreams_model_as_upstream(tmp_path) -> None:
    results = tmp_path / "results"
    env = roots(tmp_path, results)
    check(cli(env, "install-pretrained-model-from-zip", str(UPSTREAM / "upstream_model.zip")))
    (model,) = results.glob("Dataset*/*__*__*")
    output = tmp_path / "predictions"
    check(cli(env, "predict-from-modelfolder", "-i", str(UPSTREAM / "imagesTs"), "-o", str(output),
              "-m", str(model), "-f", "0", "-device", "cpu", "-npp", "0", "-nps", "0",
              "--fp16_accumulation"))  # fmt: skip
    expected = sorted((UPSTREAM / "predictions").glob("*.nii.gz"))
    assert [p.name for p in sorted(output.glob("*.nii.gz"))] == [p.name for p in expected]
    equal = total = 0
    for theirs in expected:
        a = sitk.GetArrayFromImage(sitk.ReadImage(str(output / theirs.name)))
        b = sitk.GetArrayFromImage(sitk.ReadImage(str(theirs)))
        equal, total = equal + int(np.sum(a == b)), total + a.size
    assert equal / total >= 0.999
