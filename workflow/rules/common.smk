# The one entry run.smk includes first: process-wide setup, config validation, the run
# settings derived from config, then the helpers by concern:
#   paths.smk   every path of the raw, preprocessed, results and predictions trees
#   inputs.smk  input functions (what a rule needs, often read from the plans or the selection)
#   flags.smk   command-line flags and launchers of the `nnunet-core` commands
import os
import sys
from pathlib import Path

from snakemake.utils import validate

from nnunet_core.workflow.config import Execution, check_config, fold_count
from nnunet_core.cluster import stop_signal
from nnunet_core.workflow import devices as workflow_devices
from nnunet_core.workflow import resource_owner, work_lock
from nnunet_core.workflow import fold_weights

# The stop signal (SIGUSR1, or $NNUNET_STOP_SIGNAL) asks a training to stop before the walltime;
# SLURM sends it to every process of the job step. This process plays the Snakemake role of
# nnunet_core.cluster.stop_signal: it exports the setting (the profile's --signal and every job read it)
# and ignores the signal, and so does the rule's shell (inherited); only the trainer reacts.
stop_signal.for_workflow_process()

# The Snakefile typed `--config` values and checked every key; Snakemake's validation fills in
# the schema defaults (upstream's method).
validate(config, schema="../schemas/config.schema.yaml")
# (also: the work_dir apart from the raw data, paths no quoting makes safe refused)
check_config(config, Execution.of_workflow(workflow))
# The config owns a fold job's memory, time, GPUs and threads: a profile's or the command line's
# set-resources of them is said once, a GPU count against training.gpus_per_job refused.
if workflow.is_main_process:
    resource_owner.announce(config, workflow)
# One workflow per work_dir, also when started from another --directory (nnunet_core.workflow.work_lock).
work_lock.lock_when_started(workflow, config["work_dir"])

SYNTHETIC = config["dataset"]["synthetic"].get("enabled", False)
TRAINER = config["training"]["trainer"]
FOLDS = config["training"]["folds"]
# Folds of the splits (0..n-1): a cascade fold reads the previous stage's exports of them all.
NUM_SPLIT_FOLDS = fold_count(config)[0]
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
    workflow_devices.print_once(_cpu_warning)
# Jobs find `nnunet-core` next to this interpreter, even from a venv that is not activated.
os.environ["PATH"] = (
    f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
)


include: "paths.smk"
include: "inputs.smk"
include: "flags.smk"
