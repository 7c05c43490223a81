# Fingerprint, experiment plans (a checkpoint: configurations come from it) and the CV splits.


rule fingerprint:
    input:
        verified=VERIFY,
    output:
        FINGERPRINT,
    log:
        DATASET_LOGS / "fingerprint.log",
    threads: NUM_PROCESSES
    params:
        dataset=DATASET,
        roots=ROOT_FLAGS,
    message:
        JOB
    shell:
        "nnunet-core fingerprint -d {params.dataset:q} {params.roots} -np {threads} "
        "> {log:q} 2>&1"


checkpoint plan:
    input:
        fingerprint=FINGERPRINT,
        dataset_json=RAW_DATASET_JSON,
    output:
        plans=PLANS,
        # with methods, a planner other than the baseline's writes it too, undeclared: one
        # rule makes a file (nnunet_core.workflow.runs)
        dataset_json=[PRE_DATASET_JSON] if DECLARES_DATASET_JSON else [],
    log:
        DATASET_LOGS
        / ("plan.log" if DECLARES_DATASET_JSON else f"plan_{PLANS_NAME}.log"),
    params:
        dataset=DATASET,
        roots=ROOT_FLAGS,
        options=planning_options(),
        overrides=plan_overrides(),
    message:
        JOB
    shell:
        "nnunet-core plan -d {params.dataset:q} {params.roots} {params.options} "
        "--overrides {params.overrides:q} > {log:q} 2>&1"


rule splits:
    input:
        dataset_json=RAW_DATASET_JSON,
        verified=ancient(VERIFY),
    output:
        SPLITS,
    log:
        DATASET_LOGS / "splits.log",
    params:
        dataset=DATASET,
        roots=ROOT_FLAGS,
        folds=config["splits"]["num_folds"],
        seed=config["splits"]["seed"],
    message:
        JOB
    shell:
        "nnunet-core splits -d {params.dataset:q} {params.roots} --folds {params.folds:q} "
        "--seed {params.seed:q} > {log:q} 2>&1"
