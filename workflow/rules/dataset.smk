# The raw dataset: the synthetic demo generator and the integrity check.


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
