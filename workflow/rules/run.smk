# One dataset and one seed, raw data to report: the stages and their targets. The Snakefile
# includes it for a plain run; paper.smk loads it as a module once per (dataset, seed).
# common.smk (first) sets up the process, validates config and builds RUN, the run context
# every rule reads (nnunet_core.workflow.run_context); it includes paths.smk (the wildcards).


include: "common.smk"
include: "dataset.smk"
include: "plan.smk"
include: "preprocess.smk"
include: "train.smk"
include: "select.smk"
include: "predict.smk"
include: "report.smk"


rule all:
    default_target: True
    input:
        RUN.inputs.stage_targets("all"),
    message:
        RUN.messages.target


# Stage targets: `snakemake preprocessed` (or planned, trained, selected) stops after that stage.
rule planned:
    input:
        RUN.inputs.stage_targets("planned"),
    message:
        RUN.messages.target


rule preprocessed:
    input:
        RUN.inputs.stage_targets("preprocessed"),
    message:
        RUN.messages.target


rule trained:
    input:
        RUN.inputs.stage_targets("trained"),
    message:
        RUN.messages.target


rule selected:
    input:
        RUN.inputs.stage_targets("selected"),
    message:
        RUN.messages.target
