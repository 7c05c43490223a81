"""One run's context: everything the rules of one (dataset, seed) run read, built once.

common.smk builds it (``RUN = RunContext.of_workflow(config, workflow, checkpoints)``) after the
config is checked, and every rule reads from that one object: the dataset, the paths
(``RUN.paths``, ``run_paths``), the input functions (``RUN.inputs``, ``run_inputs``), the GPU
count of a fold job, whether this is a cluster run, the job threads, the console messages, and
the flags of the ``nnunet-core`` commands. A rule's command is at most two hops away: the rule
names a method here, which calls the builder in ``nnunet_core.workflow.flags`` (pure, unit-tested;
the scheduler modules in ``nnunet_core.cluster`` are called from there). paper.smk loads run.smk
as one Snakemake module per (dataset, seed, method), and each module builds its own context.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nnunet_core.cluster import gpu_slots, slurm, torchrun
from nnunet_core.layout.results import NO_RETRY_MARKER
from nnunet_core.layout.work import staging_folder_of
from nnunet_core.planning.user_planner import default_plans_name
from nnunet_core.runtime.cpus import default_num_workers
from nnunet_core.training.trainer.lookup import consent_flag_for_trainer
from nnunet_core.workflow import devices, flags, fold_reuse, inputs
from nnunet_core.workflow import threads as job_threads
from nnunet_core.workflow.config import fold_count
from nnunet_core.workflow.console import calm_console, job_message
from nnunet_core.workflow.planner_checks import data_identifier_pattern
from nnunet_core.workflow.pretrained import PretrainedWeights, resolve_pretrained_weights
from nnunet_core.workflow.run_inputs import RunInputs
from nnunet_core.workflow.run_paths import RunPaths
from nnunet_core.workflow.runs import incomplete_test_set_notice


def _not_a_rerun_trigger(value: str) -> Callable[[Any, Any], str]:
    """``value`` as a param function taking ``input``: Snakemake counts such a param as derived
    from the inputs and does not compare it between runs (a changed value reruns nothing)."""

    def not_a_rerun_trigger(_wildcards: Any, input: Any) -> str:  # noqa: ARG001 - Snakemake's name
        return value

    return not_a_rerun_trigger


@dataclass(frozen=True)
class JobMessages:
    """Each job's one console line in a live run (``console``); None in dry runs: blocks."""

    job: str | None
    with_wildcards: str | None
    target: str | None

    @classmethod
    def of_dry_run(cls, dry_run: bool) -> JobMessages:
        return cls(
            job_message(dry_run),
            job_message(dry_run, wildcards=True),
            job_message(dry_run, log=False),
        )


@dataclass(frozen=True)
class RunFlags:
    """Flags that are the same for every job of the run, each value shell-quoted (``flags``)."""

    folds: str
    model: str
    roots: str
    surface: str
    # the test-set prediction runs the code a user's trainer model carries: the user named it
    model_code_consent: str


