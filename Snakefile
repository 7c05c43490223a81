# nnU-Net v2 method, raw dataset to evaluated test predictions and a report.
# Config, includes and the stage targets only. workflow/rules/common.smk (included first) sets up
# the process and validates config, then includes paths.smk, inputs.smk and flags.smk.
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")


# No dataset named (by --configfile or --config): the built-in demo. A user's dataset never gets
# the demo's settings; what it does not set comes from the schema, i.e. upstream's method.
if "dataset" not in config:

    configfile: Path(workflow.basedir) / "config" / "demo.yaml"


report: "workflow/report/workflow.rst"


# Jobs find `nnunet-core` through PATH (common.smk puts this interpreter's folder first).
envvars:
    "PATH",


include: "workflow/rules/common.smk"
include: "workflow/rules/dataset.smk"
include: "workflow/rules/plan.smk"
include: "workflow/rules/preprocess.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/select.smk"
include: "workflow/rules/predict.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        stage_targets("all"),


# Stage targets: `snakemake preprocessed` (or trained, selected) stops after that stage.
rule preprocessed:
    input:
        stage_targets("preprocessed"),


rule trained:
    input:
        stage_targets("trained"),


rule selected:
    input:
        stage_targets("selected"),
