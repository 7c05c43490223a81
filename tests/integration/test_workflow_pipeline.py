"""The whole workflow, raw data to report, on a tiny dataset with a tiny schedule (real Snakemake).

What a user relies on at the end: final test predictions in the test images' exact geometry, a test
summary, the selection record, the report, a second run with nothing to do, and what
``snakemake reproduce``'s archive holds (those of several datasets, seeds and methods:
test_workflow_paper.py and test_workflow_methods.py; that deleting one fold reruns it and only
what depends on it is tested once, there, across runs).

The run is the scenario ``ensemble_wins`` (seed 1, folds 0 and 1), in which the pair ensemble
of 2d and 3d_fullres wins the selection: the test set is predicted by both and ensembled, and
neither the run nor a dry run with ``--strict-dag-evaluation functions`` prints an exception (the
folder ``predictions/D/ensemble`` once matched the predict rule's ``{configuration}`` wildcard:
issue 36). It answers the stage target ``preprocessed`` too, and lends its raw data to a broken
copy that stops at the integrity check. Tests that change the run come after those that read
it, in file order (``--dist loadfile`` keeps a file on one worker).

Last, the run is the fault campaign's reference (benchmarks/faults/): a reader's rerun from its
archive on a fresh clone, killed at moments of five stages and run again each time, ends with
every output equal to this run's, byte for byte (surface metrics included), and the reader's
``check`` passes.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
import yaml

from benchmarks.faults.campaign import Campaign
from benchmarks.faults.stages import (
    BETWEEN_JOBS,
    NPZ_EXPORT,
    PREDICTION_WRITING,
    TRAINING,
    draw_chain,
)
from nnunet_core.cluster.retry import command_prefix
from tests.helpers.workflow import DATASET, ReaderCheckout, job_counts, snakemake, tiny_config

pytestmark = pytest.mark.slow

MEMBERS = ["nnUNetTrainer__nnUNetPlans__2d", "nnUNetTrainer__nnUNetPlans__3d_fullres"]
# What Snakemake prints for an exception raised by an input function, or any other traceback.
EXCEPTION_TEXT = ("Exception", "Traceback", "ConfigurationError", "Error:")
# surface metrics, and the report's print versions (the other tests' runs draw PNGs only)
SURFACE = {
    "evaluation": {"surface_metrics": True, "nsd_tolerance_mm": {"1": 2, "2": 1.5}},
    "report": {"print_figures": True},
}
# The fault campaign's moments (benchmarks/faults): one SIGKILL in each of five stages, chained.
FAULT_SEED = 14
FAULT_STAGES = ["preprocess", TRAINING, NPZ_EXPORT, "selection", PREDICTION_WRITING]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Campaign:
    """The run, uninterrupted: the fault campaign's reference (its manifest taken at once)."""
    campaign = Campaign(tmp_path_factory.mktemp("pipeline"), changes=SURFACE)
    campaign.run_reference()
    return campaign


@pytest.fixture(scope="module")
def pipeline(campaign):
    workdir = campaign.rundir
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    return workdir / "work", config, workdir, campaign.reference.output


@pytest.fixture(scope="module")
def strict_dry_run(pipeline) -> str:
    """A dry run with ``--strict-dag-evaluation functions`` of the finished run."""
    _, config, workdir, _ = pipeline
    dry = snakemake(workdir, config, "-n", "--strict-dag-evaluation", "functions")
    return dry.stdout + dry.stderr


def test_every_stage_ran_once(pipeline) -> None:
    _, _, _, output = pipeline
    counts = job_counts(output)
    assert counts["train"] == 4  # 2 configurations x 2 folds
    assert counts["crossval"] == 2
    assert counts["ensemble_cv"] == 1
    for rule in ("select", "predict", "postprocess", "evaluate_test", "report"):
        assert counts.get(rule, 0) >= 1, (rule, counts)


def test_the_pair_ensemble_wins_the_selection(pipeline) -> None:
    work, _, _, _ = pipeline
    info = json.loads((work / "results" / DATASET / "inference_information.json").read_text())
    winner = next(c for c in info["candidates"] if c["identifier"] == info["winner"])
    assert winner["kind"] == "ensemble" and winner["members"] == MEMBERS, info["all_results"]


@pytest.mark.parametrize("output", ["run", "strict dry run"])
def test_no_exception_text_in_the_run_or_its_strict_dry_run(
    pipeline, strict_dry_run, output
) -> None:
    _, _, _, run = pipeline
    text = run if output == "run" else strict_dry_run
    found = [word for word in EXCEPTION_TEXT if word in text]
    assert not found, text[-5000:]
    if output != "run":
        assert "Nothing to be done" in text, text[-3000:]


