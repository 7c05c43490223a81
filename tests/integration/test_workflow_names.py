"""The workflow declares the very paths the commands write (one naming module for both).

The real ``crossval``, ``ensemble-cv`` and ``find-best-config`` commands run on the fake results
tree of ``tests/helpers/fake_results.py``; then a dry run of the real workflow on the same tree,
with those rules forced, lists what it declares. A name spelled differently in the workflow and in a
command (model folder, folds tag, crossval or ensemble folder, inference_information.json) makes
the two sets differ. The inputs the DAG needs before those rules exist and are older, so only the
forced rules run. A few seconds: no training, no preprocessing.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import yaml

from nnunet_core.cli import main
from nnunet_core.layout.preprocessed import FINGERPRINT_JSON, VERIFY_JSON
from nnunet_core.layout.results import (
    CHECKPOINT_BEST,
    CHECKPOINT_FINAL,
    CHECKPOINT_LATEST,
    POSTPROCESSED_FOLDER,
    SUMMARY_JSON,
    DatasetDirs,
    TrainedModel,
    fold_dir,
    inference_information_file,
    inference_instructions_file,
)
from nnunet_core.model import checkpoint
from tests.helpers.fake_results import DATASET, DATASET_JSON, exact, make_tree
from tests.helpers.workflow import REPO, snakemake

CONFIGURATIONS = ("2d", "3d_fullres")
FOLDS = ("0", "1", "2", "3", "4")
FORCED = ("crossval", "ensemble_cv", "select")
OLD = 1_000_000_000.0  # mtime of everything the forced rules' inputs depend on


def _workflow_inputs(work: Path, dirs: DatasetDirs) -> None:
    """What the DAG needs up to the fold outputs: raw dataset.json, checks, plans, preprocessing."""
    raw = work / "raw" / DATASET
    raw.mkdir(parents=True)
    (raw / "dataset.json").write_text(json.dumps(DATASET_JSON))
    plans = {
        "plans_name": "nnUNetPlans",
        "configurations": {c: {"data_identifier": f"data_{c}"} for c in CONFIGURATIONS},
    }
    (dirs.preprocessed / "nnUNetPlans.json").write_text(json.dumps(plans))
    for name in (VERIFY_JSON, FINGERPRINT_JSON):
        (dirs.preprocessed / name).write_text("{}")
    for configuration in CONFIGURATIONS:
        summary = dirs.preprocessed / f"data_{configuration}" / "preprocess_summary.json"
        summary.parent.mkdir()
        summary.write_text("{}")
        model_dir = dirs.model_dir(TrainedModel(configuration))
        for fold in FOLDS:
            (fold_dir(model_dir, fold) / checkpoint.FINAL).write_bytes(b"")
    for path in work.rglob("*"):
        os.utime(path, (OLD, OLD))


def _run_commands(work: Path) -> set[Path]:
    """The three selection commands, as the workflow calls them; returns what they wrote."""
    roots = ["--raw", str(work / "raw"), "--preprocessed", str(work / "preprocessed")]
    roots += ["--results", str(work / "results")]
    before = {p for p in work.rglob("*") if p.is_file()}
    for configuration in CONFIGURATIONS:
        assert main(["crossval", "-d", DATASET, "-c", configuration, "-f", *FOLDS, *roots]) == 0
    assert main(["ensemble-cv", "-d", DATASET, "-c", *CONFIGURATIONS, "-f", *FOLDS, *roots]) == 0
    assert (
        main(["find-best-config", "-d", DATASET, "-c", *CONFIGURATIONS, "-f", *FOLDS, *roots]) == 0
    )
    return {p for p in work.rglob("*") if p.is_file()} - before


def _declared_outputs(output: str) -> dict[str, set[Path]]:
    """Rule -> the outputs of its jobs, from a dry run's job list."""
    declared: dict[str, set[Path]] = {}
    for block in re.split(r"\n(?=(?:rule|checkpoint) \w+:)", output):
        header = re.match(r"(?:rule|checkpoint) (\w+):", block)
        outputs = re.search(r"^\s+output: (.+)$", block, re.MULTILINE)
        if header and outputs:
            paths = {Path(p) for p in outputs.group(1).split(", ")}
            declared.setdefault(header.group(1), set()).update(paths)
    return declared


def test_workflow_declares_what_the_commands_write(tmp_path: Path) -> None:
    work = tmp_path / "work"
    dirs = make_tree(work, {c: exact for c in CONFIGURATIONS})
    _workflow_inputs(work, dirs)
    written = _run_commands(work)

    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    config["work_dir"] = str(work)
    config["dataset"].update(id=901, name="Fake", raw_root=str(work / "raw"))
    config["dataset"]["synthetic"]["enabled"] = False
    config["planning"]["configurations"] = list(CONFIGURATIONS)
    config["training"]["folds"] = [int(f) for f in FOLDS]
    result = snakemake(
        tmp_path, config, "selected", "-n", "--rerun-triggers", "mtime", "--forcerun", *FORCED
    )
    declared = _declared_outputs(result.stdout + result.stderr)

    assert set(declared) == set(FORCED), declared
    summaries = {
        p for p in written if p.name == SUMMARY_JSON and p.parent.name != POSTPROCESSED_FOLDER
    }
    assert len(summaries) == 3  # two configurations and their ensemble
    assert declared["crossval"] | declared["ensemble_cv"] == summaries
    assert (
        declared["select"]
        == {
            inference_information_file(dirs.results),
            inference_instructions_file(dirs.results),
        }
        and declared["select"] <= written
    )


def test_checkpoint_names_match_the_trainer() -> None:
    """The workflow reads checkpoint names from layout.results (no torch), the trainer its own."""
    assert (checkpoint.FINAL, checkpoint.LATEST, checkpoint.BEST) == (
        CHECKPOINT_FINAL,
        CHECKPOINT_LATEST,
        CHECKPOINT_BEST,
    )
