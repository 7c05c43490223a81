# Fingerprint, experiment plans (a checkpoint: configurations come from it) and the CV splits.


rule fingerprint:
    input:
        verified=RUN.paths.verify,
    output:
        RUN.paths.fingerprint,
    log:
        RUN.paths.dataset_logs / "fingerprint.log",
    threads: RUN.processes
    params:
        dataset=RUN.dataset,
        roots=RUN.flags.roots,
    message:
        RUN.messages.job
    shell:
        "nnunet-core fingerprint -d {params.dataset:q} {params.roots} -np {threads} "
        "> {log:q} 2>&1"


checkpoint plan:
    input:
        fingerprint=RUN.paths.fingerprint,
        dataset_json=RUN.paths.raw_dataset_json,
    output:
        plans=RUN.paths.plans,
        # with methods, a planner other than the baseline's writes it too, undeclared: one
        # rule makes a file (nnunet_core.workflow.runs)
        dataset_json=[RUN.paths.pre_dataset_json] if RUN.declares_dataset_json else [],
    log:
        RUN.paths.dataset_logs
        / ("plan.log" if RUN.declares_dataset_json else f"plan_{RUN.plans_name}.log"),
    params:
        dataset=RUN.dataset,
        roots=RUN.flags.roots,
        options=RUN.planning_options(),
        overrides=RUN.plan_overrides(),
    message:
        RUN.messages.job
    shell:
        "nnunet-core plan -d {params.dataset:q} {params.roots} {params.options} "
        "--overrides {params.overrides:q} > {log:q} 2>&1"


rule splits:
    input:
        dataset_json=RUN.paths.raw_dataset_json,
        verified=ancient(RUN.paths.verify),
    output:
        RUN.paths.splits,
    log:
        RUN.paths.dataset_logs / "splits.log",
    params:
        dataset=RUN.dataset,
        roots=RUN.flags.roots,
        folds=config["splits"]["num_folds"],
        seed=config["splits"]["seed"],
    message:
        RUN.messages.job
    shell:
        "nnunet-core splits -d {params.dataset:q} {params.roots} --folds {params.folds:q} "
        "--seed {params.seed:q} > {log:q} 2>&1"
