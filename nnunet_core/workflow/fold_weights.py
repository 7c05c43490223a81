"""A fold whose validation summary stands without its final weights trains again.

The train rule declares only the fold's validation summary as its output, so that a failure after
the last epoch never deletes ``checkpoint_final.pth`` (Snakemake deletes a failed job's declared
outputs). Snakemake therefore does not notice a user deleting ``checkpoint_final.pth`` to retrain
a fold; this check, run once when the workflow starts, does: the summary that would say "done" is
removed (only inside the fold's own folder), and the console says so in one line.
"""

from __future__ import annotations

from pathlib import Path

from nnunet_core.io.removal import remove_file
from nnunet_core.layout.results import (
    CHECKPOINT_FINAL,
    SUMMARY_JSON,
    VALIDATION_FOLDER,
    fold_dirs_in,
    model_dirs_of,
)


def folds_without_weights(results: Path, trainer: str, plans: str) -> list[Path]:
    """Fold folders of this trainer and plans holding a validation summary but no
    ``checkpoint_final.pth``."""
    found = []
    for model in model_dirs_of(results, trainer, plans):
        for fold in fold_dirs_in(model):
            summary = fold / VALIDATION_FOLDER / SUMMARY_JSON
            if summary.is_file() and not (fold / CHECKPOINT_FINAL).is_file():
                found.append(fold)
    return found


def retrain_folds_without_weights(
    results: Path, trainer: str, plans: str, dry_run: bool
) -> list[str]:
    """The console lines for such folds; outside a dry run their summaries are removed, so the
    train job runs again (and, with no checkpoint left, trains the fold from its start or from
    its checkpoint_latest/best)."""
    lines = []
    for fold in folds_without_weights(results, trainer, plans):
        where = f"{fold.parent.name}/{fold.name}"
        if dry_run:
            lines.append(
                f"{where}: no {CHECKPOINT_FINAL}; a run (not this dry run) trains it again"
            )
            continue
        remove_file(fold / VALIDATION_FOLDER / SUMMARY_JSON, inside=[fold])
        lines.append(f"{where}: no {CHECKPOINT_FINAL}, so the fold trains again")
    return lines
