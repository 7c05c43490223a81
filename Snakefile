# nnU-Net v2 method, raw dataset to evaluated test predictions and a report.
# Config, includes and the default target only; helpers live in workflow/rules/common.smk.
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
        PRE / "verify.json",
        PRE / "splits_final.json",
        preprocessing_targets,
        training_targets,
        final_targets,


# Stage targets: `snakemake preprocessed` (or trained, selected) stops after that stage.
rule preprocessed:
    input:
        PRE / "verify.json",
        PRE / "splits_final.json",
        preprocessing_targets,


rule trained:
    input:
        training_targets,


rule selected:
    input:
        RESULTS / "inference_information.json",
