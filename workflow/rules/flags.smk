# CLI flags: the command-line flags and launchers of the `nnunet-core` commands, bound from
# nnunet_core.workflow.flags (built there from config, unit-tested). Included by common.smk.
import sys

from nnunet_core.workflow import devices as workflow_devices
from nnunet_core.workflow import flags
from nnunet_core.workflow import fold_reuse
from nnunet_core.cluster import gpu_slots, lsf, slurm, torchrun
from nnunet_core.layout.results import NO_RETRY_MARKER
from nnunet_core.training.trainer.lookup import consent_flag_for_trainer
from nnunet_core.runtime.cpus import default_num_workers
from nnunet_core.workflow import threads as job_threads
from nnunet_core.workflow.console import calm_console, job_message
from snakemake.logging import logger as snakemake_logger

FOLDS_ARGS = flags.folds_argument(FOLDS)
MODEL_FLAGS = flags.model_flags(PLANS_NAME, TRAINER)
ROOT_FLAGS = flags.root_flags(ROOTS)
# The test-set prediction runs the code a user's trainer model carries: the user named it.
MODEL_CODE_CONSENT = consent_flag_for_trainer(TRAINER)
# Cluster executor, or a job inside a cluster allocation (the same test as GPUS_PER_JOB's).
ON_CLUSTER = workflow.remote_exec or workflow.non_local_exec or bool(workflow.nodes)
# training.folds_per_gpu where the GPU slot locks apply (local GPU jobs), else 1.
FOLDS_PER_GPU = gpu_slots.folds_per_gpu_of_run(
    config["training"]["folds_per_gpu"], cluster=ON_CLUSTER, gpus_per_job=GPUS_PER_JOB
)
SURFACE_FLAGS = flags.surface_metric_flags(config["evaluation"])
# Each job's one console line in a live run (nnunet_core.workflow.console); dry runs: blocks.
_DRY_RUN = workflow.output_settings.dryrun
JOB = job_message(_DRY_RUN)
JOB_WITH_WILDCARDS = job_message(_DRY_RUN, wildcards=True)
TARGET_JOB = job_message(_DRY_RUN, log=False)
if not _DRY_RUN and workflow.is_main_process:
    calm_console(snakemake_logger)
# `threads` of the fold and prediction jobs, also their torch threads (OMP_NUM_THREADS):
# training.threads, else all of --cores for CPU jobs (Snakemake scales them down to --cores)
# and what the augmentation workers leave on GPU jobs (nnunet_core.workflow.threads).
# The rules also set OMP_WAIT_POLICY=PASSIVE (unless set): torch's threads then sleep instead of
# spinning while they wait, which on a busy machine (load 12 on 2 cores) kept a 2-thread
# prediction at the CPU time of 1 thread instead of 3.3 times it (docs/clusters.md).
_CPU_JOBS = GPUS_PER_JOB == 0 or DEVICE == "cpu"
_GPU_JOBS_AT_ONCE = job_threads.parallel_gpu_jobs(
    workflow_devices.requested_gpus(workflow.global_resources),
    workflow_devices.visible_gpu_count(),
    GPUS_PER_JOB,
    FOLDS_PER_GPU,
)
_RUN_CORES = workflow.resource_settings.cores
TRAIN_THREADS = job_threads.job_threads(
    config["training"]["threads"],
    cpu_jobs=_CPU_JOBS,
    cores=_RUN_CORES,
    cluster=ON_CLUSTER,
    parallel_gpu_jobs=_GPU_JOBS_AT_ONCE,
    workers=(
        default_num_workers()
        if config["training"]["num_workers"] is None
        else config["training"]["num_workers"]
    ),
)
PREDICT_THREADS = job_threads.job_threads(
    config["training"]["threads"],
    cpu_jobs=_CPU_JOBS,
    cores=_RUN_CORES,
    cluster=ON_CLUSTER,
    parallel_gpu_jobs=_GPU_JOBS_AT_ONCE // max(1, FOLDS_PER_GPU) or 1,
)


def synthetic_options():
    return flags.synthetic_options(config["dataset"]["synthetic"])


def planning_options():
    return flags.planning_options(config["planning"], PLANS_NAME)


def plan_overrides():
    return flags.plan_overrides(config["planning"])


def training_options():
    """The train command's flags, as a param Snakemake does not compare between runs (a param
    function taking `input` counts as derived from the inputs): a changed flag reruns a finished
    fold only through `fold_settings_trigger` (invalidating settings), never --save-every.
    """
    options = flags.training_options(config, PLANS_NAME, DEVICE)

    def not_a_rerun_trigger(wildcards, input):
        return options

    return not_a_rerun_trigger


