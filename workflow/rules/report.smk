# The report: figures and tables under results/D/report, captioned for `snakemake --report`.
import json
import shlex
import sys

from nnunet_core.layout.results import REPORT_EXAMPLES_FOLDER
from nnunet_core.layout.work import REPRODUCE_ARCHIVE


rule report:
    input:
        selection=RUN.paths.inference_information,
        test_summary=RUN.inputs.test_summary_if_any,
    output:
        curves=report(
            directory(RUN.paths.report / "training_curves"),
            patterns=["training_curves_{model}.png"],
            caption="../report/training_curves.rst",
            category="Training",
        ),
        # the best, median and worst test (else cross-validation) case: <rank>_<case>.png
        examples=report(
            directory(RUN.paths.report / REPORT_EXAMPLES_FOLDER),
            patterns=["{rank,best|median|worst|only}_{case}.png"],
            caption="../report/qualitative.rst",
            category="Qualitative examples",
        ),
        cv_dice=report(
            RUN.paths.report / "cv_dice.png",
            caption="../report/cv_dice.rst",
            category="Cross-validation",
        ),
        selection=report(
            RUN.paths.report / "selection.png",
            caption="../report/selection.rst",
            category="Selection",
        ),
        per_class=report(
            RUN.paths.report / "per_class.csv",
            caption="../report/per_class.rst",
            category="Cross-validation",
        ),
        summary=report(
            RUN.paths.report / "summary.csv",
            caption="../report/summary.rst",
            category="Selection",
        ),
        run_times=report(
            RUN.paths.report / "run_times.png",
            caption="../report/run_times.rst",
            category="Run times",
        ),
        data_wait=report(
            RUN.paths.report / "data_wait.png",
            caption="../report/data_wait.rst",
            category="Run times",
        ),
        results_table=report(
            RUN.paths.report / "results_table.csv",
            caption="../report/results_table.rst",
            category="Paper",
        ),
        results_table_tex=RUN.paths.report / "results_table.tex",
        methods=report(
            RUN.paths.report / "methods.md",
            caption="../report/methods.rst",
            category="Paper",
        ),
        # each figure's print versions (PDF, SVG) unless report.print_figures is false
        cv_dice_pdf=(
            RUN.paths.report / "cv_dice.pdf"
            if config["report"]["print_figures"]
            else []
        ),
        page=RUN.paths.report_page,
        # the test-set figure: only when the test set has labels
        test_dice=(
            report(
                RUN.paths.report / "test_dice.png",
                caption="../report/test_dice.rst",
                category="Test set",
            )
            if RUN.inputs.has_test_labels()
            else []
        ),
    log:
        RUN.paths.logs / "report.log",
    params:
        dataset=RUN.dataset,
        roots=RUN.flags.roots,
        test_summary=RUN.test_summary_flag,
        test_set_note=RUN.test_set_note_flag,
        seed=config["seed"],
        print_figures="" if config["report"]["print_figures"] else "--no-print-figures",
        # every job's run time: Snakemake's records of the jobs whose logs are this run's
        records=shlex.join(
            ["--snakemake-records", ".snakemake/metadata", "--job-logs"]
            + sorted({str(RUN.paths.logs), str(RUN.paths.dataset_logs)})
        ),
    message:
        RUN.messages.job
    shell:
        "nnunet-core report -d {params.dataset:q} {params.test_summary} {params.test_set_note} "
        "--seed {params.seed:q} {params.print_figures} {params.records} {params.roots} "
        "> {log:q} 2>&1"


# A reader's rerun: `snakemake reproduce` packs the config (defaults filled in), plans, splits,
# provenance, raw-data checksums, the commands and each user trainer's source file into
# work_dir/reproduce.tar.gz; `nnunet-core
# reproduce unpack` and `check` rerun it and compare the tables byte for byte.
rule reproduce:
    input:
        table=RUN.paths.report / "results_table.csv",
        methods=RUN.paths.report / "methods.md",
    output:
        RUN.paths.work / REPRODUCE_ARCHIVE,
    log:
        RUN.paths.logs / "reproduce.log",
    localrule: True
    params:
        config=json.dumps(config, sort_keys=True),
        work=RUN.paths.work,
        run=shlex.join([str(RUN.paths.raw), RUN.plans_name, str(RUN.paths.results)]),
        command=shlex.join(sys.argv),
    message:
        RUN.messages.job
    shell:
        "nnunet-core reproduce pack --config-json {params.config:q} --work {params.work:q} "
        "--run {params.run} --snakemake-command {params.command:q} -o {output:q} > {log:q} 2>&1"
