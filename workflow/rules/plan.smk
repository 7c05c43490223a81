# Fingerprint, experiment plans (a checkpoint: configurations come from it) and the CV splits.


rule fingerprint:
    input:
        raw_training_files,
        verified=PRE / "verify.json",
    output:
        PRE / "dataset_fingerprint.json",
    log:
        LOGS / "fingerprint.log",
    threads: NUM_PROCESSES
    shell:
        "{NNUNET} fingerprint -d {DATASET} {ROOT_FLAGS} -np {threads} > {log} 2>&1"


checkpoint plan:
    input:
        fingerprint=PRE / "dataset_fingerprint.json",
        dataset_json=RAW / "dataset.json",
    output:
        plans=PLANS,
        dataset_json=PRE / "dataset.json",
    log:
        LOGS / "plan.log",
    params:
        planner=config["planning"]["planner"],
        gpu_memory=config["planning"]["gpu_memory_target_gb"],
        overrides=plan_overrides(),
    shell:
        "{NNUNET} plan -d {DATASET} {ROOT_FLAGS} --plans-name {PLANS_NAME} "
        "-pl {params.planner} --gpu-memory-target {params.gpu_memory} "
        "--overrides {params.overrides:q} > {log} 2>&1"


rule splits:
    input:
        dataset_json=RAW / "dataset.json",
        verified=ancient(PRE / "verify.json"),
    output:
        PRE / "splits_final.json",
    log:
        LOGS / "splits.log",
    params:
        folds=config["splits"]["num_folds"],
        seed=config["splits"]["seed"],
    shell:
        "{NNUNET} splits -d {DATASET} {ROOT_FLAGS} --folds {params.folds} "
        "--seed {params.seed} > {log} 2>&1"