def fold_settings_trigger():
    """The train rule's rerun trigger (nnunet_core.workflow.fold_reuse): changes with a setting
    that invalidates a trained fold (a user trainer's source and pretrained weights by sha256).
    """
    return fold_reuse.train_rerun_trigger(config, PRETRAINED)


def announce_fold_restarts():
    """Once, in the main process (a dry run too): one line per trained fold this run's
    settings invalidate; its job sets the folder aside and trains it again."""
    if not workflow.is_main_process:
        return
    for line in fold_reuse.fold_restart_lines(
        config,
        dataset=DATASET,
        results=RESULTS,
        trainer=TRAINER,
        plans_name=PLANS_NAME,
        folds=FOLDS,
        plans_file=PLANS,
        splits_file=SPLITS,
        pretrained=PRETRAINED,
    ):
        print(line, file=sys.stderr)


def pretrained_weights_flag():
    return flags.pretrained_weights_flag(PRETRAINED)


def training_launcher(wildcards, resources, threads):
    """The command that starts a fold: one process, `-num_gpus N`, or srun + torchrun, run by
    the retry runner (nnunet_core.cluster.retry; on a cluster with the fold's no_retry marker).
    """
    marker = FOLD_DIR / NO_RETRY_MARKER
    runner = flags.fold_retry_prefix(
        config["training"]["retries"],
        cluster=ON_CLUSTER,
        marker=str(marker).format(
            configuration=wildcards.configuration, fold=wildcards.fold
        ),
    )
    return runner + flags.training_launcher(
        config["training"],
        GPUS_PER_JOB,
        job_gpus=resources.gpu,
        cpus_per_gpu=resources.get("cpus_per_gpu"),
        threads=threads,
        rendezvous_id=torchrun.rendezvous_id(
            DATASET, wildcards.configuration, wildcards.fold
        ),
    )


def count_gpu_slots():
    """With folds sharing GPUs, make Snakemake's `gpu` resource count slots, k per GPU.

    Resources are integers, so a fold cannot ask for 1/k GPU: the user's `--resources gpu=K`
    (K GPUs, as always) becomes K*k slots; a fold job asks for gpus_per_job slots (one on each
    of its GPUs), a prediction job for one whole GPU (prediction_gpu_resource). Printed once.
    """
    requested = workflow_devices.requested_gpus(workflow.resource_settings.resources)
    notices = flags.gpu_slot_notices(
        config["training"]["folds_per_gpu"],
        FOLDS_PER_GPU,
        cluster=ON_CLUSTER,
        requested_gpus=requested,
    )
    if workflow.is_main_process:
        for notice in notices:
            print(notice, file=sys.stderr)
    slots = flags.gpu_slot_total(requested, FOLDS_PER_GPU)
    if slots is not None:
        workflow.register_resource("gpu", slots)


def folds_per_gpu_variable():
    return flags.folds_per_gpu_variable(FOLDS_PER_GPU)


def prediction_gpu_resource():
    return flags.prediction_gpu_resource(GPUS_PER_JOB, FOLDS_PER_GPU)


def prediction_slot_flags():
    """predict's `--gpu-slot`: a local prediction job takes its GPU through the fold jobs' slot
    locks. A param that is no rerun trigger (as training_options): the lock folder is the
    machine's business, not the predictions'."""
    slots = flags.prediction_slot_flags(
        config["training"], GPUS_PER_JOB, cluster=ON_CLUSTER
    )

    def not_a_rerun_trigger(wildcards, input):
        return slots

    return not_a_rerun_trigger


def training_job_resources():
    """`gpu`, and for training.nodes > 1 the SLURM job shape (nodes, tasks, gres, mpi); on GPUs
    `cpus_per_gpu`: each rank's augmentation workers plus one (a profile may override it).
    """
    resources = slurm.job_resources(int(config["training"]["nodes"]), GPUS_PER_JOB)
    if GPUS_PER_JOB > 0:
        resources["cpus_per_gpu"] = flags.fold_cpus_per_gpu(config["training"])
    return resources


def chosen_configurations_argument(wildcards):
    return flags.chosen_configurations_argument(planned()[1])


def test_summary_flag(wildcards):
    return flags.report_test_summary_flag(has_test_labels(), TEST_SUMMARY)


def test_set_note_flag(wildcards):
    return flags.report_test_set_note_flag(TEST_SET_NOTICE)


def staging_folder(wildcards, output):
    return staging_folder_of(output[0])


def prediction_settings(wildcards):
    """What a test-set prediction depends on besides its input files: a kept staging folder
    continues only under the same (nnunet_core.workflow.resumable_staging)."""
    return " ".join(
        [wildcards.configuration, MODEL_FLAGS, MODEL_CODE_CONSENT, FOLDS_ARGS, DEVICE]
    )


def previous_stage_flag(wildcards, input):
    return flags.previous_stage_flag(input.previous_stage)
