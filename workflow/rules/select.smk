# Cross-validation per configuration, one ensemble job per pair, and the selection checkpoint.


rule crossval:
    input:
        RUN.inputs.fold_summaries,
    output:
        RUN.paths.crossval_summary,
    log:
        RUN.paths.logs / "crossval_{configuration}.log",
    params:
        dataset=RUN.dataset,
        roots=RUN.flags.roots,
        model=RUN.flags.model,
        folds=RUN.flags.folds,
        surface=RUN.flags.surface,
    message:
        RUN.messages.with_wildcards
    shell:
        "nnunet-core crossval -d {params.dataset:q} -c {wildcards.configuration:q} "
        "{params.model} -f {params.folds} {params.surface} {params.roots} > {log:q} 2>&1"


rule ensemble_cv:
    input:
        RUN.inputs.crossval_summary_of_pair,
    output:
        RUN.paths.ensemble_cv_summary,
    log:
        RUN.paths.logs / "ensemble_cv_{first}_{second}.log",
    params:
        dataset=RUN.dataset,
        roots=RUN.flags.roots,
        model=RUN.flags.model,
        folds=RUN.flags.folds,
        surface=RUN.flags.surface,
    message:
        RUN.messages.with_wildcards
    shell:
        "nnunet-core ensemble-cv -d {params.dataset:q} "
        "-c {wildcards.first:q} {wildcards.second:q} {params.model} -f {params.folds} "
        "{params.surface} {params.roots} > {log:q} 2>&1"


checkpoint select:
    input:
        RUN.inputs.crossval_and_ensemble_summaries,
    output:
        information=RUN.paths.inference_information,
        instructions=RUN.paths.inference_instructions,
    log:
        RUN.paths.logs / "select.log",
    params:
        dataset=RUN.dataset,
        roots=RUN.flags.roots,
        model=RUN.flags.model,
        configurations=RUN.chosen_configurations_argument,
        folds=RUN.flags.folds,
    message:
        RUN.messages.job
    shell:
        "nnunet-core find-best-config -d {params.dataset:q} -c {params.configurations} "
        "{params.model} -f {params.folds} {params.roots} > {log:q} 2>&1"
