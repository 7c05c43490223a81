"""Segmenting new scans with the workflow (config ``predict:``), real Snakemake throughout.

A model trained by the CLI (conftest's shared 3d_tiny fold 0, 8 x 25 iterations) is given a
postprocessing step and exported to a zip; the workflow segments 7 new scans with it in shards of
3. What it writes must be what ``nnunet-core predict`` and ``apply-postprocessing`` write with
the same model, postprocessing and settings; a rerun has nothing to do; a deleted output is
predicted again alone; an unreadable case fails alone and is listed in ``failed.tsv``. The
reruns are the README's lines as printed. An upstream model folder predicts as upstream.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from nnunet_core.cli import main
from tests.helpers.paths import TEST_DATA
from tests.helpers.readme_commands import (
    PREDICT_NEW_SCANS,
    PREDICT_NEW_SCANS_SLURM,
    mirror_checkout,
    run,
    user_shell,
    with_flags,
)
from tests.helpers.training import CONFIG, DATASET, MODEL, check, cli, copy_shared_model
from tests.helpers.workflow import predict_workflow

pytestmark = pytest.mark.slow
UPSTREAM = TEST_DATA / "upstream_model"

PP = {
    "postprocessing_fns": ["remove_all_but_largest_component_from_segmentation"],
    "postprocessing_kwargs": [{"labels_or_regions": [1, 2]}],
}


def segmentation(path: Path) -> np.ndarray:
    return sitk.GetArrayFromImage(sitk.ReadImage(str(path)))


@pytest.fixture(scope="module")
def model_zip(env, trained_tiny_fold, tmp_path_factory) -> Path:
    model_dir = copy_shared_model(trained_tiny_fold, env).parent  # conftest's fold 0, in env
    crossval = model_dir / "crossval_results_folds_0"
    crossval.mkdir()
    (crossval / "postprocessing.json").write_text(json.dumps(PP))
    archive = tmp_path_factory.mktemp("zip") / "model.zip"
    check(cli(env, "export-model-to-zip", "-d", "900", "-c", CONFIG, "-f", "0", "-o", str(archive)))
    return archive


@pytest.fixture(scope="module")
def scans(make_raw_dataset, tmp_path_factory) -> Path:
    raw = make_raw_dataset(tmp_path_factory.mktemp("new") / DATASET, num_training=1, num_test=7)
    return raw / "imagesTs"


def test_shards_write_what_predict_writes_and_rerun_only_what_is_missing(
    env, model_zip: Path, scans: Path, tmp_path: Path
) -> None:
    """From a checkout holding model.zip and new_scans/, as README "Segmenting new scans" has it:
    the first run in shards of 3, then the README's line as printed for the reruns."""
    checkout = mirror_checkout(tmp_path / "checkout")
    shutil.copy(model_zip, checkout / "model.zip")
    shutil.copytree(scans, checkout / "new_scans")
    output, user = checkout / "segmentations", user_shell(tmp_path / "home")
    first = run(PREDICT_NEW_SCANS.replace("segmentations}", "segmentations, cases_per_job: 3}"),
                checkout, user)  # fmt: skip
    assert first.stderr.count("predict_shard") >= 3  # 7 cases in shards of 3: three jobs
    cases = sorted(p.name.removesuffix("_0000.nii.gz") for p in scans.glob("*_0000.nii.gz"))
    assert sorted(p.name for p in output.glob("*.nii.gz")) == [f"{c}.nii.gz" for c in cases]
    # the zip is installed aside into work_dir, not into the user's nnUNet_results
    assert list((checkout / "work" / "new_scans" / "models").glob(f"*/{DATASET}/{MODEL}"))

    reference = tmp_path / "reference"
    model_dir = Path(env["nnUNet_results"]) / DATASET / MODEL
    # the same commands in this process (torch is imported here already: two starts fewer)
    assert main(["predict", "-i", str(scans), "-o", str(reference / "raw"), "-m", str(model_dir),
                 "-f", "0", "-device", "cpu", "-npp", "0", "-nps", "0"]) == 0  # fmt: skip
    assert main(["apply-postprocessing", "-i", str(reference / "raw"), "-o", str(reference / "pp"),
                 "--pp-file", str(model_dir / "crossval_results_folds_0" / "postprocessing.json"),
                 "-np", "1"]) == 0  # fmt: skip
    for case in cases:
        ours, theirs = output / f"{case}.nii.gz", reference / "pp" / f"{case}.nii.gz"
        assert np.array_equal(segmentation(ours), segmentation(theirs)), case
    rows = list(csv.DictReader((output / "summary.tsv").open(), delimiter="\t"))
    assert [r["case"] for r in rows] == cases
    assert (output / "qc" / "montage.png").is_file()
    assert not (output / "failed.tsv").exists()

    again = run(PREDICT_NEW_SCANS, checkout, user)  # cases_per_job is no key: nothing is missing
    assert "Nothing to be done" in again.stderr

    times = {p.name: p.stat().st_mtime_ns for p in output.glob("*.nii.gz")}
    (output / f"{cases[3]}.nii.gz").unlink()
    run(PREDICT_NEW_SCANS, checkout, user)
    logs = (checkout / "work" / "logs" / "new_scans").glob("predict_shard_*.log")
    newest = max(logs, key=os.path.getmtime).read_text()
    assert "1 of 1 case(s) to predict" in newest
    after = {p.name: p.stat().st_mtime_ns for p in output.glob("*.nii.gz")}
    assert [n for n in after if after[n] != times.get(n)] == [f"{cases[3]}.nii.gz"]
    assert np.array_equal(
        segmentation(output / f"{cases[3]}.nii.gz"),
        segmentation(reference / "pp" / f"{cases[3]}.nii.gz"),
    )

    (checkout / "new_scans" / "zz_bad_0000.nii.gz").write_bytes(b"not an image")
    failing = run(PREDICT_NEW_SCANS, checkout, user, check=False)
    assert failing.returncode != 0
    failed = list(csv.DictReader((output / "failed.tsv").open(), delimiter="\t"))
    assert [f["case"] for f in failed] == ["zz_bad"]
    assert "zz_bad_0000.nii.gz" in failed[0]["reason"]
    assert "1 case(s) failed" in failing.stderr
    unchanged = {p.name: p.stat().st_mtime_ns for p in output.glob("*.nii.gz")}
    assert unchanged == after  # the other cases were not predicted again

    # the README's SLURM line: its preview plans the missing case as one shard job with one GPU
    pytest.importorskip("snakemake_executor_plugin_slurm")
    (checkout / "new_scans" / "zz_bad_0000.nii.gz").unlink()
    (output / f"{cases[0]}.nii.gz").unlink()
    dry = run(with_flags(PREDICT_NEW_SCANS_SLURM, "-n"), checkout, user)
    preview = dry.stdout + dry.stderr
    blocks = [b for b in re.split(r"\n(?=(?:localrule|rule) )", preview)
              if b.startswith("rule predict_shard:")]  # fmt: skip
    assert len(blocks) == 1, preview[-3000:]
    assert re.search(r"resources: .*gpu=1", blocks[0]) and "slurm_partition=gpu" in blocks[0]


def test_an_upstream_model_folder_predicts_as_upstream(tmp_path: Path) -> None:
    """Upstream 2.8.1's own model folder (tests/data/upstream_model: trained, exported and
    predicted by upstream) through the workflow: upstream's segmentations, voxel for voxel."""
    with zipfile.ZipFile(UPSTREAM / "upstream_model.zip") as archive:
        archive.extractall(tmp_path / "theirs")
    (model,) = (tmp_path / "theirs").glob("Dataset*/*__*__*")
    output = tmp_path / "segmentations"
    predict = {"model": model, "input": UPSTREAM / "imagesTs", "output": output}
    result = predict_workflow(tmp_path, predict)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = sorted((UPSTREAM / "predictions").glob("*.nii.gz"))
    assert [p.name for p in sorted(output.glob("*.nii.gz"))] == [p.name for p in expected]
    for theirs in expected:
        assert np.array_equal(segmentation(output / theirs.name), segmentation(theirs))
