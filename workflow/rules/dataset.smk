# The raw dataset: the synthetic demo generator and the integrity check.


if SYNTHETIC:

    checkpoint synthesize_dataset:
        output:
            RAW / "dataset.json",
        log:
            LOGS / "synthesize_dataset.log",
        params:
            options=synthetic_options(),
        shell:
            "{NNUNET} synthesize --output {RAW} --force {params.options} > {log} 2>&1"


rule verify_dataset:
    input:
        raw_training_files,
    output:
        PRE / "verify.json",
    log:
        LOGS / "verify_dataset.log",
    threads: NUM_PROCESSES
    shell:
        "{NNUNET} verify -d {DATASET} {ROOT_FLAGS} -np {threads} --output {output} > {log} 2>&1"
