# Shared helpers: config validation, the folder layout and every input function.
import json
import os
import sys
from pathlib import Path

from snakemake.utils import validate

from nnunet_core.workflow_config import (
    check_config,
    data_identifier_of,
    selected_configurations,
    validate_config,
)

# One line per wrong key first; then Snakemake's validation fills in the schema defaults.
validate_config(config, Path(workflow.basedir) / "config" / "schema.yaml")
validate(config, schema="../../config/schema.yaml")
check_config(config)

WORK = Path(config["work_dir"])
DATASET = f"Dataset{config['dataset']['id']:03d}_{config['dataset']['name']}"
SYNTHETIC = config["dataset"]["synthetic"].get("enabled", False)
RAW_ROOT = Path(config["dataset"]["raw_root"] or WORK / "raw")
RAW = RAW_ROOT / DATASET
PRE_ROOT = WORK / "preprocessed"
PRE = PRE_ROOT / DATASET
RESULTS_ROOT = WORK / "results"
LOGS = WORK / "logs" / DATASET
PLANS_NAME = config["planning"]["plans_name"]
PLANS = PRE / f"{PLANS_NAME}.json"
ROOT_FLAGS = f"--raw {RAW_ROOT} --preprocessed {PRE_ROOT} --results {RESULTS_ROOT}"
NUM_PROCESSES = config["processes"]["default"]
# Jobs find `nnunet-core` next to this interpreter, even from a venv that is not activated.
os.environ["PATH"] = (
    f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
)


wildcard_constraints:
    configuration=r"[A-Za-z0-9_]+",
    fold=r"\d+",


def raw_training_files(wildcards):
    """Every raw training file: touching one reruns the check, and through it what follows."""
    if SYNTHETIC:
        checkpoints.synthesize_dataset.get()
    files = [RAW / "dataset.json"]
    for folder in ("imagesTr", "labelsTr"):
        if (RAW / folder).is_dir():
            files += sorted(p for p in (RAW / folder).iterdir() if p.is_file())
    return files


def planned():
    """The plans (a checkpoint output) and the configurations chosen from them."""
    with open(checkpoints.plan.get().output.plans) as handle:
        plans = json.load(handle)
    return plans, selected_configurations(plans, config["planning"]["configurations"])


def configuration_per_identifier():
    """Data identifier -> first chosen configuration using it (shared data preprocess once)."""
    plans, chosen = planned()
    first = {}
    for name in chosen:
        first.setdefault(data_identifier_of(plans, name), name)
    return first


def preprocessing_targets(wildcards):
    return [
        PRE / identifier / "preprocess_summary.json"
        for identifier in configuration_per_identifier()
    ]


def configuration_of_identifier(wildcards):
    return configuration_per_identifier()[wildcards.data_identifier]


def all_targets(wildcards):
    return [
        PRE / "verify.json",
        PRE / "splits_final.json",
        *preprocessing_targets(wildcards),
    ]


def synthetic_options():
    """Command-line flags of `nnunet-core synthesize` from config dataset.synthetic."""
    options = config["dataset"]["synthetic"]
    flags = [
        f"--num-training {options['num_training']}",
        f"--num-test {options['num_test']}",
        f"--channels {options['channels']}",
        f"--seed {options['seed']}",
    ]
    if options.get("shape"):
        flags.append("--shape " + " ".join(str(v) for v in options["shape"]))
        if len(options["shape"]) == 2:
            flags.append("--2d")
    if options.get("spacing"):
        flags.append("--spacing " + " ".join(str(v) for v in options["spacing"]))
    return " ".join(flags)


def plan_overrides():
    """Inheriting configurations from config planning.overrides, as inline JSON."""
    return json.dumps(config["planning"]["overrides"])
