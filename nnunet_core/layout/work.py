"""The workflow's work tree: the folder names under ``work_dir`` that only the workflow uses.

    work_dir/raw/ preprocessed/ results/          the three roots (upstream's trees inside)
    work_dir/predictions/<Dataset>/                test-set predictions (layout.predictions)
    work_dir/logs/<Dataset>/                       one log per job; .workflow.lock
    work_dir/pretrained/                           checkpoints extracted from model archives
    work_dir/paper/                                results tables across datasets and seeds
    work_dir/reproduce.tar.gz                      what a reader needs to rerun the run
                                                   (trainers/<file>.py: each user trainer's code)
    results/seed_<n>/, predictions/seed_<n>/, logs/seed_<n>/   with several seeds
    results/<method>/[seed_<n>/], ...             with methods (config ``methods``)
    work_dir/paper/methods_comparison.csv|.tex     the methods against the baseline
    work_dir/paper/<Dataset>/methods_dice.png|.pdf|.svg   per-case Dice of each method

Kept apart from the upstream trees so that a reader sees which names nnU-Net users know and
which are this workflow's own.
"""

from __future__ import annotations

from pathlib import Path

WORK_RAW = "raw"
WORK_PREPROCESSED = "preprocessed"
WORK_RESULTS = "results"
WORK_LOGS = "logs"
# An exclusive lock in work_dir/logs: one workflow per work_dir (workflow.work_lock).
WORK_LOCK_NAME = ".workflow.lock"
# Checkpoints extracted from model archives (workflow.pretrained).
PRETRAINED_FOLDER = "pretrained"
# With several seeds: each seed's folder under results/, predictions/ and logs/ (seed_1).
SEED_FOLDER_PREFIX = "seed_"
# The results tables across every dataset and seed.
PAPER_FOLDER = "paper"
REPRODUCE_ARCHIVE = "reproduce.tar.gz"
# In that archive, and in the folder it is unpacked into: the source file of each user trainer.
REPRODUCE_TRAINERS = "trainers"
# With methods: the comparison table (.csv, .tex) under paper/, a figure (.png, .pdf, .svg)
# under paper/<Dataset>/.
METHODS_COMPARISON = "methods_comparison"
METHODS_FIGURE = "methods_dice"
# A rule's folder output is written under <folder>.partial and renamed when complete.
STAGING_SUFFIX = ".partial"
# Logs of the fold and prediction jobs in work_dir/logs/<Dataset>/ (the rules' `log:`, read by
# `nnunet-core status`); the braces are the rules' wildcards.
TRAIN_LOG = "train_{configuration}_fold{fold}.log"
PREDICT_LOG = "predict_{configuration}.log"
# The work_dir a config names when it names none (and the rerun's, inside its folder).
DEFAULT_WORK_DIR = "work"


def seed_folder_name(seed: int) -> str:
    """``1`` -> ``seed_1``."""
    return f"{SEED_FOLDER_PREFIX}{seed}"


def method_folder_name(method: str) -> str:
    """A method's folder under results/, predictions/ and logs/: its name (``nomirror``)."""
    return method


def logs_dir(work_dir: str | Path) -> Path:
    return Path(work_dir) / WORK_LOGS


def work_lock_file(work_dir: str | Path) -> Path:
    return logs_dir(work_dir) / WORK_LOCK_NAME


def staging_folder_of(output: str | Path) -> str:
    """Where a rule writes the folder ``output`` before renaming it into place."""
    return f"{output}{STAGING_SUFFIX}"
