"""Write ``results/D/report/``: figures, tables and a short ``report.md`` linking them.

What a part needs but cannot find is skipped and listed under "Notes" in ``report.md``; only a
missing ``inference_information.json`` stops the report (``collect`` raises, naming the file and
the command that writes it). Report files of an earlier run that this run did not write (say
``test_dice.png`` after the test labels went away) are removed, so the folder never mixes runs.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from nnunet_core.io.removal import remove_file
from nnunet_core.layout.results import REPORT_PAGE_MD
from nnunet_core.report import bottleneck, figures, paper_tables, qualitative, tables
from nnunet_core.report.collect import FOREGROUND, ReportData, ReportInputError, collect
from nnunet_core.report.methods import methods_paragraph
from nnunet_core.report.paper_data import Run, run_frame
from nnunet_core.report.summaries import configuration_of

REPORT_DIR = "report"
# the caption line of every table of the report (the paper table averages the same way)
AVERAGING_LINE = (
    f"each foreground mean is the {paper_tables.AVERAGING}, as nnU-Net's `foreground_mean`; "
    "the results table's means are the same numbers."
)
# one figure per model folder, in their own folder so the workflow can declare it as one output
CURVES_DIR = "training_curves"
STALE_PATTERNS = (
    f"{CURVES_DIR}/training_curves_*.png",
    f"{qualitative.QUALITATIVE_DIR}/*.png",
    "cv_dice.png",
    "selection.png",
    "test_dice.png",
    "run_times.png",
    bottleneck.FIGURE,
    "per_class.csv",
    "per_class.md",
    "per_fold.csv",
    "summary.csv",
    "results_table.csv",
    "results_table.tex",
    "methods.md",
    REPORT_PAGE_MD,
)
# the print versions of every figure (figures.PRINT_FORMATS)
STALE_PATTERNS += tuple(
    p.removesuffix(".png") + f".{kind}"
    for p in STALE_PATTERNS
    if p.endswith(".png")
    for kind in figures.PRINT_FORMATS
)


def curve_file_names(data: ReportData) -> dict[str, str]:
    """Model folder -> ``training_curves_<config>.png`` (the full model name if configs repeat)."""
    models = list(dict.fromkeys(data.curves["model"]))
    configs = [configuration_of(m) for m in models]
    return {
        m: f"training_curves_{c if configs.count(c) == 1 else m}.png"
        for m, c in zip(models, configs, strict=True)
    }


def _fmt(value: float) -> str:
    return "NaN" if value is None or math.isnan(value) else f"{value:.4f}"


def _scope(labels_or_regions: object, data: ReportData) -> str:
    """``1`` -> ``a``; ``[1, 2]`` -> ``a + b (together)``: what a postprocessing step acted on."""
    if isinstance(labels_or_regions, list):
        parts = [_scope(v, data) for v in labels_or_regions]
        return " + ".join(parts) + " (together)" if len(parts) > 1 else parts[0]
    key = (
        str(tuple(labels_or_regions))
        if isinstance(labels_or_regions, tuple)
        else str(labels_or_regions)
    )
    return data.class_names.get(key, key)


def _winner_label(data: ReportData) -> str:
    chosen = data.candidates[data.candidates["selected"]]
    return str(chosen["label"].iloc[0]) if len(chosen) else "?"


def report_markdown(
    data: ReportData,
    written: list[Path],
    per_class_md: str,
    methods: str | None = None,
    examples: list[str] | None = None,
) -> str:
    """The landing page: headline numbers, then every figure and table in reading order;
    ``examples``: the qualitative examples' section (``qualitative.section``)."""
    names = {p.name for p in written}
    lines = [f"# Results report: {data.dataset}", ""]
    if data.selection is not None:
        sel = data.selection
        steps = ", ".join(_scope(s.get("labels_or_regions"), data) for s in sel.steps) or "none"
        lines.append(
            f"Selected model: **{_winner_label(data)}** (`{sel.winner}`): cross-validation "
            f"foreground-mean Dice {_fmt(sel.dice_pre_pp)}, {_fmt(sel.dice_post_pp)} after "
            f"postprocessing (largest component kept for: {steps})."
        )
    if data.test_dice is not None:
        fg = data.test_dice.loc[data.test_dice["label_key"] == FOREGROUND, "dice"]
        n_cases = data.test_case_dice["case"].nunique() if data.test_case_dice is not None else 0
        lines.append(
            f"Test set: foreground-mean Dice **{_fmt(float(fg.iloc[0]))}** over {n_cases} cases."
        )
    lines += ["", "## Cross-validation", ""]
    lines += ["![Cross-validation Dice](cv_dice.png)", "", per_class_md]
    lines += [f"Averaging: {AVERAGING_LINE}", ""]
    links = ["[per_class.csv](per_class.csv)", "[summary.csv](summary.csv)"]
    if "per_fold.csv" in names:
        links.append("[per_fold.csv](per_fold.csv) (each fold's own validation)")
    lines.append("Tables: " + ", ".join(links))
    if "selection.png" in names:
        lines += ["", "## Selection and postprocessing", "", "![Selection](selection.png)"]
    if "test_dice.png" in names:
        lines += ["", "## Test set", "", "![Test Dice](test_dice.png)"]
    lines += examples or []
    curve_files = curve_file_names(data)
    if curve_files:
        lines += ["", "## Training curves", ""]
        for model, file_name in curve_files.items():
            image = f"{CURVES_DIR}/{file_name}"
            lines += [f"### {model}", "", f"![Training curves of {model}]({image})", ""]
        lines.pop()
    if bottleneck.FIGURE in names:
        lines += bottleneck.data_wait_section(data.curves)
    if "run_times.png" in names:
        lines += ["", "## Run times", "", "![Run times](run_times.png)", ""]
        kinds = ", ".join(dict.fromkeys(data.run_times["stage"]))
        lines.append(f"{len(data.run_times)} jobs of these kinds, in start order: {kinds}.")
    if methods is not None:
        lines += ["", "## For the paper", "", methods, ""]
        lines.append(
            "Results table: [results_table.csv](results_table.csv), "
            "[results_table.tex](results_table.tex) (booktabs); "
            "methods paragraph: [methods.md](methods.md)"
        )
    if data.notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in data.notes]
    return "\n".join(_with_print_links(lines)) + "\n"


