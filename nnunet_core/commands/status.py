"""Where a workflow run stands: each fold's phase (training: epoch i/N and its ETA; final
validation: case i/N, ``(with npz)`` when it writes probabilities, and its ETA; the metrics), last
pseudo Dice and state (running, stopped: by what, at which epoch, and that the same command
continues; continuing, failed with its log's last line, done; a fold whose training an earlier
attempt did says so), and each prediction job's case i/N.

It reads the files in the work folder only (the jobs' logs and each fold's provenance), so it
works while the workflow runs or after it, for local jobs and cluster jobs alike.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from nnunet_core.errors import ConfigurationError
from nnunet_core.layout.work import DEFAULT_WORK_DIR, WORK_LOGS
from nnunet_core.workflow.status import work_status


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "work_dir",
        nargs="?",
        help=f"the workflow's work_dir (default: --configfile's work_dir, else {DEFAULT_WORK_DIR})",
    )
    parser.add_argument(
        "--configfile", help="the workflow config whose work_dir to read (as given to snakemake)"
    )


def work_dir_of(args: argparse.Namespace) -> Path:
    """The positional work_dir, else the config file's ``work_dir``, else ``work``."""
    if args.work_dir:
        return Path(args.work_dir)
    if args.configfile:
        try:
            config = yaml.safe_load(Path(args.configfile).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            msg = f"--configfile {args.configfile}: cannot read it ({exc})"
            raise ConfigurationError(msg) from None
        if not isinstance(config, dict):
            msg = f"--configfile {args.configfile}: not a mapping of keys"
            raise ConfigurationError(msg)
        return Path(config.get("work_dir") or DEFAULT_WORK_DIR)
    return Path(DEFAULT_WORK_DIR)


def run(args: argparse.Namespace) -> int:
    work = work_dir_of(args)
    if not (work / WORK_LOGS).is_dir():
        msg = f"{work}: no {WORK_LOGS}/ folder here: not a workflow's work_dir, or nothing ran yet"
        raise ConfigurationError(msg)
    runs = work_status(work)
    if not runs:
        print(f"{work}: no fold or prediction job has started yet")
    for run_name, jobs in runs.items():
        print(f"{work / WORK_LOGS / run_name}:")
        for job in jobs:
            print(f"  {job.line()}")
    return 0
