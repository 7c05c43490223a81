"""The command-line flags and launchers of the ``nnunet-core`` commands the workflow's rules run.

Built from the config (and the run settings derived from it) while the Snakefile is parsed; the
run context (``run_context.RunContext``) calls them, and the rules bind its values and methods
to their params. Kept here, pure and typed, so that every flag is
unit-tested (tests/unit/workflow/test_workflow_flags.py) instead of only through whole runs.

Each string goes into a rule's shell as it is (a rule quotes its single values with ``:q``, not
these): every value in it is shell-quoted here (``word``, ``option``), so that a path or name
from a config (spaces, quotes, ``$(...)``, ``;``) reaches the command as one argument and never
runs (tests/unit/workflow/test_shell_quoting.py).
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nnunet_core.cluster import gpu_slots, local, retry, slurm
from nnunet_core.layout.roots import Roots
from nnunet_core.runtime.cpus import MAX_DEFAULT_WORKERS
from nnunet_core.tracking.choice import embedded_mlflow_uri
from nnunet_core.training.fold import settings_table
from nnunet_core.workflow.pretrained import PretrainedWeights


def word(value: Any) -> str:
    """``value`` as one shell word (``shlex.quote``; a safe value stays as it is)."""
    return shlex.quote(str(value))


def option(flag: str, value: Any) -> str:
    """``FLAG VALUE`` as shell words; a value starting with ``-`` (which argparse would read as
    an option) as the one word ``FLAG=VALUE``, which argparse splits back."""
    text = str(value)
    if text.startswith("-"):
        return word(f"{flag}={text}")
    return f"{flag} {word(text)}"


def words(values: Iterable[Any]) -> str:
    """Several values, each one shell word, space-separated."""
    return " ".join(word(value) for value in values)


def folds_argument(folds: Iterable[Any]) -> str:
    """``-f``'s values: the folds, space-separated (``0 1 all``)."""
    return words(folds)


def model_flags(plans_name: str, trainer: str) -> str:
    """Which trained model a command reads: ``-p PLANS -tr TRAINER``."""
    return f"{option('-p', plans_name)} {option('-tr', trainer)}"


def root_flags(roots: Roots) -> str:
    """The three trees every command reads or writes, as flags (not environment variables)."""
    return " ".join(
        [
            option("--raw", roots.raw),
            option("--preprocessed", roots.preprocessed),
            option("--results", roots.results),
        ]
    )


def surface_metric_flags(evaluation: Mapping[str, Any]) -> str:
    """``--surface-metrics --nsd-tolerance ...`` of evaluate, crossval and ensemble-cv, or ''.

    A per-label tolerance (``{liver: 2, tumour: 1}``) becomes quoted ``label=mm`` pairs.
    """
    if not evaluation["surface_metrics"]:
        return ""
    tolerance = evaluation["nsd_tolerance_mm"]
    if isinstance(tolerance, dict):
        values = [f"{label}={mm}" for label, mm in tolerance.items()]
    else:
        values = [tolerance]
    return "--surface-metrics --nsd-tolerance " + words(values)


def synthetic_options(synthetic: Mapping[str, Any]) -> str:
    """Flags of ``nnunet-core synthesize`` from config ``dataset.synthetic``; a 2-D shape adds
    ``--2d``."""
    flags = [
        option("--num-training", synthetic["num_training"]),
        option("--num-test", synthetic["num_test"]),
        option("--channels", synthetic["channels"]),
        option("--seed", synthetic["seed"]),
    ]
    if synthetic.get("lesion_scale", 1.0) != 1.0:  # 1.0: today's command line, unchanged
        flags.append(option("--lesion-scale", synthetic["lesion_scale"]))
    shape = synthetic.get("shape")
    if shape:
        flags.append("--shape " + words(shape))
        if len(shape) == 2:
            flags.append("--2d")
    spacing = synthetic.get("spacing")
    if spacing:
        flags.append("--spacing " + words(spacing))
    return " ".join(flags)


def planning_options(planning: Mapping[str, Any], plans_name: str) -> str:
    """Flags of ``nnunet-core plan``: planner, plans name, and the GPU memory target if set."""
    flags = [option("-pl", planning["planner"]), option("--plans-name", plans_name)]
    if planning.get("gpu_memory_target_gb") is not None:
        flags.append(option("--gpu-memory-target", planning["gpu_memory_target_gb"]))
    return " ".join(flags)


