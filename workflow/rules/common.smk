# The one entry run.smk includes first: process-wide setup, config validation, and the run's
# context, RUN (nnunet_core.workflow.run_context.RunContext), built once from the checked config:
# every rule reads the dataset, its paths (RUN.paths), its input functions (RUN.inputs), the GPU
# count, the threads, the console messages and its command's flags from that one object. In
# paper mode each run.smk module builds its own. Then:
#   paths.smk   the wildcards the paths use
import os
import sys
from pathlib import Path

from snakemake.utils import validate

from nnunet_core.workflow.config import Execution, check_config
from nnunet_core.cluster import stop_signal
from nnunet_core.workflow import resource_owner, work_lock
from nnunet_core.workflow.run_context import RunContext

# The stop signal (SIGUSR1, or $NNUNET_STOP_SIGNAL) asks a training to stop before the walltime;
# SLURM sends it to every process of the job step. This process plays the Snakemake role of
# nnunet_core.cluster.stop_signal: it exports the setting (the profile's --signal and every job read it)
# and ignores the signal, and so does the rule's shell (inherited); only the trainer reacts.
stop_signal.for_workflow_process()

# The Snakefile typed `--config` values and checked every key; Snakemake's validation fills in
# the schema defaults (upstream's method).
validate(config, schema="../schemas/config.schema.yaml")
# (also: the work_dir apart from the raw data, paths no quoting makes safe refused)
check_config(config, Execution.of_workflow(workflow))
# The config owns a fold job's memory, time, GPUs and threads: a profile's or the command line's
# set-resources of them is said once, a GPU count against training.gpus_per_job refused.
if workflow.is_main_process:
    resource_owner.announce(config, workflow)
# One workflow per work_dir, also when started from another --directory (nnunet_core.workflow.work_lock).
work_lock.lock_when_started(workflow, config["work_dir"])

RUN = RunContext.of_workflow(config, workflow, checkpoints)
# A long schedule on the CPU, an incomplete test set: said once; a live run's console then
# shows one line per job (nnunet_core.workflow.console).
RUN.announce_start()
# Jobs find `nnunet-core` next to this interpreter, even from a venv that is not activated.
os.environ["PATH"] = (
    f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
)


include: "paths.smk"
