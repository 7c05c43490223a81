"""A run whose selection picks the pair ensemble reads clean (issue 36).

The scenario ``ensemble_wins`` (.test/ensemble_wins/config.yaml) makes the ensemble of 2d and
3d_fullres win on the CPU, the same on every rerun (seed 1, deterministic, fold 0 of 1 epoch x 2
iterations). Its folder ``predictions/D/ensemble`` once also matched the predict rule's
``{configuration}`` wildcard: every run and dry run printed an InputFunctionException
("configuration 'ensemble' not in plans"), and a dry run with ``--strict-dag-evaluation
functions`` failed. One real run (about 2-3 minutes on 2 cores) and its dry run serve every test.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import SimpleITK as sitk

from tests.helpers.workflow import DATASET, job_counts, scenario_config, snakemake

pytestmark = pytest.mark.slow

MEMBERS = ["nnUNetTrainer__nnUNetPlans__2d", "nnUNetTrainer__nnUNetPlans__3d_fullres"]
# What Snakemake prints for an exception raised by an input function, or any other traceback.
EXCEPTION_TEXT = ("Exception", "Traceback", "ConfigurationError", "Error:")


@pytest.fixture(scope="module")
def ensemble_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("ensemble_wins")
    config = scenario_config("demo", "ensemble_wins")
    config["work_dir"] = str(workdir / "work")
    run = snakemake(workdir, config, "all")
    dry = snakemake(workdir, config, "-n", "--strict-dag-evaluation", "functions")
    return workdir / "work", run.stdout + run.stderr, dry.stdout + dry.stderr


def test_the_pair_ensemble_wins_the_selection(ensemble_run) -> None:
    work, _, _ = ensemble_run
    info = json.loads((work / "results" / DATASET / "inference_information.json").read_text())
    winner = next(c for c in info["candidates"] if c["identifier"] == info["winner"])
    assert winner["kind"] == "ensemble" and winner["members"] == MEMBERS, info["all_results"]


@pytest.mark.parametrize("output", ["run", "strict dry run"])
def test_no_exception_text_in_the_run_or_its_strict_dry_run(ensemble_run, output) -> None:
    _, run, dry = ensemble_run
    text = run if output == "run" else dry
    found = [word for word in EXCEPTION_TEXT if word in text]
    assert not found, text[-5000:]
    if output != "run":
        assert "Nothing to be done" in text, text[-3000:]


def test_the_test_predictions_are_the_ensembles(ensemble_run) -> None:
    """Both configurations predict the test set, the ensemble job averages them, and the final
    predictions are the ensemble's after postprocessing (which only removes components)."""
    work, run, _ = ensemble_run
    counts = job_counts(run)
    assert counts["predict"] == 2 and counts["ensemble_predictions"] == 1, counts
    assert counts["postprocess"] == 1 and counts["evaluate_test"] == 1, counts
    predictions = work / "predictions" / DATASET
    finals = sorted((predictions / "final").glob("*.nii.gz"))
    assert [p.name for p in finals] == ["synth_t000.nii.gz", "synth_t001.nii.gz"]

    def read(folder: str, name: str) -> np.ndarray:
        return sitk.GetArrayFromImage(sitk.ReadImage(str(predictions / folder / name)))

    for final_file in finals:
        final, ensemble = read("final", final_file.name), read("ensemble", final_file.name)
        kept = final > 0
        assert kept.any() and np.array_equal(final[kept], ensemble[kept]), final_file.name
        for member in ("2d", "3d_fullres"):
            assert not np.array_equal(final, read(member, final_file.name)), member