def plan_overrides(planning: Mapping[str, Any]) -> str:
    """Inheriting configurations from config ``planning.overrides``, as inline JSON (one value:
    the rule quotes it with ``:q``)."""
    return json.dumps(planning["overrides"])


TRAINING_VALUE_FLAGS = (
    "training.epochs",
    "training.iterations_per_epoch",
    "training.val_iterations_per_epoch",
    "training.save_every",
    "seed",
    "training.stop_margin",
)


def training_options(config: Mapping[str, Any], plans_name: str, device: str) -> str:
    """Flags of ``nnunet-core train`` from config ``training`` (the same for every fold), with
    the run's ``seed`` and ``deterministic``."""
    training = config["training"]
    flags = [
        option("-tr", training["trainer"]),
        option("-p", plans_name),
        option("-device", device),
    ]
    flags += [  # flag names from the settings table (nnunet_core.training.fold.settings_table)
        option(settings_table.flag_of(key), settings_table.config_value(config, key))
        for key in TRAINING_VALUE_FLAGS
    ]
    if config.get("deterministic", False):
        flags.append("--deterministic")
    if training.get("num_workers") is not None:
        flags.append(option("--num-workers", training["num_workers"]))
    if training.get("npz", True):
        flags.append("--npz")
    if training.get("gpu_lock_dir"):
        flags.append(gpu_lock_dir_flag(training))
    return " ".join(flags + tracking_flags(config))


def tracking_flags(config: Mapping[str, Any]) -> list[str]:
    """``--tracking*`` of config ``tracking``; none for ``backend: none`` (upstream's
    ``nnUNet_wandb_enabled`` still applies then, as to the command). MLflow without ``uri``:
    the embedded store ``work_dir/mlflow.db`` (absolute: the jobs run in the fold's folder)."""
    tracking = config.get("tracking") or {}
    backend = tracking.get("backend", "none")
    if backend == "none":
        return []
    uri = tracking.get("uri")
    if backend == "mlflow" and not uri:
        uri = embedded_mlflow_uri(Path(config["work_dir"]))
    values = {
        "--tracking": backend,
        "--tracking-uri": uri,
        "--tracking-experiment": tracking.get("experiment"),
        "--tracking-mode": tracking.get("mode"),
    }
    flags = [option(flag, value) for flag, value in values.items() if value]
    flags += [option("--tracking-tag", f"{k}={v}") for k, v in (tracking.get("tags") or {}).items()]
    return flags


def gpu_lock_dir_flag(training: Mapping[str, Any]) -> str:
    """``--gpu-lock-dir DIR`` (training.gpu_lock_dir) of train and predict, or nothing."""
    if not training.get("gpu_lock_dir"):
        return ""
    return option("--gpu-lock-dir", training["gpu_lock_dir"])


def pretrained_weights_flag(pretrained: PretrainedWeights | None) -> str:
    """`` -pretrained_weights FILE`` (training.pretrained_weights), or nothing.

    Beside ``--c`` it applies only while a fold has no checkpoint of its own: the first attempt
    starts from it, every retry and rerun continues from the fold's checkpoint.
    """
    if pretrained is None:
        return ""
    return " " + option("-pretrained_weights", pretrained.checkpoint)


def training_launcher(
    training: Mapping[str, Any],
    gpus_per_job: int,
    *,
    job_gpus: int,
    cpus_per_gpu: int | None,
    threads: int,
    rendezvous_id: str,
) -> str:
    """The command that starts a fold: ``nnunet-core train``, with ``-num_gpus N`` on one node
    with several GPUs (``job_gpus``, the job's ``gpu`` resource; ``cluster.local``), or srun +
    torchrun over ``training.nodes`` nodes (rendezvous ``rendezvous_id``; ``cluster.slurm``)."""
    nodes = int(training["nodes"])
    if nodes <= 1:
        return local.single_node_command(int(job_gpus))
    return slurm.multi_node_command(
        nodes,
        gpus_per_job,
        slurm.cpus_per_node(gpus_per_job, cpus_per_gpu, threads),
        rdzv_id=rendezvous_id,
        rdzv_endpoint=training.get("rdzv_endpoint"),
    )


def fold_retry_prefix(retries: int, *, cluster: bool, marker: str | os.PathLike) -> str:
    """The retry runner before a fold's command (``cluster.retry``). A local run retries there,
    by exit status (``training.retries`` further attempts, only where a retry can help); on a
    cluster the main Snakemake resubmits instead (the runner retries nothing in an allocation
    whose walltime is nearly spent) and the runner leaves ``marker`` after a failure that a
    retry cannot help, so that the resubmitted attempt ends at once."""
    if cluster:
        return retry.command_prefix(0, marker)
    return retry.command_prefix(retries)