def test_the_test_predictions_are_the_ensembles(pipeline) -> None:
    """Both configurations predict the test set, the ensemble job averages them, and the final
    predictions are the ensemble's after postprocessing (which only removes components)."""
    work, _, _, output = pipeline
    counts = job_counts(output)
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


def test_final_predictions_have_the_test_images_geometry(pipeline) -> None:
    work, _, _, _ = pipeline
    images = sorted((work / "raw" / DATASET / "imagesTs").glob("*_0000.nii.gz"))
    assert len(images) == 2
    for image_path in images:
        case = image_path.name.removesuffix("_0000.nii.gz")
        prediction = sitk.ReadImage(
            str(work / "predictions" / DATASET / "final" / f"{case}.nii.gz")
        )
        image = sitk.ReadImage(str(image_path))
        assert prediction.GetSize() == image.GetSize()
        assert prediction.GetSpacing() == pytest.approx(image.GetSpacing())
        assert prediction.GetOrigin() == pytest.approx(image.GetOrigin())
        assert prediction.GetDirection() == pytest.approx(image.GetDirection())


def test_selection_test_summary_and_report(pipeline) -> None:
    work, _, _, _ = pipeline
    results = work / "results" / DATASET
    info = json.loads((results / "inference_information.json").read_text())
    identifiers = {c["identifier"] for c in info["candidates"]}
    assert len(identifiers) == 3  # 2d, 3d_fullres and their ensemble
    assert info["winner"] in identifiers
    summary = json.loads((work / "predictions" / DATASET / "test_summary.json").read_text())
    assert len(summary["metric_per_case"]) == 2
    assert set(summary["mean"]) == {"1", "2"}
    page = (results / "report" / "report.md").read_text()
    assert "Selected model" in page and "Test set" in page
    kinds = next(line for line in page.splitlines() if "jobs of these kinds" in line)
    for rule in ("fingerprint", "plan", "preprocess", "train", "crossval", "select", "predict"):
        assert f" {rule}," in kinds or kinds.endswith(f" {rule}."), (rule, kinds)
    assert len(list((results / "report" / "training_curves").glob("*.png"))) == 2
    assert (results / "report" / "cv_dice.pdf").read_bytes().startswith(b"%PDF-")


def test_surface_metrics_reach_the_summaries_and_the_results_table(pipeline) -> None:
    work, _, workdir, _ = pipeline
    results = work / "results" / DATASET
    summary = json.loads((work / "predictions" / DATASET / "test_summary.json").read_text())
    for label in ("1", "2"):
        assert {"HD95", "NSD"} <= set(summary["mean"][label])
    crossval = results / "nnUNetTrainer__nnUNetPlans__2d" / "crossval_results_folds_0_1"
    assert "NSD" in json.loads((crossval / "summary.json").read_text())["foreground_mean"]
    log = (work / "logs" / DATASET / "evaluate_test.log").read_text()
    assert "NSD" in log
    report = results / "report"
    header = (report / "results_table.csv").read_text().splitlines()[0].split(",")
    assert {"Dice_mean", "HD95_ci_low", "NSD_ci_high", "p_wilcoxon"} <= set(header)
    assert r"\toprule" in (report / "results_table.tex").read_text()
    methods = (report / "methods.md").read_text()
    assert "2d (patch" in methods and "cross-validated on 2 folds (0 and 1)" in methods


def test_training_log_lives_outside_the_fold_and_resume_flag_is_passed(pipeline) -> None:
    work, config, workdir, _ = pipeline
    log = work / "logs" / DATASET / "train_3d_fullres_fold0.log"
    assert log.is_file()
    fold = work / "results" / DATASET / "nnUNetTrainer__nnUNetPlans__3d_fullres" / "fold_0"
    assert (fold / "checkpoint_final.pth").is_file()
    assert not list(fold.glob("*.log"))
    dry = snakemake(workdir, config, "all", "-n", "-p", "--forcerun", "train")
    commands = [line for line in dry.stdout.splitlines() if "nnunet-core train" in line]
    assert commands and all(" --c " in line for line in commands)


