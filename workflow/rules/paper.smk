# Several datasets or seeds in one run (config `datasets`, `seeds`): run.smk once per (dataset,
# seed) as a Snakemake module, its rules named <Dataset>_seed<n>_<rule>, so that every stage is
# a job of its own and the runs go in parallel. Each module has its own complete config
# (nnunet_core.workflow.runs); preprocessing is per dataset: the seeds' modules declare the same
# files, which the first seed's rules make. Then the results table across every run. With
# `methods`, one module per (dataset, seed, method), <Dataset>_seed<n>_<method>: methods with
# the same planner share plans and preprocessing, and methods_table compares them.
import json
import shlex
import sys
from pathlib import Path

from snakemake.utils import validate

from nnunet_core.layout.work import (
    METHODS_COMPARISON,
    METHODS_FIGURE,
    PAPER_FOLDER,
    REPRODUCE_ARCHIVE,
    WORK_LOGS,
)
from nnunet_core.workflow import paper_rules, resource_owner, work_lock
from nnunet_core.workflow.console import job_message
from nnunet_core.workflow.runs import (
    methods_table_flags,
    paper_table_flags,
    reproduce_run_flags,
    run_instances,
)

PAPER_RUNS = run_instances(config)
# With methods, the results table across datasets and seeds is the baseline's.
TABLE_RUNS = [run for run in PAPER_RUNS if run.baseline]
WITH_METHODS = bool(config.get("methods"))
# Each job's one console line in a live run (nnunet_core.workflow.console); dry runs: blocks.
PAPER_JOB = job_message(workflow.output_settings.dryrun)
PAPER_TARGET_JOB = job_message(workflow.output_settings.dryrun, log=False)
RUN_SNAKEFILE = Path(workflow.basedir) / "workflow" / "rules" / "run.smk"
# Rule names of each run's module, to order the rules that make the same files.
RULES_OF_RUN = {}
# A profile's set-resources and set-threads name the rules (train: {slurm_partition: gpu, ...});
# they hold for every run's rule of that name (Dataset004_Hippocampus_seed1_train), given to
# Snakemake before the module makes the rule (Snakemake reads them by the rule's own name).
RESOURCES_BY_RULE = resource_owner.set_resources(workflow)
THREADS_BY_RULE = resource_owner.set_threads(workflow)
PROFILE_SETTINGS = [
    (table, dict(table)) for table in (RESOURCES_BY_RULE, THREADS_BY_RULE)
]

for paper_run in PAPER_RUNS:
    validate(paper_run.config, schema="../schemas/config.schema.yaml")
    run_module = paper_run.name
    run_prefix = f"{paper_run.name}_"
    rules_before = {known.name for known in workflow.rules}
    for table, by_name in PROFILE_SETTINGS:
        for rule_name, setting in paper_rules.prefixed_settings(
            by_name, run_prefix
        ).items():
            table.setdefault(rule_name, setting)

    module:
        name: run_module
        snakefile:
            RUN_SNAKEFILE
        config:
            paper_run.config

    # `snakemake reproduce` packs every run at once (below).
    use rule * from run_module exclude reproduce as run_prefix*

    RULES_OF_RUN[paper_run.name] = paper_rules.rules_added(
        rules_before, [added.name for added in workflow.rules], run_prefix
    )


# The rules of a later run that make the same files as an earlier run's (a dataset's checks,
# plans and preprocessing, shared by its seeds) give way to the earlier run's.
def outputs_of_rule(name):
    return [str(f) for f in workflow.get_rule(name).output]


for first, second in paper_rules.shared_rule_order(
    [run.name for run in PAPER_RUNS], RULES_OF_RUN, outputs_of_rule
):
    workflow.ruleorder(first, second)


# The work_dir of every run (each run's config is complete now, schema defaults filled in).
WORK = Path(PAPER_RUNS[0].config["work_dir"])
# A module's `onstart` does not count: the work_dir lock (common.smk's in a plain run) is taken here.
work_lock.lock_when_started(workflow, WORK)
PAPER = WORK / PAPER_FOLDER
PAPER_DATASETS = list(dict.fromkeys(run.dataset for run in PAPER_RUNS))
# The inputs of one stage rule of every run (`snakemake trained` trains every dataset and seed).
STAGE_OF_EVERY_RUN = {
    stage: [getattr(rules, f"{run.name}_{stage}").input for run in PAPER_RUNS]
    for stage in ("all", "planned", "preprocessed", "trained", "selected")
}


