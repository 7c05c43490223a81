# The raw dataset: the synthetic demo generator, an MSD task's conversion and the integrity check.
from pathlib import Path

from nnunet_core.workflow import dataset_check, run_mode

# A user's dataset is checked here, by the main process, where the verify_dataset job would run
# (its report missing or older than the raw files): the problems are the run's first lines, one
# each, and the run stops before any job (exit 2), not inside a failed job's block. A clean
# dataset gets the job's report, so the job has nothing left to do. Dry runs and the questions
# that run no job (--unlock, --dag, --lint ...: nnunet_core.workflow.run_mode) write nothing; the
# synthetic data is made by a job, after this (nnunet_core.workflow.dataset_check).
if (
    not RUN.synthetic
    and RUN.msd_task is None
    and workflow.is_main_process
    and not workflow.output_settings.dryrun
    and run_mode.runs_jobs()
):
    dataset_check.check_before_jobs(
        RUN.paths.roots,
        RUN.dataset,
        RUN.paths.verify,
        RUN.inputs.raw_training_files(None),
        RUN.processes,
        work_dir=Path(config["work_dir"]).absolute(),
    )


if RUN.synthetic:

    checkpoint synthesize_dataset:
        output:
            RUN.paths.raw_dataset_json,
        log:
            RUN.paths.dataset_logs / "synthesize_dataset.log",
        params:
            raw=RUN.paths.raw,
            options=RUN.synthetic_options(),
        message:
            RUN.messages.job
        shell:
            "nnunet-core synthesize --output {params.raw:q} --force {params.options} > {log:q} 2>&1"


if RUN.msd_task is not None:

    checkpoint convert_msd:
        output:
            RUN.paths.raw_dataset_json,
        log:
            RUN.paths.dataset_logs / "convert_msd.log",
        threads: RUN.processes
        params:
            task=RUN.msd_task,
            id=config["dataset"]["id"],
            roots=RUN.flags.roots,
        message:
            RUN.messages.job
        shell:
            "nnunet-core convert-msd -i {params.task:q} -overwrite_id {params.id:q} "
            "{params.roots} -np {threads} > {log:q} 2>&1"


rule verify_dataset:
    input:
        RUN.inputs.raw_training_files,
    output:
        RUN.paths.verify,
    log:
        RUN.paths.dataset_logs / "verify_dataset.log",
    threads: RUN.processes
    params:
        dataset=RUN.dataset,
        roots=RUN.flags.roots,
    message:
        RUN.messages.job
    shell:
        "nnunet-core verify -d {params.dataset:q} {params.roots} -np {threads} "
        "--output {output:q} > {log:q} 2>&1"
