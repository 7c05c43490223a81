# One dataset and one seed, raw data to report: the stages and their targets. The Snakefile
# includes it for a plain run; paper.smk loads it as a module once per (dataset, seed).
# common.smk (first) sets up the process and validates config, then includes paths.smk,
# inputs.smk and flags.smk.


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
        stage_targets("all"),
    message:
        TARGET_JOB


# Stage targets: `snakemake preprocessed` (or planned, trained, selected) stops after that stage.
rule planned:
    input:
        stage_targets("planned"),
    message:
        TARGET_JOB


rule preprocessed:
    input:
        stage_targets("preprocessed"),
    message:
        TARGET_JOB


rule trained:
    input:
        stage_targets("trained"),
    message:
        TARGET_JOB


rule selected:
    input:
        stage_targets("selected"),
    message:
        TARGET_JOB
