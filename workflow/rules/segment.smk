# Segmenting new scans (config `predict:`): a trained model on a folder of new images.
#
# nnunet_core.new_scans.plan resolves the model (a zip or URL is installed aside into work_dir),
# keys it with the settings, and cuts the cases not yet segmented with that key into shards of
# predict.cases_per_job. Each shard is one job with the `gpu` resource (a cluster profile makes it
# one GPU job); a job killed half-way keeps the cases it wrote, and its retry or a rerun predicts
# only the rest. The last job writes summary.tsv, failed.tsv and the montage, and fails when a
# case failed (after the other cases are done).
import sys

from snakemake.utils import validate

from nnunet_core.layout.work import PREDICT_LOG
from nnunet_core.new_scans.plan import (
    plan_run,
    shard_cases_file,
    shard_marker,
    summary_marker,
    summary_shards,
)
from nnunet_core.cluster import lsf
from nnunet_core.workflow import work_lock
from nnunet_core.workflow.segment_context import SegmentContext
from nnunet_core.workflow.work_dir_checks import check_work_dir_placement

# The Snakefile typed and checked the config; Snakemake's validation fills in the defaults.
validate(config, schema="../schemas/config.schema.yaml")
# The work_dir, logs, each shard's GPU and threads and the console messages, built once.
SEGMENT = SegmentContext.of_workflow(config, workflow)
check_work_dir_placement(SEGMENT.work_dir, config["predict"]["input"])
work_lock.lock_when_started(workflow, SEGMENT.work_dir)
# (a job's own Snakemake reads the files the main process wrote, and writes none)
SCANS = plan_run(config["predict"], SEGMENT.work_dir, write=workflow.is_main_process)


localrules:
    all,


rule all:
    default_target: True
    input:
        summary_marker(SCANS.folder, SCANS.summary),
    message:
        SEGMENT.messages.target


rule predict_shard:
    input:
        spec=SCANS.spec_file,
        cases=lambda wildcards: shard_cases_file(SCANS.folder, wildcards.shard),
    output:
        shard_marker(SCANS.folder, "{shard}"),
    log:
        SEGMENT.logs / PREDICT_LOG.format(configuration="shard_{shard}"),
    threads: SEGMENT.shard_threads
    resources:
        gpu=SEGMENT.shard_gpus,
        # bsub's GPU options under LSF (its plugin maps no `gpu` resource)
        lsf_extra=lsf.rule_lsf_extra(workflow, SEGMENT.shard_gpus, resumable=False),
    params:
        python=sys.executable,
        run_dir=SCANS.folder,
        # a local GPU shard takes a whole GPU through the fold jobs' slot locks (Snakemake
        # only counts)
        slots=SEGMENT.slot_flags,
    message:
        SEGMENT.messages.with_wildcards
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
        SEGMENT.logs / "summary_{summary}.log",
    retries: 0
    params:
        python=sys.executable,
        run_dir=SCANS.folder,
    message:
        SEGMENT.messages.job
    shell:
        "{params.python:q} -m nnunet_core.new_scans.summary {params.run_dir:q} {output:q} "
        "> {log:q} 2>&1"
