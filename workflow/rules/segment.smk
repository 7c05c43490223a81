# Segmenting new scans (config `predict:`): a trained model on a folder of new images.
#
# nnunet_core.new_scans.plan resolves the model (a zip or URL is installed aside into work_dir),
# keys it with the settings, and cuts the cases not yet segmented with that key into shards of
# predict.cases_per_job. Each shard is one job with the `gpu` resource (a cluster profile makes it
# one GPU job); a job killed half-way keeps the cases it wrote, and its retry or a rerun predicts
# only the rest. The last job writes summary.tsv, failed.tsv and the montage, and fails when a
# case failed (after the other cases are done).
import sys
from pathlib import Path

from snakemake.utils import validate

from nnunet_core.layout.new_scans import NEW_SCANS_FOLDER
from nnunet_core.layout.work import PREDICT_LOG, logs_dir
from nnunet_core.new_scans.plan import (
    plan_run,
    shard_cases_file,
    shard_marker,
    summary_marker,
    summary_shards,
)
from nnunet_core.cluster import lsf
from nnunet_core.workflow import devices as workflow_devices
from nnunet_core.workflow.flags import prediction_slot_flags
from nnunet_core.workflow import threads as job_threads
from nnunet_core.workflow import work_lock
from nnunet_core.workflow.console import job_message
from nnunet_core.workflow.work_dir_checks import check_work_dir_placement

# The Snakefile typed and checked the config; Snakemake's validation fills in the defaults.
validate(config, schema="../schemas/config.schema.yaml")
WORK_DIR = Path(config["work_dir"])
check_work_dir_placement(WORK_DIR, config["predict"]["input"])
work_lock.lock_when_started(workflow, WORK_DIR)
# (a job's own Snakemake reads the files the main process wrote, and writes none)
SCANS = plan_run(config["predict"], WORK_DIR, write=workflow.is_main_process)
# `nnunet-core status` lists the shards under "new_scans" (case i/N and ETA from their logs).
LOGS = logs_dir(WORK_DIR) / NEW_SCANS_FOLDER
_DRY_RUN = workflow.output_settings.dryrun
_ON_CLUSTER = workflow.remote_exec or workflow.non_local_exec or bool(workflow.nodes)
# One GPU per shard wherever GPUs exist (the cluster's nodes, or this machine's), none on the CPU.
SHARD_GPUS = (
    0
    if config["predict"].get("device", "auto") == "cpu"
    else min(
        1,
        workflow_devices.gpus_per_fold_job(
            None,
            cluster=_ON_CLUSTER,
            requested=workflow_devices.requested_gpus(workflow.global_resources),
            visible=workflow_devices.visible_gpu_count(),
        ),
    )
)
SHARD_THREADS = job_threads.job_threads(
    None,
    cpu_jobs=SHARD_GPUS == 0,
    cores=workflow.resource_settings.cores,
    cluster=_ON_CLUSTER,
    parallel_gpu_jobs=max(1, workflow_devices.visible_gpu_count()),
)


localrules:
    all,


rule all:
    default_target: True
    input:
        summary_marker(SCANS.folder, SCANS.summary),
    message:
        job_message(_DRY_RUN, log=False)


rule predict_shard:
    input:
        spec=SCANS.spec_file,
        cases=lambda wildcards: shard_cases_file(SCANS.folder, wildcards.shard),
    output:
        shard_marker(SCANS.folder, "{shard}"),
    log:
        LOGS / PREDICT_LOG.format(configuration="shard_{shard}"),
    threads: SHARD_THREADS
    resources:
        gpu=SHARD_GPUS,
        # bsub's GPU options under LSF (its plugin maps no `gpu` resource)
        lsf_extra=lsf.rule_lsf_extra(workflow, SHARD_GPUS, resumable=False),
    params:
        python=sys.executable,
        run_dir=SCANS.folder,
        # a local GPU shard takes a whole GPU through the fold jobs' slot locks (Snakemake
        # only counts)
        slots=prediction_slot_flags(config["training"], SHARD_GPUS, cluster=_ON_CLUSTER),
    message:
        job_message(_DRY_RUN, wildcards=True)
    shell:
        "OMP_NUM_THREADS={threads} OMP_WAIT_POLICY=${{OMP_WAIT_POLICY:-PASSIVE}} "
        "{params.python:q} -m nnunet_core.new_scans.shard {params.run_dir:q} "
        "{wildcards.shard:q} {params.slots} > {log:q} 2>&1"


# Not retried (also where a profile sets retries): it fails only for cases that failed, which a
# retry would list again.
rule summarize_new_scans:
    input:
        spec=SCANS.spec_file,
        shards=lambda wildcards: [
            shard_marker(SCANS.folder, shard)
            for shard in summary_shards(SCANS.folder, wildcards.summary)
        ],
    output:
        summary_marker(SCANS.folder, "{summary}"),
    log:
        LOGS / "summary_{summary}.log",
    retries: 0
    params:
        python=sys.executable,
        run_dir=SCANS.folder,
    message:
        job_message(_DRY_RUN)
    shell:
        "{params.python:q} -m nnunet_core.new_scans.summary {params.run_dir:q} {output:q} "
        "> {log:q} 2>&1"