def test_second_run_has_nothing_to_do(pipeline) -> None:
    _, config, workdir, _ = pipeline
    again = snakemake(workdir, config, "all")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_run_produces_preprocessed_data(pipeline) -> None:
    work, _, _, _ = pipeline
    pre = work / "preprocessed" / DATASET
    plans = json.loads((pre / "nnUNetPlans.json").read_text())
    assert {"2d", "3d_fullres"} <= set(plans["configurations"])
    cases = sorted(
        p.name.removesuffix(".nii.gz") for p in (work / "raw" / DATASET / "labelsTr").iterdir()
    )
    assert len(cases) == 6
    for identifier in ("nnUNetPlans_2d", "nnUNetPlans_3d_fullres"):
        folder = pre / identifier
        summary = json.loads((folder / "preprocess_summary.json").read_text())
        assert sorted(summary["cases"]) == cases
        for case in cases:
            for name in (f"{case}.b2nd", f"{case}_seg.b2nd", f"{case}.json"):
                assert (folder / name).is_file(), folder / name
    splits = json.loads((pre / "splits_final.json").read_text())
    assert sorted(c for s in splits for c in s["val"]) == cases
    for rule in ("verify_dataset", "fingerprint", "plan", "splits", "preprocess"):
        assert list((work / "logs" / DATASET).glob(f"{rule}*.log")), rule


def test_stage_target_preprocessed_has_nothing_to_do(pipeline) -> None:
    _, config, workdir, _ = pipeline
    result = snakemake(workdir, config, "preprocessed")
    assert "Nothing to be done" in result.stdout + result.stderr


def test_broken_dataset_stops_at_the_integrity_check(tmp_path, pipeline) -> None:
    work, _, _, _ = pipeline
    raw_root = tmp_path / "raw"
    shutil.copytree(work / "raw" / DATASET, raw_root / DATASET)
    label = raw_root / DATASET / "labelsTr" / "synth_001.nii.gz"
    assert label.is_file()
    label.unlink()
    config = tiny_config(tmp_path / "work", raw_root=str(raw_root))
    config["dataset"]["synthetic"]["enabled"] = False
    result = snakemake(tmp_path, config, "preprocessed", check=False)
    assert result.returncode == 2
    # on the console, checked before any job (nnunet_core.workflow.dataset_check)
    error_lines = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert error_lines and "synth_001" in error_lines[0], result.stderr
    pre = tmp_path / "work/preprocessed" / DATASET
    assert not (pre / "verify.json").exists()
    assert not (pre / "dataset_fingerprint.json").exists()


def test_report_html_contains_the_figures(pipeline) -> None:
    work, config, workdir, _ = pipeline
    target = workdir / "report.html"
    snakemake(workdir, config, "all", "--report", str(target))
    html = target.read_text(errors="replace")
    for figure in ("cv_dice.png", "selection.png", "test_dice.png", "run_times.png"):
        assert figure in html, figure
    assert "training_curves_3d_fullres.png" in html
    assert "results_table.csv" in html and "methods.md" in html
    # the qualitative examples: of the 2 test cases the best and the worst, on the page too
    report = work / "results" / DATASET / "report"
    examples = sorted(p.name for p in (report / "qualitative").glob("*.png"))
    assert [name.split("_")[0] for name in examples] == ["best", "worst"], examples
    page = (report / "report.md").read_text()
    assert "## Qualitative examples" in page and "The best and worst test cases" in page
    for name in examples:
        assert f"(qualitative/{name})" in page and name in html, name


@pytest.fixture(scope="module")
def archive(pipeline, tmp_path_factory) -> Path:
    """`snakemake reproduce`'s archive of the run (made before the tests below change it), kept
    outside the run's folder (the reader's rerun at the end replaces that folder)."""
    work, config, workdir, _ = pipeline
    snakemake(workdir, config, "reproduce")
    kept = tmp_path_factory.mktemp("archive") / "reproduce.tar.gz"
    shutil.copyfile(work / "reproduce.tar.gz", kept)
    return kept


def test_the_reproduce_archive_holds_the_run(archive) -> None:
    with tarfile.open(archive) as packed:
        names = set(packed.getnames())
        manifest = json.loads(packed.extractfile("manifest.json").read())
        commands = packed.extractfile("commands.sh").read().decode()
    table = f"expected/results/{DATASET}/report/results_table.csv"
    assert {
        "config.yaml",
        "commands.sh",
        table,
        f"expected/preprocessed/{DATASET}/splits_final.json",
    } <= names
    assert len([n for n in names if n.endswith("provenance.json")]) == 4
    assert manifest["git"]["commit"] in commands and manifest["versions"]["torch"]
    assert any(name.endswith("_0000.nii.gz") for name in manifest["raw_sha256"])
    assert commands.count("# nnunet-core train Dataset900_Synth") == 4