def fold_data_workers(training: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> int:
    """Augmentation workers each rank of a fold starts: ``training.num_workers``, else
    ``$nnUNet_n_proc_DA`` (sbatch passes the submitting shell's environment on), else the
    trainer's default of 12 (its min(CPUs, 12) is 12 once the job has 13 CPUs)."""
    if training.get("num_workers") is not None:
        return int(training["num_workers"])
    value = environ.get("nnUNet_n_proc_DA", "").strip()
    if value.isdigit():
        return int(value)
    return MAX_DEFAULT_WORKERS


def fold_cpus_per_gpu(training: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> int:
    """CPUs a fold job asks SLURM for per GPU (``cpus_per_gpu``; one rank per GPU): one per
    augmentation worker the rank starts plus one for the trainer itself. The validation workers
    (half as many) are not counted: they idle while training runs, and the training workers
    idle while validation runs."""
    return fold_data_workers(training, environ) + 1


def gpu_slot_notices(
    folds_per_gpu_setting: int, folds_per_gpu: int, *, cluster: bool, requested_gpus: int
) -> list[str]:
    """What the workflow prints once about GPU sharing: the setting ignored on a cluster, and
    how ``--resources gpu=K`` becomes K*k slots (``RunContext.register_gpu_slots``)."""
    notices = [
        gpu_slots.cluster_notice(folds_per_gpu_setting, cluster=cluster),
        gpu_slots.slot_notice(requested_gpus, folds_per_gpu),
    ]
    return [notice for notice in notices if notice]


def gpu_slot_total(requested_gpus: int, folds_per_gpu: int) -> int | None:
    """The ``gpu`` resource to register when folds share GPUs (K GPUs are K*k slots), else None
    (Snakemake's own count stands)."""
    if folds_per_gpu > 1 and requested_gpus > 0:
        return requested_gpus * folds_per_gpu
    return None


def folds_per_gpu_variable(folds_per_gpu: int) -> str:
    """``nnUNet_folds_per_gpu=k `` before the train command when folds share GPUs (the slot
    locks read it), else nothing."""
    if folds_per_gpu == 1:
        return ""
    return f"{gpu_slots.FOLDS_PER_GPU_ENV}={folds_per_gpu} "


def prediction_gpu_resource(gpus_per_job: int, folds_per_gpu: int) -> int:
    """A prediction job's ``gpu``: one whole GPU (``folds_per_gpu`` slots), whatever a fold's
    ``gpus_per_job``: prediction runs on one device, so a second GPU would idle; none on the CPU."""
    return min(gpus_per_job, 1) * folds_per_gpu


def prediction_slot_flags(training: Mapping[str, Any], gpus_per_job: int, *, cluster: bool) -> str:
    """``--gpu-slot [--gpu-lock-dir DIR] `` of a local prediction job with a ``gpu`` resource:
    it takes its GPU through the fold jobs' slot locks (Snakemake only counts). Nothing on the
    CPU, nor under a cluster executor, whose scheduler gives each job its GPUs."""
    if cluster or gpus_per_job == 0:
        return ""
    return " ".join(f for f in ("--gpu-slot", gpu_lock_dir_flag(training)) if f) + " "


def chosen_configurations_argument(chosen: Sequence[str]) -> str:
    """``find-best-config -c``'s values: the configurations chosen from the plans."""
    return words(chosen)


def report_test_summary_flag(has_test_labels: bool, test_summary: str | Path) -> str:
    """``--test-summary FILE`` of the report where the test set has labels, else ''."""
    if not has_test_labels:
        return ""
    return option("--test-summary", test_summary)


def report_test_set_note_flag(notice: str | None) -> str:
    """``--test-set-note TEXT`` of the report, saying why the test set has no summary, else ''."""
    if notice is None:
        return ""
    return option("--test-set-note", notice)


def previous_stage_flag(previous_stage: str | Path | Sequence[str]) -> str:
    """``-prev_stage_predictions DIR `` for a cascade stage's prediction, else nothing.

    ``previous_stage`` is the rule's named input: one folder (a string) or a list of one."""
    if not previous_stage:
        return ""
    folders = [previous_stage] if isinstance(previous_stage, str | Path) else list(previous_stage)
    return " ".join(option("-prev_stage_predictions", folder) for folder in folders) + " "
