# CLI flags: the command-line flags and launchers of the `nnunet-core` commands, built from
# config. Included by common.smk.
import json
import shlex
import sys

from nnunet_core.workflow import devices as workflow_devices
from nnunet_core.cluster import gpu_slots, launch, lsf

FOLDS_ARGS = " ".join(str(f) for f in FOLDS)
MODEL_FLAGS = f"-p {PLANS_NAME} -tr {TRAINER}"
ROOT_FLAGS = f"--raw {RAW_ROOT} --preprocessed {PRE_ROOT} --results {RESULTS_ROOT}"
# Cluster executor, or a job inside a cluster allocation (the same test as GPUS_PER_JOB's).
ON_CLUSTER = workflow.remote_exec or workflow.non_local_exec or bool(workflow.nodes)
# training.folds_per_gpu where the GPU slot locks apply (local GPU jobs), else 1.
FOLDS_PER_GPU = gpu_slots.folds_per_gpu_of_run(
    config["training"]["folds_per_gpu"], cluster=ON_CLUSTER, gpus_per_job=GPUS_PER_JOB
)


def surface_metric_flags():
    """`--surface-metrics --nsd-tolerance ...` of evaluate, crossval and ensemble-cv, or ''."""
    options = config["evaluation"]
    if not options["surface_metrics"]:
        return ""
    tolerance = options["nsd_tolerance_mm"]
    if isinstance(tolerance, dict):
        values = [shlex.quote(f"{label}={mm}") for label, mm in tolerance.items()]
    else:
        values = [str(tolerance)]
    return "--surface-metrics --nsd-tolerance " + " ".join(values)


SURFACE_FLAGS = surface_metric_flags()


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


def pretrained_weights_flag():
    """` -pretrained_weights FILE` (training.pretrained_weights), or nothing. Beside `--c` it
    applies only while a fold has no checkpoint of its own: the first attempt starts from it,
    every retry and rerun continues from the fold's checkpoint."""
    if PRETRAINED is None:
        return ""
    return f" -pretrained_weights {shlex.quote(str(PRETRAINED.checkpoint))}"


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


def count_gpu_slots():
    """With folds sharing GPUs, make Snakemake's `gpu` resource count slots, k per GPU.

    Resources are integers, so a fold cannot ask for 1/k GPU: the user's `--resources gpu=K`
    (K GPUs, as always) becomes K*k slots; a fold job asks for gpus_per_job slots (one on each
    of its GPUs), a prediction job for whole GPUs (prediction_gpu_resource). Printed once.
    """
    requested = workflow_devices.requested_gpus(workflow.resource_settings.resources)
    notices = [
        gpu_slots.cluster_notice(
            config["training"]["folds_per_gpu"], cluster=ON_CLUSTER
        ),
        gpu_slots.slot_notice(requested, FOLDS_PER_GPU),
    ]
    if workflow.is_main_process:
        for notice in filter(None, notices):
            print(notice, file=sys.stderr)
    if FOLDS_PER_GPU > 1 and requested > 0:
        workflow.register_resource("gpu", requested * FOLDS_PER_GPU)


def folds_per_gpu_variable():
    """`nnUNet_folds_per_gpu=k ` before the train command when folds share GPUs (the slot locks
    read it), else nothing."""
    if FOLDS_PER_GPU == 1:
        return ""
    return f"{gpu_slots.FOLDS_PER_GPU_ENV}={FOLDS_PER_GPU} "


def prediction_gpu_resource():
    """A prediction job's `gpu`: whole GPUs, which are FOLDS_PER_GPU slots each."""
    return GPUS_PER_JOB * FOLDS_PER_GPU


def training_job_resources():
    """`gpu`, and for training.nodes > 1 the SLURM job shape (nodes, tasks, gres, mpi)."""
    return launch.job_resources(int(config["training"]["nodes"]), GPUS_PER_JOB)


def lsf_options(resumable):
    """The `lsf_extra` resource of a GPU rule: its bsub options, from the config, because the
    LSF plugin maps no `gpu` resource and a profile cannot read gpus_per_job; `resumable` (train)
    adds LSF's warning action with the configured stop signal. Other executors ignore it.
    """
    signal_name = stop_signal.configured_name() if resumable else None
    return lsf.bsub_extra(GPUS_PER_JOB, signal_name)


def chosen_configurations_argument(wildcards):
    return " ".join(planned()[1])


def test_summary_flag(wildcards):
    if not has_test_labels():
        return ""
    return f"--test-summary {TEST_SUMMARY}"


def staging_folder(wildcards, output):
    """Where a rule writing a folder writes it before the rename onto its output (predict.smk)."""
    return staging_folder_of(output[0])


def previous_stage_flag(wildcards, input):
    """`-prev_stage_predictions DIR ` for a cascade stage's prediction (predict.smk), else nothing."""
    if not input.previous_stage:
        return ""
    return f"-prev_stage_predictions {input.previous_stage} "
