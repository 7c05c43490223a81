"""A shard job of the prediction mode on what a training run selected: an ensemble of two
configurations with its postprocessing. Its segmentations must be what the commands a user would
chain write: ``predict --save_probabilities`` per member, ``ensemble``, ``apply-postprocessing``.

Models with seeded random weights (tests/helpers/model_folder.py: prediction's every step, not
quality); the shard job and the commands run in this process (torch is imported already)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import SimpleITK as sitk

from nnunet_core.cli import main
from nnunet_core.new_scans import shard as shard_job
from nnunet_core.new_scans.plan import plan_run
from tests.helpers.model_folder import DATASET, make_model

PP = {
    "postprocessing_fns": ["remove_all_but_largest_component_from_segmentation"],
    "postprocessing_kwargs": [{"labels_or_regions": [1, 2]}],
}


def selected_results(root: Path, dataset_json: dict) -> Path:
    """``results/<Dataset>`` as find-best-config leaves it: the 3d_tiny + 2d_tiny ensemble won,
    with its postprocessing (written where the run lived; the tree was moved since)."""
    for configuration in ("3d_tiny", "2d_tiny"):
        make_model(root, dataset_json, configuration, [0, 1])
    ensemble = root / DATASET / "ensembles" / "ensemble___3d_tiny___2d_tiny"
    ensemble.mkdir(parents=True)
    (ensemble / "postprocessing.json").write_text(json.dumps(PP))
    chosen = [
        {"configuration": c, "trainer": "nnUNetTrainer", "plans_identifier": "nnUNetPlans"}
        for c in ("3d_tiny", "2d_tiny")
    ]
    selection = {
        "folds": [0, 1],
        "best_model_or_ensemble": {
            "selected_model_or_models": chosen,
            "postprocessing_file": f"/elsewhere/{ensemble.relative_to(root)}/postprocessing.json",
        },
    }
    (root / DATASET / "inference_information.json").write_text(json.dumps(selection))
    return root / DATASET


def test_an_ensemble_selection_segments_as_the_chained_commands_do(
    make_raw_dataset, tmp_path
) -> None:
    raw = make_raw_dataset(tmp_path / "raw" / DATASET, num_training=1, num_test=2)
    images = raw / "imagesTs"
    results = selected_results(tmp_path / "results", json.loads((raw / "dataset.json").read_text()))
    output = tmp_path / "segmentations"
    run = plan_run({"model": str(results), "input": str(images), "output": str(output)}, tmp_path)
    (shard,) = run.shards
    assert shard_job.main([str(run.folder), shard]) == 0

    reference = tmp_path / "reference"
    members = []
    for configuration in ("3d_tiny", "2d_tiny"):
        model = results / f"nnUNetTrainer__nnUNetPlans__{configuration}"
        members.append(str(reference / configuration))
        assert main(["predict", "-i", str(images), "-o", members[-1], "-m", str(model),
                     "-f", "0", "1", "--save_probabilities", "-device", "cpu",
                     "-npp", "0", "-nps", "0"]) == 0  # fmt: skip
    assert main(["ensemble", "-i", *members, "-o", str(reference / "ensemble")]) == 0
    pp_file = results / "ensembles" / "ensemble___3d_tiny___2d_tiny" / "postprocessing.json"
    assert main(["apply-postprocessing", "-i", str(reference / "ensemble"), "-o",
                 str(reference / "final"), "--pp-file", str(pp_file), "-np", "1"]) == 0  # fmt: skip
    expected = sorted((reference / "final").glob("*.nii.gz"))
    assert [p.name for p in sorted(output.glob("*.nii.gz"))] == [p.name for p in expected]
    for theirs in expected:
        ours = sitk.GetArrayFromImage(sitk.ReadImage(str(output / theirs.name)))
        assert np.array_equal(ours, sitk.GetArrayFromImage(sitk.ReadImage(str(theirs))))
    staging = run.folder / "staging"
    assert not [p for p in staging.rglob("*") if p.is_file() and p.name.startswith("synth")]