def test_multi_gpu_and_multi_node_commands(pipeline) -> None:
    _, config, workdir, _ = pipeline
    gpus = {**config, "training": {**config["training"], "gpus_per_job": 2}}
    dry = snakemake(workdir, gpus, "all", "-n", "-p", "--forcerun", "train")
    train_lines = [line for line in dry.stdout.splitlines() if "nnunet-core train" in line]
    assert train_lines and all("-num_gpus 2" in line for line in train_lines)
    nodes = {**config, "training": {**config["training"], "gpus_per_job": 2, "nodes": 2}}
    dry = snakemake(workdir, nodes, "all", "-n", "-p", "--forcerun", "train")
    torchrun = [line for line in dry.stdout.splitlines() if "torchrun_launch --nnodes 2" in line]
    assert torchrun and all(
        line.startswith(
            "OMP_NUM_THREADS=1 OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} "
            + command_prefix(config["training"]["retries"])  # the retry runner
            + "srun --nodes 2 --ntasks-per-node 1 "
        )
        and "nnunet_core.cluster.stop_relay python -m nnunet_core.training.torchrun_launch "
        "--nnodes 2 --nproc_per_node 2"
        in line
        and "--rdzv_backend c10d" in line
        and "-m nnunet_core.train Dataset900_Synth" in line
        for line in torchrun
    )
    assert "gpu=0, nodes=2, tasks=2, mpi=srun, gres=gpu:2, tasks_per_gpu=0" in dry.stdout


def test_touching_one_image_reruns_only_its_dependants(pipeline) -> None:
    """Last: it leaves the run's later stages out of date."""
    work, config, workdir, _ = pipeline
    image = sorted((work / "raw" / DATASET / "imagesTr").iterdir())[2]
    os.utime(image)
    result = snakemake(workdir, config, "preprocessed")
    counts = job_counts(result.stdout + result.stderr)
    assert counts == {
        "verify_dataset": 1,
        "fingerprint": 1,
        "plan": 1,
        "preprocess": 2,
        "preprocessed": 1,
    }
    again = snakemake(workdir, config, "preprocessed")
    assert "Nothing to be done" in again.stdout + again.stderr


# ---------------------------------------------- faults: last, their runs replace the run's folder
@pytest.fixture(scope="module")
def reader(tmp_path_factory) -> ReaderCheckout:
    return ReaderCheckout(tmp_path_factory.mktemp("reader"))


@pytest.fixture(scope="module")
def chain(campaign, archive, reader):
    """A reader's rerun from the archive on a fresh clone, in the run's folder (outputs name it),
    killed at a moment of each stage in turn, each rerun at the next, the last one to the end
    (``Campaign.run_chain``; ``python -m benchmarks.faults.run`` kills every stage)."""
    campaign.repo, campaign.env = reader.root, reader.env
    campaign.write_config = lambda rundir: reader.unpack(archive, rundir)
    moments = draw_chain(campaign.reference.windows, len(FAULT_STAGES), FAULT_SEED, FAULT_STAGES)
    return moments, campaign.run_chain(moments)


def test_the_moments_hit_five_stages(chain) -> None:
    moments, results = chain
    assert sorted(m.stage for m in moments) == sorted(FAULT_STAGES)
    assert all(r.killed for r in results), [r.row() for r in results]
    hit = {s for r in results for s in r.stages_hit} - {BETWEEN_JOBS}
    assert len(hit) >= 4, [r.row() for r in results]


def test_every_rerun_continues_and_the_last_completes(chain) -> None:
    _, results = chain
    assert all(r.rerun_ok for r in results), [r.row() for r in results]
    assert not [r.escaped for r in results if r.escaped]  # every job died with the group


def test_no_file_is_half_written(chain) -> None:
    _, results = chain
    assert not {p for r in results for p in r.half_written}


def test_outputs_equal_the_uninterrupted_run(chain) -> None:
    """Byte for byte, checkpoints and the results table (surface metrics and p-values) included:
    a fold continued from checkpoint_latest.pth once saved a different checkpoint_best.pth (a
    stale best EMA in latest; fixed in the trainer)."""
    _, results = chain
    assert not {d for r in results for d in r.differences}


@pytest.mark.usefixtures("chain")
def test_the_readers_check_passes_and_names_a_table_that_differs(campaign, archive, reader):
    work = campaign.rundir / "work"
    checked = reader.check(archive, work)
    assert checked.returncode == 0, checked.stderr
    table = work / "results" / DATASET / "report" / "results_table.csv"
    header = table.read_text().splitlines()[0].split(",")
    assert {"HD95_mean", "NSD_mean", "p_wilcoxon"} <= set(header)
    table.write_text(table.read_text().replace("0.", "0.9", 1))  # last: the rerun is changed
    changed = reader.check(archive, work)
    assert changed.returncode == 1, changed.stderr
    assert f"results/{DATASET}/report/results_table.csv: differs" in changed.stderr
