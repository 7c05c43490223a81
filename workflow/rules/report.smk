# The report: figures and tables under results/D/report, captioned for `snakemake --report`.
import json
import shlex
import sys


rule report:
    input:
        selection=INFERENCE_INFORMATION,
        test_summary=test_summary_if_any,
    output:
        curves=report(
            directory(REPORT / "training_curves"),
            patterns=["training_curves_{model}.png"],
            caption="../report/training_curves.rst",
            category="Training",
        ),
        cv_dice=report(
            REPORT / "cv_dice.png",
            caption="../report/cv_dice.rst",
            category="Cross-validation",
        ),
        selection=report(
            REPORT / "selection.png",
            caption="../report/selection.rst",
            category="Selection",
        ),
        per_class=report(
            REPORT / "per_class.csv",
            caption="../report/per_class.rst",
            category="Cross-validation",
        ),
        summary=report(
            REPORT / "summary.csv",
            caption="../report/summary.rst",
            category="Selection",
        ),
        run_times=report(
            REPORT / "run_times.png",
            caption="../report/run_times.rst",
            category="Run times",
        ),
        data_wait=report(
            REPORT / "data_wait.png",
            caption="../report/data_wait.rst",
            category="Run times",
        ),
        results_table=report(
            REPORT / "results_table.csv",
            caption="../report/results_table.rst",
            category="Paper",
        ),
        results_table_tex=REPORT / "results_table.tex",
        methods=report(
            REPORT / "methods.md",
            caption="../report/methods.rst",
            category="Paper",
        ),
        # each figure's print versions (PDF, SVG) unless report.print_figures is false
        cv_dice_pdf=REPORT / "cv_dice.pdf" if config["report"]["print_figures"] else [],
        page=REPORT_PAGE,
        test_dice=test_dice_figure(),
    log:
        LOGS / "report.log",
    params:
        dataset=DATASET,
        roots=ROOT_FLAGS,
        test_summary=test_summary_flag,
        test_set_note=test_set_note_flag,
        seed=config["seed"],
        print_figures="" if config["report"]["print_figures"] else "--no-print-figures",
        # every job's run time: Snakemake's records of the jobs whose logs are this run's
        records=shlex.join(
            ["--snakemake-records", ".snakemake/metadata", "--job-logs"]
            + sorted({str(LOGS), str(DATASET_LOGS)})
        ),
    message:
        JOB
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
        table=REPORT / "results_table.csv",
        methods=REPORT / "methods.md",
    output:
        WORK / REPRODUCE_ARCHIVE,
    log:
        LOGS / "reproduce.log",
    localrule: True
    params:
        config=json.dumps(config, sort_keys=True),
        work=WORK,
        run=shlex.join([str(RAW), PLANS_NAME, str(RESULTS)]),
        command=shlex.join(sys.argv),
    message:
        JOB
    shell:
        "nnunet-core reproduce pack --config-json {params.config:q} --work {params.work:q} "
        "--run {params.run} --snakemake-command {params.command:q} -o {output:q} > {log:q} 2>&1"
