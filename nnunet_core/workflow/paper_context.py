"""The context of paper mode (several datasets, seeds or methods: workflow/rules/paper.smk).

What paper.smk's own rules read, built once: every run (``runs.RunInstance``: a dataset, a seed
and, with ``methods``, a method), the runs of the results table, the work_dir and its paper
folder, the datasets, the console messages, and the run.smk that each run loads as a Snakemake
module. Each module builds its own ``run_context.RunContext``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnunet_core.layout.work import PAPER_FOLDER
from nnunet_core.workflow.run_context import JobMessages
from nnunet_core.workflow.runs import RunInstance, run_instances


@dataclass(frozen=True, eq=False)
class PaperContext:
    """The runs and folders of one paper-mode workflow (``of_workflow``)."""

    runs: list[RunInstance]
    with_methods: bool
    messages: JobMessages
    run_snakefile: Path
    # each run's rule names without its prefix, filled as paper.smk loads the run's module
    rules_of_run: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def of_workflow(cls, config: dict[str, Any], workflow: Any) -> PaperContext:
        return cls(
            runs=run_instances(config),
            with_methods=bool(config.get("methods")),
            messages=JobMessages.of_dry_run(bool(workflow.output_settings.dryrun)),
            run_snakefile=Path(workflow.basedir) / "workflow" / "rules" / "run.smk",
        )

    @property
    def run_prefixes(self) -> list[str]:
        """The prefix of each run's rule names (``Dataset004_Hippocampus_seed1_``)."""
        return [f"{run.name}_" for run in self.runs]

    @property
    def table_runs(self) -> list[RunInstance]:
        """The runs of the results table across datasets and seeds: with methods, the
        baseline's."""
        return [run for run in self.runs if run.baseline]

    @property
    def work(self) -> Path:
        """The work_dir of every run (read once each run's config is complete, after its
        validation filled in the schema defaults)."""
        return Path(self.runs[0].config["work_dir"])

    @property
    def folder(self) -> Path:
        """work_dir/paper: the tables across runs."""
        return self.work / PAPER_FOLDER

    @property
    def datasets(self) -> list[str]:
        return list(dict.fromkeys(run.dataset for run in self.runs))

    def stage_inputs(self, rules: Any, stage: str) -> list[Any]:
        """The inputs of one stage rule (all, planned, ...) of every run: `snakemake trained`
        trains every dataset and seed. ``rules``: Snakemake's rules of this workflow."""
        return [getattr(rules, f"{run.name}_{stage}").input for run in self.runs]
