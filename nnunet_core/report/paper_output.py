"""The paper's files for several runs (datasets x seeds): tables for all and per dataset, and
each dataset's methods paragraph (``nnunet-core paper-table``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nnunet_core.report import paper_tables
from nnunet_core.report.collect import class_names
from nnunet_core.report.methods import methods_paragraph
from nnunet_core.report.paper_data import Run, run_frame
from nnunet_core.report.tables import write_markdown


def write_paper_tables(
    runs: Sequence[Run], output: Path, bootstrap_seed: int = 0, methods_text: bool = True
) -> list[Path]:
    """``results_table.csv/.tex`` over every dataset, and ``<dataset>/`` with its own table and
    ``methods.md`` (not with ``methods_text`` False: a methods comparison writes the one that
    describes every method); returns the files written."""
    frames, selections = [], {}
    for run in runs:
        frame, selected = run_frame(run)
        frames.append(frame)
        selections.setdefault(run.dataset, []).append(selected)
    table = paper_tables.results_table(frames, selections, seed=bootstrap_seed)
    datasets = list(selections)
    written = [
        paper_tables.write_csv(table, output / "results_table.csv"),
        paper_tables.write_latex(
            table, paper_tables.table_caption(datasets), output / "results_table.tex"
        ),
    ]
    for dataset in datasets:
        part = table[table["dataset"] == dataset]
        folder = output / dataset
        written.append(paper_tables.write_csv(part, folder / "results_table.csv"))
        caption = paper_tables.table_caption([dataset])
        written.append(paper_tables.write_latex(part, caption, folder / "results_table.tex"))
        if not methods_text:
            continue
        mine = [r for r in runs if r.dataset == dataset]
        seeds = [r.seed for r in mine]
        first = mine[0].results_dir
        seed_dirs = [(r.seed, r.results_dir) for r in mine]
        text = methods_paragraph(first, seeds, class_names(first, []), seed_dirs)
        written.append(write_markdown(text + "\n", folder / "methods.md"))
    return written
