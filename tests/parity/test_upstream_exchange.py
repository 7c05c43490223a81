"""Models cross between upstream nnU-Net and us (issue 13), measured on predictions.

- An upstream-trained model (``tests/data/upstream_model``: upstream's own export zip and its own
  predictions and probabilities of two test cases, made by ``make_upstream_model.sh``) predicts
  with ``nnunet-core predict`` as with upstream: with ``--fp16_accumulation`` (upstream's float16
  sums) probabilities within 1e-4 and argmax on >= 99.9 % of voxels; with our default float32
  sums the argmax still agrees.
- A model we train is predicted by upstream's ``nnUNetv2_predict_from_modelfolder`` and
  ``nnUNetv2_predict`` in the peer venv (skipped only where that venv is absent), with the same
  agreement against ours.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from tests.helpers.paths import TEST_DATA
from tests.helpers.peer import HAS_PEER, upstream
from tests.helpers.training import CONFIG, DATASET, MODEL, check, cli, copy_shared_model

pytestmark = pytest.mark.slow

UPSTREAM = TEST_DATA / "upstream_model"
FACTS = json.loads((UPSTREAM / "facts.json").read_text())
UPSTREAM_MODEL = (
    f"{FACTS['dataset_name']}/{FACTS['trainer']}__{FACTS['plans']}__{FACTS['configuration']}"
)
ARGMAX_AGREEMENT = 0.999
PROBABILITY_TOLERANCE = 1e-4


def agreement(ours: Path, theirs: Path, cases: list[str]) -> tuple[float, float]:
    """Fraction of equal labels over all cases, and the largest probability difference."""
    equal = total = 0
    largest = 0.0
    for case in cases:
        a = sitk.GetArrayFromImage(sitk.ReadImage(str(ours / f"{case}.nii.gz")))
        b = sitk.GetArrayFromImage(sitk.ReadImage(str(theirs / f"{case}.nii.gz")))
        equal += int((a == b).sum())
        total += a.size
        pa = np.load(ours / f"{case}.npz")["probabilities"]
        pb = np.load(theirs / f"{case}.npz")["probabilities"]
        assert pa.shape == pb.shape, case
        largest = max(largest, float(np.abs(pa - pb).max()))
    return equal / total, largest


def cases_in(folder: Path) -> list[str]:
    return sorted(p.name[: -len("_0000.nii.gz")] for p in folder.glob("*_0000.nii.gz"))


@pytest.fixture(scope="module")
def upstream_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results root holding upstream's exported model, unpacked as upstream's installer does."""
    results = tmp_path_factory.mktemp("upstream_results")
    with zipfile.ZipFile(UPSTREAM / "upstream_model.zip") as archive:
        archive.extractall(results)
    return results


def our_predict(env: dict[str, str], output: Path, *model: str, fp16: bool = True) -> Path:
    images = UPSTREAM / "imagesTs"
    args = ["predict", "-i", str(images), "-o", str(output), *model, "-f", "0"]
    args += ["--save_probabilities", "-device", "cpu", "-npp", "0", "-nps", "0"]
    check(cli(env, *args, *(["--fp16_accumulation"] if fp16 else [])))
    return output


def test_an_upstream_model_folder_predicts_as_upstream(upstream_results, tmp_path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    model = upstream_results / UPSTREAM_MODEL
    ours = our_predict(env, tmp_path / "ours", "-m", str(model))
    equal, largest = agreement(ours, UPSTREAM / "predictions", cases_in(UPSTREAM / "imagesTs"))
    print(f"upstream model, -m: argmax equal {equal:.6f}, max |dp| {largest:.2e}")
    assert equal >= ARGMAX_AGREEMENT and largest <= PROBABILITY_TOLERANCE


def test_an_upstream_results_tree_predicts_by_dataset_and_trainer(upstream_results, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    by_name = [
        "-d",
        str(FACTS["dataset_id"]),
        "-c",
        FACTS["configuration"],
        "-tr",
        FACTS["trainer"],
        "-p",
        FACTS["plans"],
        "--results",
        str(upstream_results),
    ]
    ours = our_predict(env, tmp_path / "ours", *by_name)
    equal, largest = agreement(ours, UPSTREAM / "predictions", cases_in(UPSTREAM / "imagesTs"))
    assert equal >= ARGMAX_AGREEMENT and largest <= PROBABILITY_TOLERANCE
    # our own float32 sums: more accurate at tile corners, the same segmentation
    default = our_predict(env, tmp_path / "float32", *by_name, fp16=False)
    equal, _ = agreement(default, UPSTREAM / "predictions", cases_in(UPSTREAM / "imagesTs"))
    assert equal >= ARGMAX_AGREEMENT


# ------------------------------------------------------------------- upstream predicts ours
@pytest.fixture(scope="module")
def our_model(env, trained_tiny_fold: Path) -> dict[str, str]:
    """Fold 0 of the tiny dataset trained by us long enough to segment: conftest's shared fold
    (8 x 25 iterations), copied into this module's ``env``."""
    copy_shared_model(trained_tiny_fold, env)
    return env


@pytest.mark.skipif(not HAS_PEER, reason="no peer venv here")
def test_upstream_predicts_a_model_we_trained(our_model, tmp_path) -> None:
    env = our_model
    images = tmp_path / "images"
    images.mkdir()
    raw = Path(env["nnUNet_raw"]) / DATASET / "imagesTr"
    for case in ("synth_000", "synth_001"):  # any images of the dataset
        shutil.copy(raw / f"{case}_0000.nii.gz", images)
    model = Path(env["nnUNet_results"]) / DATASET / MODEL
    flags = ["-f", "0", "--save_probabilities", "-device", "cpu"]
    from_folder, by_name = tmp_path / "upstream_m", tmp_path / "upstream_d"
    # upstream's pool path (its model-folder entry point has no sequential branch) ...
    upstream(env, "nnUNetv2_predict_from_modelfolder", "-i", str(images), "-o", str(from_folder),
             "-m", str(model), *flags, "-npp", "1", "-nps", "1")  # fmt: skip
    # ... and its sequential one (-npp 0 -nps 0): the same predictor, no spawned children
    upstream(env, "nnUNetv2_predict", "-i", str(images), "-o", str(by_name), "-d", DATASET,
             "-c", CONFIG, *flags, "-npp", "0", "-nps", "0")  # fmt: skip
    ours = tmp_path / "ours"
    check(cli(env, "predict", "-i", str(images), "-o", str(ours), "-m", str(model), *flags,
              "-npp", "0", "-nps", "0", "--fp16_accumulation"))  # fmt: skip
    cases = cases_in(images)
    for theirs in (from_folder, by_name):
        equal, largest = agreement(ours, theirs, cases)
        print(f"ours vs {theirs.name}: argmax equal {equal:.6f}, max |dp| {largest:.2e}")
        assert equal >= ARGMAX_AGREEMENT and largest <= PROBABILITY_TOLERANCE
