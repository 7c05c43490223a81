# Shared helpers: config validation, the folder layout and every input function.
import json
import os
import sys
from pathlib import Path

import yaml
from snakemake.utils import validate

from nnunet_core.workflow_config import (
    check_config,
    coerce_command_line_values,
    data_identifier_of,
    selected_configurations,
    validate_config,
)
from nnunet_core import workflow_devices
from nnunet_core.planning.planner import get_preset
from nnunet_core.training.signals import ignore_stop_signal
from nnunet_core.cluster import launch

# SIGUSR1 is the "stop before the walltime" signal (SLURM `--signal=USR1@T` reaches every
# process of the job step). Snakemake has no handler for it and would die, so every Snakemake
# process that parses this file ignores it; the rule's shell inherits "ignored" (kept through
# fork and exec) and the trainer installs its own handler, so only the trainer reacts.
ignore_stop_signal()

# `--config` values arrive as strings ('4', 'true'): typed by the schema first. Then one line per
# wrong key; then Snakemake's validation fills in the schema defaults (upstream's method).
SCHEMA_FILE = Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml"
coerce_command_line_values(
    config, workflow.config_settings.config, yaml.safe_load(SCHEMA_FILE.read_text())
)
validate_config(config, SCHEMA_FILE)
validate(config, schema="../schemas/config.schema.yaml")
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
PLANS_NAME = (
    config["planning"]["plans_name"]
    or get_preset(config["planning"]["planner"]).plans_name
)
PLANS = PRE / f"{PLANS_NAME}.json"
TRAINER = config["training"]["trainer"]
MODEL_DIR = RESULTS_ROOT / DATASET / f"{TRAINER}__{PLANS_NAME}__{{configuration}}"
FOLD_DIR = MODEL_DIR / "fold_{fold}"
RESULTS = RESULTS_ROOT / DATASET
REPORT = RESULTS / "report"
PREDICTIONS = WORK / "predictions" / DATASET
FOLDS = config["training"]["folds"]
FOLDS_TAG = "_".join(str(f) for f in FOLDS)
FOLDS_ARGS = " ".join(str(f) for f in FOLDS)
MODEL_FLAGS = f"-p {PLANS_NAME} -tr {TRAINER}"
CROSSVAL_SUMMARY = MODEL_DIR / f"crossval_results_folds_{FOLDS_TAG}" / "summary.json"
ENSEMBLE_CV_DIR = (
    RESULTS
    / "ensembles"
    / (
        f"ensemble___{TRAINER}__{PLANS_NAME}__{{first}}"
        f"___{TRAINER}__{PLANS_NAME}__{{second}}___{FOLDS_TAG}"
    )
)
ROOT_FLAGS = f"--raw {RAW_ROOT} --preprocessed {PRE_ROOT} --results {RESULTS_ROOT}"
NUM_PROCESSES = config["processes"]["default"]
# The `gpu` resource of each fold (and prediction) job; null: one GPU per job where GPUs exist.
GPUS_PER_JOB = workflow_devices.gpus_per_fold_job(
    config["training"]["gpus_per_job"],
    # The Snakefile is parsed before the executor is known; `--jobs` (the profile's `jobs:`) is
    # set for cluster executors only (locally Snakemake turns it into --cores), dry runs too.
    cluster=workflow.remote_exec or workflow.non_local_exec or bool(workflow.nodes),
    requested=workflow_devices.requested_gpus(workflow.global_resources),
    visible=workflow_devices.visible_gpu_count(),
)
DEVICE = config["training"]["device"]
if workflow.is_main_process:
    _cpu_warning = workflow_devices.cpu_schedule_warning(
        DEVICE,
        GPUS_PER_JOB,
        config["training"]["epochs"],
        config["training"]["iterations_per_epoch"],
    )
    if _cpu_warning:
        print(_cpu_warning, file=sys.stderr)
# Jobs find `nnunet-core` next to this interpreter, even from a venv that is not activated.
os.environ["PATH"] = (
    f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
)


wildcard_constraints:
    configuration=r"[A-Za-z0-9_]+",
    fold=r"\d+|all",
    first=r"[A-Za-z0-9_]+?",
    second=r"[A-Za-z0-9_]+?",


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


def planning_options():
    """Flags of `nnunet-core plan`: planner, plans name, and the GPU memory target if set."""
    options = config["planning"]
    flags = [f"-pl {options['planner']}", f"--plans-name {PLANS_NAME}"]
    if options.get("gpu_memory_target_gb") is not None:
        flags.append(f"--gpu-memory-target {options['gpu_memory_target_gb']}")
    return " ".join(flags)


def plan_overrides():
    """Inheriting configurations from config planning.overrides, as inline JSON."""
    return json.dumps(config["planning"]["overrides"])


def preprocessed_data_of_configuration(wildcards):
    """The preprocessing summary of the data a configuration trains on."""
    plans, _ = planned()
    return (
        PRE
        / data_identifier_of(plans, wildcards.configuration)
        / "preprocess_summary.json"
    )


