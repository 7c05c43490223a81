# The raw dataset: the synthetic demo generator and the integrity check.
from nnunet_core.workflow import dataset_check, run_mode

# A user's dataset is checked here, by the main process, where the verify_dataset job would run
# (its report missing or older than the raw files): the problems are the run's first lines, one
# each, and the run stops before any job (exit 2), not inside a failed job's block. A clean
# dataset gets the job's report, so the job has nothing left to do. Dry runs and the questions
# that run no job (--unlock, --dag, --lint ...: nnunet_core.workflow.run_mode) write nothing; the
# synthetic data is made by a job, after this (nnunet_core.workflow.dataset_check).
if (
    not SYNTHETIC
    and workflow.is_main_process
    and not workflow.output_settings.dryrun
    and run_mode.runs_jobs()
):
    dataset_check.check_before_jobs(
        ROOTS,
        DATASET,
        VERIFY,
        raw_training_files(None),
        NUM_PROCESSES,
        work_dir=Path(config["work_dir"]).absolute(),
    )


if SYNTHETIC:

    checkpoint synthesize_dataset:
        output:
            RAW_DATASET_JSON,
        log:
            DATASET_LOGS / "synthesize_dataset.log",
        params:
            raw=RAW,
            options=synthetic_options(),
        message:
            JOB
        shell:
            "nnunet-core synthesize --output {params.raw:q} --force {params.options} > {log:q} 2>&1"


rule verify_dataset:
    input:
        raw_training_files,
    output:
        VERIFY,
    log:
        DATASET_LOGS / "verify_dataset.log",
    threads: NUM_PROCESSES
    params:
        dataset=DATASET,
        roots=ROOT_FLAGS,
    message:
        JOB
    shell:
        "nnunet-core verify -d {params.dataset:q} {params.roots} -np {threads} "
        "--output {output:q} > {log:q} 2>&1"
