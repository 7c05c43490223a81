# nnU-Net v2 method, raw dataset to evaluated test predictions and a report.
# Config and the choice of run only: one dataset and one seed is workflow/rules/run.smk; several
# datasets or seeds is workflow/rules/paper.smk, one run.smk module per (dataset, seed); `predict:`
# (new scans, a trained model, no training) is workflow/rules/segment.smk.
from pathlib import Path

from nnunet_core.workflow.config import (
    coerce_command_line_values,
    load_schema,
    validate_config,
)
from nnunet_core.workflow import log_rotation, user_stop
from nnunet_core.workflow.parse_errors import one_line_errors
from nnunet_core.workflow.runs import as_single_run, check_run_keys, is_several_runs

from snakemake.utils import min_version

min_version("9.0")


# No dataset named (by --configfile or --config): the built-in demo. A user's dataset never gets
# the demo's settings; what it does not set comes from the schema, i.e. upstream's method.
if not {"dataset", "datasets", "predict"} & set(config):

    configfile: Path(workflow.basedir) / "config" / "demo.yaml"


report: "workflow/report/workflow.rst"


# Jobs find `nnunet-core` through PATH (common.smk puts this interpreter's folder first).
envvars:
    "PATH",


# `--config` values arrive as strings ('4', 'true'): typed by the schema first. Then one line per
# wrong key, and which run this is (before the schema's defaults, e.g. seed: 0, are filled in).
SCHEMA_FILE = Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml"
# A user's error (config, data, their code) found while any of it is parsed, included files too:
# its one line and exit 2 (3: their code), no Snakemake header or frames (workflow.parse_errors).
with one_line_errors():
    coerce_command_line_values(
        config, workflow.config_settings.config, load_schema(SCHEMA_FILE)
    )
    validate_config(config, SCHEMA_FILE)
    check_run_keys(config)
    # The included file's `all` is the default target (an `include:` would keep the includer's).
    if "predict" in config:  # segmenting new scans with a trained model (no training)
        workflow.include("workflow/rules/segment.smk", overwrite_default_target=True)
    elif is_several_runs(config):
        workflow.include("workflow/rules/paper.smk", overwrite_default_target=True)
    else:
        as_single_run(config)
        workflow.include("workflow/rules/run.smk", overwrite_default_target=True)


# A rerun keeps each earlier attempt's job log (<log>.1, .2, ...: workflow.log_rotation).
log_rotation.install()
# Ctrl-C, or SIGINT/SIGTERM to Snakemake alone: every job ends within seconds and the console says
# what stopped (workflow.user_stop). Last: it chains the onstart/onerror registered above.
user_stop.install(workflow)
