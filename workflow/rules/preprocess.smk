# blosc2 preprocessing, one job per data identifier (configurations sharing data run once).
# Before any fold: a preprocess job takes all its `threads`, so behind a running fold job it
# would wait for a whole free machine while a core idles (and its configuration's folds with it).


rule preprocess:
    input:
        verified=VERIFY,
        plans=PLANS,
    output:
        preprocess_summary_file(PRE, "{data_identifier}"),
    log:
        DATASET_LOGS / "preprocess_{data_identifier}.log",
    priority: 10
    threads: NUM_PROCESSES
    params:
        dataset=DATASET,
        roots=ROOT_FLAGS,
        plans_name=PLANS_NAME,
        configuration=configuration_of_identifier,
    message:
        JOB_WITH_WILDCARDS
    shell:
        "nnunet-core preprocess -d {params.dataset:q} {params.roots} "
        "-c {params.configuration:q} --plans-name {params.plans_name:q} -np {threads} "
        "> {log:q} 2>&1"