def _with_print_links(lines: list[str]) -> list[str]:
    """After each figure, links to its PDF and SVG (for print), where they are written."""
    if not figures.printing():
        return lines
    out = []
    for line in lines:
        out.append(line)
        if line.startswith("![") and line.endswith(".png)"):
            stem = line[line.rindex("(") + 1 : -len(".png)")]
            out += ["", f"Print versions: [PDF]({stem}.pdf), [SVG]({stem}.svg)"]
    return out


def _remove_stale(output_dir: Path, written: list[Path]) -> None:
    """Files of an earlier report this one did not write, and the temporary files of an earlier
    report writer that was killed (``io.atomic``'s ``.<name>.<random><suffix>`` next to each)."""
    keep = {p.resolve() for p in written}
    for pattern in STALE_PATTERNS:
        folder, _, name = pattern.rpartition("/")
        temporaries = f"{folder}/.{name}.*" if folder else f".{name}.*"
        for path in output_dir.glob(pattern):
            if path.resolve() not in keep:
                remove_file(path, inside=[output_dir])
        for path in output_dir.glob(temporaries):
            if path.is_file():
                remove_file(path, inside=[output_dir])


def write_paper_files(data: ReportData, output_dir: Path, run: Run) -> tuple[list[Path], str]:
    """The results table (CSV, LaTeX) and the methods paragraph of one run; files and text."""
    frame, selected = run_frame(run)
    table = paper_tables.results_table([frame], {run.dataset: [selected]}, seed=run.seed)
    caption = paper_tables.table_caption([data.dataset])
    methods = methods_paragraph(run.results_dir, [run.seed], data.class_names)
    written = [
        paper_tables.write_csv(table, output_dir / "results_table.csv"),
        paper_tables.write_latex(table, caption, output_dir / "results_table.tex"),
        tables.write_markdown(methods + "\n", output_dir / "methods.md"),
    ]
    return written, methods