rule all:
    default_target: True
    input:
        STAGE_OF_EVERY_RUN["all"],
        PAPER / "results_table.csv",
        [PAPER / f"{METHODS_COMPARISON}.csv"] if WITH_METHODS else [],
    message:
        PAPER_TARGET_JOB


rule planned:
    input:
        STAGE_OF_EVERY_RUN["planned"],
    message:
        PAPER_TARGET_JOB


rule preprocessed:
    input:
        STAGE_OF_EVERY_RUN["preprocessed"],
    message:
        PAPER_TARGET_JOB


rule trained:
    input:
        STAGE_OF_EVERY_RUN["trained"],
    message:
        PAPER_TARGET_JOB


rule selected:
    input:
        STAGE_OF_EVERY_RUN["selected"],
    message:
        PAPER_TARGET_JOB


# The results table over every dataset and seed (mean and sd over seeds, bootstrap intervals
# over cases, Wilcoxon against the selected model), one per dataset, and each methods paragraph.
rule paper_tables:
    input:
        reports=[run.report_page() for run in TABLE_RUNS],
        test_summaries=[summary for run in TABLE_RUNS for summary in run.test_summary()],
    output:
        table=report(
            PAPER / "results_table.csv",
            caption="../report/paper_tables.rst",
            category="Paper",
        ),
        latex=PAPER / "results_table.tex",
        # With methods, each methods.md describes every method: methods_table writes it.
        per_dataset=[
            PAPER / dataset / name
            for dataset in PAPER_DATASETS
            for name in ("results_table.csv", "results_table.tex")
            + (() if WITH_METHODS else ("methods.md",))
        ],
    log:
        WORK / WORK_LOGS / "paper_tables.log",
    localrule: True
    params:
        runs=paper_table_flags(TABLE_RUNS),
        output=PAPER,
        methods_text="--no-methods-text" if WITH_METHODS else "",
    message:
        PAPER_JOB
    shell:
        "nnunet-core paper-table {params.runs} {params.methods_text} -o {params.output:q} "
        "> {log:q} 2>&1"


# With methods: each method against the baseline per dataset (mean and sd over seeds, the
# difference with a bootstrap interval over cases, Wilcoxon with Holm's correction across
# datasets, the mean rank), and a figure of each case's Dice per dataset.
if WITH_METHODS:

    rule methods_table:
        input:
            reports=[run.report_page() for run in PAPER_RUNS],
            test_summaries=[s for run in PAPER_RUNS for s in run.test_summary()],
        output:
            table=report(
                PAPER / f"{METHODS_COMPARISON}.csv",
                caption="../report/methods_table.rst",
                category="Paper",
            ),
            latex=PAPER / f"{METHODS_COMPARISON}.tex",
            figures=[
                PAPER / dataset / f"{METHODS_FIGURE}.{kind}"
                for dataset in PAPER_DATASETS
                for kind in ("png", "pdf", "svg")
            ],
            methods=[PAPER / dataset / "methods.md" for dataset in PAPER_DATASETS],
        log:
            WORK / WORK_LOGS / "methods_table.log",
        localrule: True
        params:
            runs=methods_table_flags(PAPER_RUNS),
            output=PAPER,
        shell:
            "nnunet-core methods-table {params.runs} -o {params.output:q} > {log:q} 2>&1"


# A reader's rerun of every dataset and seed (work_dir/reproduce.tar.gz): the config as given,
# each run's plans, splits, tables and provenance, the tables across them and every method's
# user trainer file (nnunet_core.workflow.reproduce; `nnunet-core reproduce unpack` and `check`
# as for one dataset).
rule reproduce:
    input:
        rules.paper_tables.output,
        [rules.methods_table.output] if WITH_METHODS else [],
    output:
        WORK / REPRODUCE_ARCHIVE,
    log:
        WORK / WORK_LOGS / "reproduce.log",
    localrule: True
    params:
        config=json.dumps(config, sort_keys=True),
        work=WORK,
        runs=reproduce_run_flags(PAPER_RUNS),
        methods="--methods" if WITH_METHODS else "",
        command=shlex.join(sys.argv),
    message:
        PAPER_JOB
    shell:
        "nnunet-core reproduce pack --config-json {params.config:q} --work {params.work:q} "
        "{params.runs} --paper {params.methods} --snakemake-command {params.command:q} -o {output:q} "
        "> {log:q} 2>&1"