def training_options():
    """Flags of `nnunet-core train` from config.training (the same for every fold)."""
    options = config["training"]
    flags = [
        f"-tr {options['trainer']}",
        f"-p {PLANS_NAME}",
        f"-device {DEVICE}",
        f"--epochs {options['epochs']}",
        f"--iterations {options['iterations_per_epoch']}",
        f"--val-iterations {options['val_iterations_per_epoch']}",
        f"--save-every {options['save_every']}",
        f"--seed {config['seed']}",
        f"--stop-margin {options['stop_margin']}",
    ]
    if config.get("deterministic", False):
        flags.append("--deterministic")
    if options.get("num_workers") is not None:
        flags.append(f"--num-workers {options['num_workers']}")
    if options.get("npz", True):
        flags.append("--npz")
    if options.get("gpu_lock_dir"):
        flags.append(f"--gpu-lock-dir {options['gpu_lock_dir']}")
    return " ".join(flags)


def training_launcher(wildcards, resources, threads):
    """The command that starts a fold (nnunet_core.cluster.launch): `nnunet-core train`, with
    `-num_gpus N` on one node with several GPUs, or srun + torchrun over training.nodes nodes.
    """
    nodes = int(config["training"]["nodes"])
    gpus = GPUS_PER_JOB
    if nodes <= 1:
        return launch.single_node_command(int(resources.gpu))
    return launch.multi_node_command(
        nodes,
        gpus,
        launch.cpus_per_node(gpus, resources.get("cpus_per_gpu"), threads),
        rdzv_id=f"{DATASET}_{wildcards.configuration}_{wildcards.fold}",
        rdzv_endpoint=config["training"].get("rdzv_endpoint"),
    )


def training_job_resources():
    """`gpu`, and for training.nodes > 1 the SLURM job shape (nodes, tasks, gres, mpi)."""
    return launch.job_resources(int(config["training"]["nodes"]), GPUS_PER_JOB)


def training_targets(wildcards):
    """checkpoint_final.pth and the validation summary of every chosen configuration and fold."""
    _, chosen = planned()
    return [
        path
        for configuration in chosen
        for fold in config["training"]["folds"]
        for path in (
            str(FOLD_DIR / "checkpoint_final.pth").format(
                configuration=configuration, fold=fold
            ),
            str(FOLD_DIR / "validation" / "summary.json").format(
                configuration=configuration, fold=fold
            ),
        )
    ]


def model_path(pattern, configuration, fold=None):
    return str(pattern).format(configuration=configuration, fold=fold)


def fold_summaries(wildcards):
    """Every fold's validation summary of one configuration."""
    return [
        model_path(
            FOLD_DIR / "validation" / "summary.json", wildcards.configuration, fold
        )
        for fold in FOLDS
    ]


def fold_checkpoints(wildcards):
    return [
        model_path(FOLD_DIR / "checkpoint_final.pth", wildcards.configuration, fold)
        for fold in FOLDS
    ]


def crossval_summary(configuration):
    return model_path(CROSSVAL_SUMMARY, configuration)


def chosen_configurations_argument(wildcards):
    return " ".join(planned()[1])


def crossval_summary_of_pair(wildcards):
    return [crossval_summary(wildcards.first), crossval_summary(wildcards.second)]


def crossval_and_ensemble_summaries(wildcards):
    """Every single configuration's and every pair ensemble's cross-validation summary."""
    _, chosen = planned()
    singles = [crossval_summary(c) for c in chosen]
    pairs = [
        str(ENSEMBLE_CV_DIR / "summary.json").format(first=a, second=b)
        for i, a in enumerate(chosen)
        for b in chosen[i + 1 :]
    ]
    return singles + pairs


def selection():
    with open(checkpoints.select.get().output.information) as handle:
        return json.load(handle)


def winner_configurations():
    """Configurations of the selected model or ensemble."""
    chosen = selection()["best_model_or_ensemble"]["selected_model_or_models"]
    return [model["configuration"] for model in chosen]


def selected_prediction_folders(wildcards):
    return [PREDICTIONS / c for c in winner_configurations()]


def winner_prediction_folder(wildcards):
    """The ensemble's folder, or the single selected configuration's."""
    members = winner_configurations()
    return PREDICTIONS / ("ensemble" if len(members) > 1 else members[0])


def postprocessing_file(wildcards):
    return selection()["best_model_or_ensemble"]["postprocessing_file"]


def has_test_set():
    """Synthetic data always has labelsTs; real data only if the folder exists."""
    if SYNTHETIC:
        return config["dataset"]["synthetic"]["num_test"] > 0
    return (RAW / "imagesTs").is_dir()


def has_test_labels():
    return has_test_set() and (SYNTHETIC or (RAW / "labelsTs").is_dir())


def final_targets(wildcards):
    targets = [REPORT / "report.md"]
    if has_test_set():
        targets.append(PREDICTIONS / "final")
    return targets


def test_summary_if_any(wildcards):
    return [PREDICTIONS / "test_summary.json"] if has_test_labels() else []


def test_summary_flag(wildcards):
    if not has_test_labels():
        return ""
    return f"--test-summary {PREDICTIONS / 'test_summary.json'}"


def test_dice_figure():
    """The test-set figure exists only when the test set has labels (an output list may be empty)."""
    if not has_test_labels():
        return []
    return report(
        REPORT / "test_dice.png", caption="../report/test_dice.rst", category="Test set"
    )