def write_report(
    data: ReportData,
    output_dir: Path,
    run: Run | None = None,
    examples: tuple[Path | None, qualitative.ExampleSource | None] = (None, None),
) -> list[Path]:
    """Every figure and table ``data`` allows, then ``report.md``; returns the files written.
    With ``run``, also the paper's results table and methods paragraph; ``examples``: the raw
    dataset folder and the summary the qualitative examples come from."""
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / CURVES_DIR).mkdir(exist_ok=True)
    written: list[Path] = []
    for model, file_name in curve_file_names(data).items():
        curves = data.curves[data.curves["model"] == model]
        title = f"{data.dataset}: training of {model}"
        target = output_dir / CURVES_DIR / file_name
        written.append(figures.training_curves(curves, title, target))
    written.append(figures.cv_dice(data.candidates, data.cv_fold_dice, output_dir / "cv_dice.png"))
    label = _winner_label(data)
    if data.selection is not None:
        written.append(figures.selection(data.selection, label, output_dir / "selection.png"))
    if data.test_dice is not None:
        reference = data.selection.before_after if data.selection is not None else None
        written.append(
            figures.test_dice(
                data.test_dice, data.test_case_dice, reference, label, output_dir / "test_dice.png"
            )
        )
    raw_dir, source = examples
    pictures, section = qualitative.write_examples(
        output_dir, raw_dir, source, data.class_names, data.notes
    )
    written += pictures
    written.append(bottleneck.data_wait_figure(data.curves, output_dir / bottleneck.FIGURE))
    if not data.run_times.empty:
        written.append(figures.run_times(data.run_times, output_dir / "run_times.png"))
    per_class = tables.per_class_table(data)
    per_class_md = tables.to_markdown(per_class)
    written.append(tables.write_csv(per_class, output_dir / "per_class.csv"))
    written.append(tables.write_markdown(per_class_md, output_dir / "per_class.md"))
    if not data.fold_dice.empty:
        written.append(tables.write_csv(tables.fold_table(data), output_dir / "per_fold.csv"))
    written.append(tables.write_csv(tables.summary_table(data), output_dir / "summary.csv"))
    written += [v for p in written if p.suffix == ".png" for v in figures.print_versions(p)]
    methods = None
    if run is not None:
        try:
            paper_files, methods = write_paper_files(data, output_dir, run)
            written += paper_files
        except ReportInputError as exc:
            data.notes.append(f"results table and methods paragraph skipped: {exc}")
    page = report_markdown(data, written, per_class_md, methods, section)
    written.append(tables.write_markdown(page, output_dir / REPORT_PAGE_MD))
    _remove_stale(output_dir, written)
    return written


def build_report(
    results_dataset_dir: str | os.PathLike,
    output_dir: str | os.PathLike | None = None,
    test_summary: str | os.PathLike | None = None,
    snakemake_logs: str | os.PathLike | None = None,
    seed: int = 0,
    test_set_note: str | None = None,
    job_records: tuple[Path, list[Path]] | None = None,
    print_figures: bool = True,
    raw_dataset_dir: str | os.PathLike | None = None,
) -> list[Path]:
    """Collect ``results/DatasetXXX_Name`` and write its report (default ``<it>/report``);
    ``seed`` is the training seed the results table names, ``test_set_note`` why there is no
    test summary (the report's notes say it); ``job_records``: Snakemake's metadata folder and
    this run's log folders (run times of every job); ``print_figures``: each figure's PDF and
    SVG too (an earlier report's are removed when off); ``raw_dataset_dir``: the raw dataset
    whose images the qualitative examples show (none without it)."""
    results_dataset_dir = Path(results_dataset_dir)
    target = Path(output_dir) if output_dir is not None else results_dataset_dir / REPORT_DIR
    data = collect(results_dataset_dir, test_summary, snakemake_logs, test_set_note, job_records)
    summary = Path(test_summary) if test_summary is not None else None
    run = Run(data.dataset, seed, results_dataset_dir, summary)
    source = qualitative.example_source(summary, data.selected_cv_summary)
    raw = Path(raw_dataset_dir) if raw_dataset_dir is not None else None
    with figures.print_figures(print_figures):
        return write_report(data, target, run, (raw, source))
