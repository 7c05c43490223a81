# blosc2 preprocessing, one job per data identifier (configurations sharing data run once).


rule preprocess:
    input:
        raw_training_files,
        plans=PLANS,
    output:
        PRE / "{data_identifier}" / "preprocess_summary.json",
    log:
        LOGS / "preprocess_{data_identifier}.log",
    threads: NUM_PROCESSES
    params:
        configuration=configuration_of_identifier,
    shell:
        "{NNUNET} preprocess -d {DATASET} {ROOT_FLAGS} -c {params.configuration} "
        "--plans-name {PLANS_NAME} -np {threads} > {log} 2>&1"
