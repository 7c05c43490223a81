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

from snakemake.io import strip_wildcard_constraints
from snakemake.utils import validate

from nnunet_core.layout.work import (
    METHODS_COMPARISON,
    METHODS_FIGURE,
    REPRODUCE_ARCHIVE,
    WORK_LOGS,
)
from nnunet_core.workflow import paper_rules, work_lock
from nnunet_core.workflow.paper_context import PaperContext
from nnunet_core.workflow.runs import (
    methods_table_flags,
    paper_table_flags,
    reproduce_run_flags,
)

# The runs, their folders and the console messages, built once (each run's module builds its
# own run context).
PAPER = PaperContext.of_workflow(config, workflow)
# A profile's set-resources and set-threads name the rules (train: {slurm_partition: gpu, ...});
# they hold for every run's rule of that name (Dataset004_Hippocampus_seed1_train): handed to
# Snakemake before the modules make their rules (Snakemake reads them by the rule's own name).
paper_rules.copy_profile_settings_to_runs(workflow, PAPER.run_prefixes)

for paper_run in PAPER.runs:
    validate(paper_run.config, schema="../schemas/config.schema.yaml")
    run_module = paper_run.name
    run_prefix = f"{paper_run.name}_"
    rules_before = {known.name for known in workflow.rules}

    module:
        name: run_module
        snakefile:
            PAPER.run_snakefile
        config:
            paper_run.config

    # `snakemake reproduce` packs every run at once (below).
    use rule * from run_module exclude reproduce as run_prefix*

    # Rule names of each run's module, to order the rules that make the same files.
    PAPER.rules_of_run[paper_run.name] = paper_rules.rules_added(
        rules_before, [added.name for added in workflow.rules], run_prefix
    )


# The rules of a later run that make the same files as an earlier run's (a dataset's checks,
# plans and preprocessing, shared by its seeds) give way to the earlier run's.
# (the patterns without their wildcard constraints: each run's preprocess rule makes only its
# own planner's data, yet two planners may share some, as ResEncM shares nnUNetPlans_2d)
def outputs_of_rule(name):
    return [strip_wildcard_constraints(str(f)) for f in workflow.get_rule(name).output]


for first, second in paper_rules.shared_rule_order(
    [run.name for run in PAPER.runs], PAPER.rules_of_run, outputs_of_rule
):
    workflow.ruleorder(first, second)


# A module's `onstart` does not count: the work_dir lock (common.smk's in a plain run) is taken
# here, on the work_dir of every run (each run's config is complete now, defaults filled in).
work_lock.lock_when_started(workflow, PAPER.work)


rule all:
    default_target: True
    input:
        PAPER.stage_inputs(rules, "all"),
        PAPER.folder / "results_table.csv",
        [PAPER.folder / f"{METHODS_COMPARISON}.csv"] if PAPER.with_methods else [],
    message:
        PAPER.messages.target


rule planned:
    input:
        PAPER.stage_inputs(rules, "planned"),
    message:
        PAPER.messages.target


rule preprocessed:
    input:
        PAPER.stage_inputs(rules, "preprocessed"),
    message:
        PAPER.messages.target


rule trained:
    input:
        PAPER.stage_inputs(rules, "trained"),
    message:
        PAPER.messages.target


rule selected:
    input:
        PAPER.stage_inputs(rules, "selected"),
    message:
        PAPER.messages.target


# The results table over every dataset and seed (mean and sd over seeds, bootstrap intervals
# over cases, Wilcoxon against the selected model), one per dataset, and each methods paragraph.
rule paper_tables:
    input:
        reports=[run.report_page() for run in PAPER.table_runs],
        test_summaries=[
            summary for run in PAPER.table_runs for summary in run.test_summary()
        ],
    output:
        table=report(
            PAPER.folder / "results_table.csv",
            caption="../report/paper_tables.rst",
            category="Paper",
        ),
        latex=PAPER.folder / "results_table.tex",
        # With methods, each methods.md describes every method: methods_table writes it.
        per_dataset=[
            PAPER.folder / dataset / name
            for dataset in PAPER.datasets
            for name in ("results_table.csv", "results_table.tex")
            + (() if PAPER.with_methods else ("methods.md",))
        ],
    log:
        PAPER.work / WORK_LOGS / "paper_tables.log",
    localrule: True
    params:
        runs=paper_table_flags(PAPER.table_runs),
        output=PAPER.folder,
        methods_text="--no-methods-text" if PAPER.with_methods else "",
    message:
        PAPER.messages.job
    shell:
        "nnunet-core paper-table {params.runs} {params.methods_text} -o {params.output:q} "
        "> {log:q} 2>&1"


# With methods: each method against the baseline per dataset (mean and sd over seeds, the
# difference with a bootstrap interval over cases, Wilcoxon with Holm's correction across
# datasets, the mean rank), and a figure of each case's Dice per dataset.
if PAPER.with_methods:

    rule methods_table:
        input:
            reports=[run.report_page() for run in PAPER.runs],
            test_summaries=[s for run in PAPER.runs for s in run.test_summary()],
        output:
            table=report(
                PAPER.folder / f"{METHODS_COMPARISON}.csv",
                caption="../report/methods_table.rst",
                category="Paper",
            ),
            latex=PAPER.folder / f"{METHODS_COMPARISON}.tex",
            figures=[
                PAPER.folder / dataset / f"{METHODS_FIGURE}.{kind}"
                for dataset in PAPER.datasets
                for kind in ("png", "pdf", "svg")
            ],
            methods=[
                PAPER.folder / dataset / "methods.md" for dataset in PAPER.datasets
            ],
        log:
            PAPER.work / WORK_LOGS / "methods_table.log",
        localrule: True
        params:
            runs=methods_table_flags(PAPER.runs),
            output=PAPER.folder,
        shell:
            "nnunet-core methods-table {params.runs} -o {params.output:q} > {log:q} 2>&1"


# A reader's rerun of every dataset and seed (work_dir/reproduce.tar.gz): the config as given,
# each run's plans, splits, tables and provenance, the tables across them and every method's
# user trainer file (nnunet_core.workflow.reproduce; `nnunet-core reproduce unpack` and `check`
# as for one dataset).
rule reproduce:
    input:
        rules.paper_tables.output,
        [rules.methods_table.output] if PAPER.with_methods else [],
    output:
        PAPER.work / REPRODUCE_ARCHIVE,
    log:
        PAPER.work / WORK_LOGS / "reproduce.log",
    localrule: True
    params:
        config=json.dumps(config, sort_keys=True),
        work=PAPER.work,
        runs=reproduce_run_flags(PAPER.runs),
        methods="--methods" if PAPER.with_methods else "",
        command=shlex.join(sys.argv),
    message:
        PAPER.messages.job
    shell:
        "nnunet-core reproduce pack --config-json {params.config:q} --work {params.work:q} "
        "{params.runs} --paper {params.methods} --snakemake-command {params.command:q} -o {output:q} "
        "> {log:q} 2>&1"
