# Cross-validation per configuration, one ensemble job per pair, and the selection checkpoint.


rule crossval:
    input:
        fold_summaries,
    output:
        CROSSVAL_SUMMARY,
    log:
        LOGS / "crossval_{configuration}.log",
    params:
        dataset=DATASET,
        roots=ROOT_FLAGS,
        model=MODEL_FLAGS,
        folds=FOLDS_ARGS,
        surface=SURFACE_FLAGS,
    message:
        JOB_WITH_WILDCARDS
    shell:
        "nnunet-core crossval -d {params.dataset:q} -c {wildcards.configuration:q} "
        "{params.model} -f {params.folds} {params.surface} {params.roots} > {log:q} 2>&1"


rule ensemble_cv:
    input:
        crossval_summary_of_pair,
    output:
        ENSEMBLE_CV_SUMMARY,
    log:
        LOGS / "ensemble_cv_{first}_{second}.log",
    params:
        dataset=DATASET,
        roots=ROOT_FLAGS,
        model=MODEL_FLAGS,
        folds=FOLDS_ARGS,
        surface=SURFACE_FLAGS,
    message:
        JOB_WITH_WILDCARDS
    shell:
        "nnunet-core ensemble-cv -d {params.dataset:q} "
        "-c {wildcards.first:q} {wildcards.second:q} {params.model} -f {params.folds} "
        "{params.surface} {params.roots} > {log:q} 2>&1"


checkpoint select:
    input:
        crossval_and_ensemble_summaries,
    output:
        information=INFERENCE_INFORMATION,
        instructions=INFERENCE_INSTRUCTIONS,
    log:
        LOGS / "select.log",
    params:
        dataset=DATASET,
        roots=ROOT_FLAGS,
        model=MODEL_FLAGS,
        configurations=chosen_configurations_argument,
        folds=FOLDS_ARGS,
    message:
        JOB
    shell:
        "nnunet-core find-best-config -d {params.dataset:q} -c {params.configurations} "
        "{params.model} -f {params.folds} {params.roots} > {log:q} 2>&1"