@dataclass(frozen=True, eq=False)
class RunContext:
    """The run's values (``of_workflow``) and the params its rules bind (methods)."""

    config: dict[str, Any]
    dataset: str
    trainer: str
    folds: Sequence[Any]
    plans_name: str
    # folds of the splits (0..n-1): a cascade fold reads the previous stage's exports of them all
    num_split_folds: int
    processes: int
    device: str
    synthetic: bool
    # dataset.msd: the MSD task the first job (convert_msd) converts into the raw root, or None
    msd_task: str | None
    # with methods, a planner other than the baseline's writes dataset.json undeclared
    declares_dataset_json: bool
    paths: RunPaths
    # training.pretrained_weights: the checkpoint every fold's first attempt starts from
    pretrained: PretrainedWeights | None
    on_cluster: bool
    # this process is a job's own Snakemake on a cluster (the main one resubmits)
    remote_job: bool
    # the `gpu` resource of each fold job; null in the config: one GPU per job where GPUs exist
    gpus_per_job: int
    # training.folds_per_gpu where the GPU slot locks apply (local GPU jobs), else 1
    folds_per_gpu: int
    # `--resources gpu=K` as given (before register_gpu_slots makes it K*k slots)
    requested_gpus: int
    train_threads: int
    predict_threads: int
    dry_run: bool
    is_main_process: bool
    messages: JobMessages
    flags: RunFlags
    inputs: RunInputs
    test_set_notice: str | None

    @classmethod
    def of_workflow(cls, config: dict[str, Any], workflow: Any, checkpoints: Any) -> RunContext:
        """The context of the run ``config`` (checked, defaults filled in) describes, under
        Snakemake's ``workflow`` (its executor, ``--cores``, ``--resources``, dry run) and its
        ``checkpoints`` (what the input functions read)."""
        from snakemake.logging import logger

        training = config["training"]
        trainer, folds = training["trainer"], training["folds"]
        planning = config["planning"]
        plans_name = planning["plans_name"] or default_plans_name(planning["planner"])
        paths = RunPaths.of_config(config, plans_name, trainer, folds)
        on_cluster = devices.on_cluster(workflow)
        visible = devices.visible_gpu_count()
        running = devices.requested_gpus(workflow.global_resources)
        gpus_per_job = devices.gpus_per_fold_job(
            training["gpus_per_job"], cluster=on_cluster, requested=running, visible=visible
        )
        folds_per_gpu = gpu_slots.folds_per_gpu_of_run(
            training["folds_per_gpu"], cluster=on_cluster, gpus_per_job=gpus_per_job
        )
        # `threads` of the fold and prediction jobs, also their torch threads (threads module)
        cpu_jobs = gpus_per_job == 0 or training["device"] == "cpu"
        at_once = job_threads.parallel_gpu_jobs(running, visible, gpus_per_job, folds_per_gpu)
        cores = workflow.resource_settings.cores
        workers = training["num_workers"]
        dry_run = bool(workflow.output_settings.dryrun)
        num_split_folds = fold_count(config)[0]
        return cls(
            config=config,
            dataset=paths.dataset,
            trainer=trainer,
            folds=folds,
            plans_name=plans_name,
            num_split_folds=num_split_folds,
            processes=config["processes"]["default"],
            device=training["device"],
            synthetic=config["dataset"]["synthetic"].get("enabled", False),
            msd_task=config["dataset"].get("msd"),
            declares_dataset_json=config.get("method", {}).get("writes_dataset_json", True),
            paths=paths,
            # from a model zip it is extracted into work_dir/pretrained (checked by check_config)
            pretrained=resolve_pretrained_weights(training["pretrained_weights"], paths.work),
            on_cluster=on_cluster,
            remote_job=bool(workflow.remote_exec),
            gpus_per_job=gpus_per_job,
            folds_per_gpu=folds_per_gpu,
            requested_gpus=devices.requested_gpus(workflow.resource_settings.resources),
            train_threads=job_threads.job_threads(
                training["threads"],
                cpu_jobs=cpu_jobs,
                cores=cores,
                cluster=on_cluster,
                parallel_gpu_jobs=at_once,
                workers=default_num_workers() if workers is None else workers,
            ),
            predict_threads=job_threads.job_threads(
                training["threads"],
                cpu_jobs=cpu_jobs,
                cores=cores,
                cluster=on_cluster,
                parallel_gpu_jobs=at_once // max(1, folds_per_gpu) or 1,
            ),
            dry_run=dry_run,
            is_main_process=bool(workflow.is_main_process),
            messages=JobMessages.of_dry_run(dry_run),
            flags=RunFlags(
                folds=flags.folds_argument(folds),
                model=flags.model_flags(plans_name, trainer),
                roots=flags.root_flags(paths.roots),
                surface=flags.surface_metric_flags(config["evaluation"]),
                model_code_consent=consent_flag_for_trainer(trainer),
            ),
            inputs=RunInputs(
                config=config,
                paths=paths,
                folds=folds,
                num_split_folds=num_split_folds,
                checkpoints=checkpoints,
                notices=inputs.NoticesOnce(logger.warning),
                error=logger.error,
            ),
            test_set_notice=incomplete_test_set_notice(config, paths.raw),
        )

    # ------------------------------------------------------------------ said once at the start
    def announce_start(self) -> None:
        """In the main process: a long schedule on the CPU, an incomplete test set (also in the
        report), each once; a live run's console then shows one line per job."""
        if not self.is_main_process:
            return
        training = self.config["training"]
        devices.print_once(
            devices.cpu_schedule_warning(
                self.device,
                self.gpus_per_job,
                training["epochs"],
                training["iterations_per_epoch"],
            )
        )
        devices.print_once(self.test_set_notice)
        if not self.dry_run:
            from snakemake.logging import logger

            calm_console(logger)

    def announce_fold_restarts(self) -> None:
        """Once, in the main process (a dry run too): one line per trained fold this run's
        settings invalidate; its job sets the folder aside and trains it again (fold_reuse)."""
        if not self.is_main_process:
            return
        for line in fold_reuse.fold_restart_lines(
            self.config,
            dataset=self.dataset,
            results=self.paths.results,
            trainer=self.trainer,
            plans_name=self.plans_name,
            folds=self.folds,
            plans_file=self.paths.plans,
            splits_file=self.paths.splits,
            pretrained=self.pretrained,
        ):
            print(line, file=sys.stderr)

    def register_gpu_slots(self, workflow: Any) -> None:
        """With folds sharing GPUs, make Snakemake's `gpu` resource count slots, k per GPU.

        Resources are integers, so a fold cannot ask for 1/k GPU: the user's `--resources gpu=K`
        (K GPUs, as always) becomes K*k slots; a fold job asks for gpus_per_job slots (one on
        each of its GPUs), a prediction job for one whole GPU (prediction_gpu_resource). The
        notices are printed once."""
        notices = flags.gpu_slot_notices(
            self.config["training"]["folds_per_gpu"],
            self.folds_per_gpu,
            cluster=self.on_cluster,
            requested_gpus=self.requested_gpus,
        )
        if self.is_main_process:
            for notice in notices:
                print(notice, file=sys.stderr)
        slots = flags.gpu_slot_total(self.requested_gpus, self.folds_per_gpu)
        if slots is not None:
            workflow.register_resource("gpu", slots)

    # ------------------------------------------------------------------ the rules' params
    def synthetic_options(self) -> str:
        return flags.synthetic_options(self.config["dataset"]["synthetic"])

    def planning_options(self) -> str:
        return flags.planning_options(self.config["planning"], self.plans_name)

    def plan_overrides(self) -> str:
        return flags.plan_overrides(self.config["planning"])

    def data_identifier_pattern(self) -> str:
        """The preprocess rule's ``data_identifier``: only its own planner's data folders."""
        return data_identifier_pattern(self.config["planning"], self.plans_name)

    def training_options(self) -> Callable[[Any, Any], str]:
        """The train command's flags, as a param Snakemake does not compare between runs: a
        changed flag reruns a finished fold only through ``fold_settings_trigger``
        (invalidating settings), never --save-every."""
        return _not_a_rerun_trigger(
            flags.training_options(self.config, self.plans_name, self.device)
        )

    def fold_settings_trigger(self) -> str:
        """The train rule's rerun trigger (fold_reuse): changes with a setting that invalidates
        a trained fold (a user trainer's source and pretrained weights by sha256)."""
        return fold_reuse.train_rerun_trigger(self.config, self.pretrained)

    def pretrained_weights_flag(self) -> str:
        return flags.pretrained_weights_flag(self.pretrained)

    def train_retries(self) -> int:
        """On a cluster each attempt is a new job (the main Snakemake resubmits); the Snakemake
        inside the job must not retry in the same allocation, whose walltime is nearly spent.
        Locally the retry runner in the shell retries, knowing the exit status."""
        retries = int(self.config["training"]["retries"])
        return retries if self.on_cluster and not self.remote_job else 0

    def training_launcher(self, wildcards: Any, resources: Any, threads: int) -> str:
        """The command that starts a fold: one process, `-num_gpus N`, or srun + torchrun, run
        by the retry runner (cluster.retry; on a cluster with the fold's no_retry marker)."""
        training = self.config["training"]
        marker = str(self.paths.fold_dir / NO_RETRY_MARKER).format(
            configuration=wildcards.configuration, fold=wildcards.fold
        )
        runner = flags.fold_retry_prefix(
            training["retries"], cluster=self.on_cluster, marker=marker
        )
        return runner + flags.training_launcher(
            training,
            self.gpus_per_job,
            job_gpus=resources.gpu,
            cpus_per_gpu=resources.get("cpus_per_gpu"),
            threads=threads,
            rendezvous_id=torchrun.rendezvous_id(
                self.dataset, wildcards.configuration, wildcards.fold
            ),
        )

    def training_job_resources(self) -> dict[str, Any]:
        """`gpu`, and for training.nodes > 1 the SLURM job shape (nodes, tasks, gres, mpi); on
        GPUs `cpus_per_gpu`: each rank's augmentation workers plus one (a profile may override
        it)."""
        training = self.config["training"]
        resources = slurm.job_resources(int(training["nodes"]), self.gpus_per_job)
        if self.gpus_per_job > 0:
            resources["cpus_per_gpu"] = flags.fold_cpus_per_gpu(training)
        return resources

    def folds_per_gpu_variable(self) -> str:
        return flags.folds_per_gpu_variable(self.folds_per_gpu)

    def prediction_gpu_resource(self) -> int:
        return flags.prediction_gpu_resource(self.gpus_per_job, self.folds_per_gpu)

    def prediction_slot_flags(self) -> Callable[[Any, Any], str]:
        """predict's `--gpu-slot`: a local prediction job takes its GPU through the fold jobs'
        slot locks. No rerun trigger (as training_options): the lock folder is the machine's
        business, not the predictions'."""
        return _not_a_rerun_trigger(
            flags.prediction_slot_flags(
                self.config["training"], self.gpus_per_job, cluster=self.on_cluster
            )
        )

    def prediction_settings(self, wildcards: Any) -> str:
        """What a test-set prediction depends on besides its input files: a kept staging folder
        continues only under the same (resumable_staging)."""
        parts = [wildcards.configuration, self.flags.model, self.flags.model_code_consent]
        return " ".join([*parts, self.flags.folds, self.device])

    def chosen_configurations_argument(self, _wildcards: Any) -> str:
        return flags.chosen_configurations_argument(self.inputs.planned()[1])

    def test_summary_flag(self, _wildcards: Any) -> str:
        return flags.report_test_summary_flag(
            self.inputs.has_test_labels(), self.paths.test_summary
        )

    def test_set_note_flag(self, _wildcards: Any) -> str:
        return flags.report_test_set_note_flag(self.test_set_notice)

    @staticmethod
    def staging_folder(_wildcards: Any, output: Any) -> str:
        return staging_folder_of(output[0])

    @staticmethod
    def previous_stage_flag(_wildcards: Any, input: Any) -> str:
        return flags.previous_stage_flag(input.previous_stage)
