"""README's first command, `make demo`, and the stage targets docs/getting-started.md shows, as
printed (their own file: the demo's whole run is the suite's longest test, and `make test` hands
whole files to its workers; the other README commands are in test_readme_commands.py)."""

from __future__ import annotations

import csv
import re

import pytest

from tests.helpers.readme_commands import (
    DEMO,
    DEMO_TARGETS_FIRST,
    STATUS,
    block_starting_with,
    mirror_checkout,
    run,
    user_shell,
    with_flags,
)

pytestmark = pytest.mark.slow


def test_make_demo_runs_the_demo_workflow_and_the_stage_targets(tmp_path) -> None:
    """`make demo` runs only `.venv/bin/snakemake --cores 2` on an installed venv; the stage targets
    docs/getting-started.md shows run on the demo: the first for real, the later ones as dry runs
    (`-n`). Then the demo's whole run (minutes on 2 cores): the report's test Dice, the first number
    a newcomer reads, shows both classes learned, the small lesion too."""
    checkout = mirror_checkout(tmp_path / "checkout")
    env = {k: v for k, v in user_shell(tmp_path / "home").items() if k != "nnUNet_raw"}
    planned = run(with_flags(DEMO, "-n"), checkout, env).stdout.splitlines()
    assert planned == [".venv/bin/snakemake --cores 2"], planned
    targets = block_starting_with(DEMO_TARGETS_FIRST)
    run(targets[0], checkout, env)
    pre = checkout / "work" / "preprocessed" / "Dataset900_Synth"
    assert (pre / "nnUNetPlans.json").is_file() and (pre / "splits_final.json").is_file()
    for command in targets[1:]:
        dry = run(with_flags(command, "-n"), checkout, env)
        output = dry.stdout + dry.stderr
        assert "--epochs 3 --iterations 10 --val-iterations 2" in output, command  # the demo's
    run(planned[0], checkout, env)
    report = checkout / "work" / "results" / "Dataset900_Synth" / "report"
    with (report / "per_class.csv").open(newline="") as table:
        test_dice = {row["name"]: float(row["selected, test set"]) for row in csv.DictReader(table)}
    assert test_dice["organ"] > 0.8, test_dice
    assert test_dice["lesion"] > 0.5, test_dice  # 0.0 with the tests' (default) lesion size
    # each epoch's data wait reaches the folds' logs and the report's data_wait figure and page
    logs = (checkout / "work" / "results" / "Dataset900_Synth").glob("*/fold_*/training_log_*")
    waits = [line for log in logs for line in log.read_text().splitlines() if "Data wait: " in line]
    assert waits and "waiting for data" in waits[0], waits
    page = (report / "report.md").read_text()
    assert (report / "data_wait.png").is_file() and "## Data loading" in page
    # README's status line as printed, after the run: every fold and prediction job done
    jobs = run(STATUS, checkout, env).stdout.splitlines()[1:]
    folds = [job for job in jobs if job.lstrip().startswith("train ")]
    assert len(folds) == 10 and len(jobs) > 10, jobs  # and the selected model's prediction(s)
    assert all(re.search(r"  (epoch 3/3|case \d+/\d+)  done", job) for job in jobs), jobs
