# Fold training: one job per (configuration, fold). Only the validation summary (the fold's last
# file, written after checkpoint_final.pth) is a declared output: Snakemake deletes declared
# outputs before a job and after a failure, and the fold's checkpoints must survive so that the
# retry continues with --c. A failure after the last epoch (final validation, npz export, the
# summary) keeps checkpoint_final.pth: the retry trains nothing, and its validation keeps the
# cases exported after those weights (training.fold.validation_resume).
# training.pretrained_weights (fine-tuning) is an input: `--c -pretrained_weights FILE` starts a
# fold from it only while the fold has no checkpoint of its own.
# A fold stopped before its end (the stop signal before the walltime, or its deadline) exits
# stop_signal.EXIT_STOPPED (75) with one line in its log saying where and why, and the next
# attempt continues with --c (under -num_gpus N and torchrun too: the launchers pass the code on).
# Retries go by exit status (nnunet_core.cluster.exit_codes), only where a retry can help: a
# walltime stop, a kill from outside, out of memory; never the user's config, data or trainer code
# (exit 2, 3), a full disk (4) or the user's stop. Locally the retry runner in the shell retries
# (training.retries more attempts; cluster.retry) and the rule's `retries:` is 0. On a cluster
# the main Snakemake resubmits (`retries:`), and an attempt that failed in a way a retry cannot
# help leaves fold_k/no_retry.json, so the resubmitted attempt ends at once with the same line;
# the main process removes those markers when a run starts (cluster.no_retry).
# A cascade fold (3d_cascade_fullres) needs every 3d_lowres fold's predicted_next_stage export,
# written before that fold's validation summary: the summaries of all lowres folds are inputs.
# training.folds_per_gpu k (local runs): k folds share a GPU through the slot locks
# (nnunet_core.cluster.gpu_slots), and `--resources gpu=K` counts K*k slots
# (RUN.register_gpu_slots).


import sys

from nnunet_core.cluster import lsf, no_retry, slurm
from nnunet_core.layout.work import TRAIN_LOG
from nnunet_core.workflow import fold_weights

# With folds sharing GPUs the `gpu` resource counts slots, k per GPU (RUN.register_gpu_slots).
RUN.register_gpu_slots(workflow)
# A trained fold whose recorded settings this run's invalidate: one line each (fold_reuse).
RUN.announce_fold_restarts()


# A fold whose checkpoint_final.pth the user deleted trains again (nnunet_core.workflow.fold_weights).
if workflow.is_main_process:
    for line in fold_weights.retrain_folds_without_weights(
        RUN.paths.results, RUN.trainer, RUN.plans_name, dry_run=RUN.dry_run
    ):
        print(line, file=sys.stderr)


# A new run gives every fold a fresh try, after the user fixed what a marker recorded.
if workflow.is_main_process and not RUN.dry_run:
    no_retry.clear_markers(RUN.paths.results, RUN.trainer, RUN.plans_name)


# A model zip's checkpoint, extracted once into work_dir/pretrained (written aside, renamed).
if RUN.pretrained is not None and RUN.pretrained.archive is not None:

    rule extract_pretrained_weights:
        input:
            RUN.pretrained.archive,
        output:
            RUN.pretrained.checkpoint,
        log:
            RUN.paths.logs / "extract_pretrained_weights.log",
        localrule: True
        params:
            python=sys.executable,
            member=RUN.pretrained.member,
        message:
            RUN.messages.job
        shell:
            "{params.python:q} -m nnunet_core.workflow.pretrained {input:q} {params.member:q} "
            "{output:q} > {log:q} 2>&1"


rule train:
    input:
        plans=RUN.paths.plans,
        splits=RUN.paths.splits,
        data=RUN.inputs.preprocessed_data_of_configuration,
        pretrained=[] if RUN.pretrained is None else [RUN.pretrained.checkpoint],
        previous_stage=RUN.inputs.previous_stage_summaries,
    output:
        summary=RUN.paths.fold_summary,
    log:
        RUN.paths.logs / TRAIN_LOG,
    # On a cluster each attempt is a new job (the main Snakemake resubmits); the Snakemake inside
    # the job must not retry in the same allocation, whose walltime is nearly spent. Locally the
    # retry runner retries, knowing the exit status (see above).
    retries: RUN.train_retries()
    threads: RUN.train_threads
    resources:
        **RUN.training_job_resources(),
        mem_mb=config["training"]["mem_mb"],
        runtime=config["training"]["runtime"],
        lsf_extra=lsf.rule_lsf_extra(workflow, RUN.gpus_per_job, resumable=True),
    params:
        dataset=RUN.dataset,
        roots=RUN.flags.roots,
        options=RUN.training_options(),
        # reruns a finished fold when a setting that invalidates it changes (fold_reuse)
        settings=RUN.fold_settings_trigger(),
        pretrained=RUN.pretrained_weights_flag(),
        launcher=RUN.training_launcher,
        guard=slurm.multi_node_guard(config["training"]["nodes"]),
        sharing=RUN.folds_per_gpu_variable(),
    message:
        RUN.messages.with_wildcards
    shell:
        "{params.guard}{params.sharing}OMP_NUM_THREADS={threads} OMP_WAIT_POLICY=${{OMP_WAIT_POLICY:-PASSIVE}} {params.launcher} {params.dataset:q} {wildcards.configuration:q} {wildcards.fold:q} "
        "{params.options} --c{params.pretrained} {params.roots} >> {log:q} 2>&1"
