#!/usr/bin/env python
"""Change campaign: change one setting of a trained fold, rerun, check what the rerun did.

    python -m benchmarks.faults.changes --json change_campaign.json [--only KEY ...]

Beside the fault campaign (run.py): there a run is killed and must end as if it had not been;
here a finished run is rerun after a change and must do exactly what the settings table
(nnunet_core.training.fold.settings_table) says. One base run of the real workflow trains fold 0 of
3d_fullres on the demo scenario (1 epoch of 2 iterations, deterministic) to the target
``trained``. Each case copies that run folder (work_dir is relative, so Snakemake's records of
the jobs travel with it), changes one thing (a config key, the content of a user trainer's file,
the pretrained weights) and runs the same command again. Checks:

* a setting that invalidates the fold: the rerun exits 0, the console names the fold and the
  key (one "starts over" line, before any job), the old folder is kept aside
  (``replaced-fold_0-<time>``), the fold trained again from epoch 0, and its provenance.json
  records the new value;
* a setting that does not: the rerun exits 0, no epoch is trained, no folder is set aside, and
  checkpoint_final.pth and the validation summary are byte for byte the base run's.

A change of ``training.trainer`` names another model folder (upstream's layout): there the new
folder trains and the old one stays as it was. Prints a table; ``--json`` writes it.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml
from snakemake.utils import update_config

from benchmarks.faults.epochs import EPOCH_LINE
from benchmarks.faults.scenario import REPO, scenario_config
from nnunet_core.io.atomic import write_text

DATASET = "Dataset900_Synth"
MODEL = "nnUNetTrainer__nnUNetPlans__3d_fullres"
USER_MODEL = "SlowerTrainer__nnUNetPlans__3d_fullres"
TRAINER_FILE = "my_trainer.py"
TRAINER_SOURCE = '''"""A user's trainer of the change campaign."""

from nnunet_core import Trainer


class SlowerTrainer(Trainer):
    """Upstream's schedule with a lower initial learning rate."""

    def build_optimizer(self):
        optimizer = super().build_optimizer()
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] / 2
        return optimizer
'''


@dataclass(frozen=True)
class Case:
    name: str  # the settings table's key
    invalidates: bool
    change: Callable[[Path, dict], None]  # (run folder, config) -> edits either
    model: str = MODEL  # the model folder whose fold 0 is checked
    recorded: Any = None  # the value provenance.json must then record (invalidating cases)


def set_key(key: str, value: Any) -> Callable[[Path, dict], None]:
    def change(_rundir: Path, config: dict) -> None:
        nested: dict = {}
        target = nested
        *parents, last = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
        update_config(config, nested)

    return change


def edit_trainer_source(rundir: Path, _config: dict) -> None:
    path = rundir / TRAINER_FILE
    write_text(path, path.read_text().replace("lower initial", "halved initial"))


def edit_splits(rundir: Path, _config: dict) -> None:
    """A user's own split (upstream's way: edit splits_final.json): fold 0 swaps a training case
    for a validation case."""
    path = rundir / "work" / "preprocessed" / DATASET / "splits_final.json"
    splits = json.loads(path.read_text())
    fold = splits[0]
    fold["train"][0], fold["val"][0] = fold["val"][0], fold["train"][0]
    write_text(path, json.dumps(splits, indent=2))


def edit_plans(rundir: Path, _config: dict) -> None:
    """A user's edit of the plans (batch size 1 for 3d_fullres): the preprocessing stays."""
    path = rundir / "work" / "preprocessed" / DATASET / "nnUNetPlans.json"
    plans = json.loads(path.read_text())
    plans["configurations"]["3d_fullres"]["batch_size"] = 1
    write_text(path, json.dumps(plans, indent=2))


def pretrained_from_base(rundir: Path, config: dict) -> None:
    """The base fold's own final weights as pretrained weights (the file copied aside)."""
    source = rundir / "work" / "results" / DATASET / MODEL / "fold_0" / "checkpoint_final.pth"
    target = rundir / "pretrained.pth"
    shutil.copyfile(source, target)
    config["training"]["pretrained_weights"] = str(target.resolve())


CASES = [
    Case("training.epochs", True, set_key("training.epochs", 2), recorded=2),
    Case("training.iterations_per_epoch", True, set_key("training.iterations_per_epoch", 3),
         recorded=3),
    Case("training.val_iterations_per_epoch", True,
         set_key("training.val_iterations_per_epoch", 2), recorded=2),
    Case("seed", True, set_key("seed", 2), recorded=2),
    Case("deterministic", True, set_key("deterministic", False), recorded=False),
    Case("splits_sha256", True, edit_splits),
    Case("plans_sha256", True, edit_plans),
    Case("pretrained_weights_sha256", True, pretrained_from_base),
    Case("trainer_source_sha256", True, edit_trainer_source, model=USER_MODEL),
    Case("training.trainer", True, set_key("training.trainer", "nnUNetTrainerNoMirroring"),
         model="nnUNetTrainerNoMirroring__nnUNetPlans__3d_fullres"),
    Case("training.save_every", False, set_key("training.save_every", 3)),
    Case("training.num_workers", False, set_key("training.num_workers", 1)),
    Case("training.stop_margin", False, set_key("training.stop_margin", 60)),
    Case("training.retries", False, set_key("training.retries", 1)),
    Case("training.threads", False, set_key("training.threads", 1)),
    Case("training.mem_mb", False, set_key("training.mem_mb", 4000)),
]  # fmt: skip


def base_config(user_trainer: bool) -> dict:
    config = scenario_config("demo")
    config["work_dir"] = "work"  # relative: Snakemake's job records travel with a copy
    config["deterministic"] = True
    config["planning"]["configurations"] = ["3d_fullres"]
    config["training"].update(folds=[0], epochs=1, iterations_per_epoch=2)
    config["training"]["val_iterations_per_epoch"] = 1
    if user_trainer:
        config["training"]["trainer"] = f"{TRAINER_FILE}:SlowerTrainer"
    return config


def run(rundir: Path, config: dict) -> subprocess.CompletedProcess:
    write_text(rundir / "config.yaml", yaml.safe_dump(config))
    command = [
        str(Path(sys.executable).parent / "snakemake"),
        "--snakefile", str(REPO / "Snakefile"), "--directory", str(rundir),
        "--configfile", str(rundir / "config.yaml"), "--cores", "2", "trained",
    ]  # fmt: skip
    return subprocess.run(command, cwd=rundir, capture_output=True, text=True)


def logs_with_epochs(fold: Path) -> set[str]:
    """The fold's training logs (one per attempt) in which an epoch started."""
    return {
        log.name
        for log in fold.glob("training_log_*.txt")
        if EPOCH_LINE.search(log.read_text(errors="replace"))
    }


def fold_state(fold: Path) -> dict[str, Any]:
    summary = fold / "validation" / "summary.json"
    final = fold / "checkpoint_final.pth"
    return {
        "final": final.read_bytes() if final.is_file() else None,
        "summary": summary.read_bytes() if summary.is_file() else None,
        "trained in": logs_with_epochs(fold),
    }


def recorded_value(fold: Path, key: str) -> Any:
    record = json.loads((fold / "provenance.json").read_text())
    return record.get("settings", {}).get(key)


@dataclass
class Outcome:
    case: str
    invalidates: bool
    exit: int
    console_line: bool
    set_aside: bool
    retrained: bool
    recorded: Any
    identical: bool | None
    ok: bool
    seconds: float
    problems: list[str]


def check(case: Case, base: Path, rundir: Path, result: subprocess.CompletedProcess) -> Outcome:
    model = rundir / "work" / "results" / DATASET / case.model
    fold = model / "fold_0"
    output = result.stdout + result.stderr
    line = re.search(rf"fold 0 starts over: .*{re.escape(case.name)}", output) is not None
    aside = any(p.name.startswith("replaced-fold_0-") for p in model.glob("replaced-*"))
    before = fold_state(base / "work" / "results" / DATASET / case.model / "fold_0")
    after = fold_state(fold)
    retrained = bool(after["trained in"] - before["trained in"])  # an attempt the base had not
    recorded = recorded_value(fold, case.name) if (fold / "provenance.json").is_file() else None
    problems = [] if result.returncode == 0 else [f"rerun exit {result.returncode}"]
    identical = None
    new_folder = before["final"] is None  # training.trainer: another model folder
    if case.invalidates:
        if not retrained:
            problems.append("the fold was not trained again")
        if not new_folder and not (line and aside):
            problems.append(f"console line {line}, old folder kept aside {aside}")
        if case.recorded is not None and recorded != case.recorded:
            problems.append(f"provenance records {recorded!r}, not {case.recorded!r}")
    else:
        identical = (after["final"], after["summary"]) == (before["final"], before["summary"])
        if retrained or aside or line:
            problems.append(f"trained again {retrained}, set aside {aside}, line {line}")
        if not identical:
            problems.append("checkpoint_final.pth or the summary changed")
    return Outcome(
        case.name, case.invalidates, result.returncode, line, aside, retrained,
        recorded, identical, not problems, 0.0, problems,
    )  # fmt: skip


def run_case(case: Case, bases: dict[bool, Path], scratch: Path) -> Outcome:
    started = time.monotonic()
    user = case.model == USER_MODEL
    base = bases[user]
    rundir = scratch / case.name
    shutil.copytree(base, rundir, symlinks=True)
    config = base_config(user)
    case.change(rundir, config)
    result = run(rundir, config)
    outcome = check(case, base, rundir, result)
    outcome.seconds = round(time.monotonic() - started, 1)
    if outcome.ok:
        shutil.rmtree(rundir)
    else:
        write_text(rundir / "rerun_output.txt", result.stdout + result.stderr)
    return outcome


def make_base(scratch: Path, user_trainer: bool) -> Path:
    rundir = scratch / ("base_user" if user_trainer else "base")
    rundir.mkdir(parents=True)
    if user_trainer:
        write_text(rundir / TRAINER_FILE, TRAINER_SOURCE)
    result = run(rundir, base_config(user_trainer))
    if result.returncode != 0:
        raise SystemExit(f"the base run failed:\n{result.stdout}\n{result.stderr}")
    return rundir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the outcomes here")
    parser.add_argument("--only", nargs="*", help="the cases (table keys) to run")
    parser.add_argument("--scratch", type=Path, help="where runs go (default: a temporary folder)")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.only or c.name in args.only]
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="change_campaign_"))
    started = time.monotonic()
    bases = {False: make_base(scratch, False)}
    if any(c.model == USER_MODEL for c in cases):
        bases[True] = make_base(scratch, True)
    outcomes = []
    for case in cases:
        outcome = run_case(case, bases, scratch)
        outcomes.append(outcome)
        verdict = "ok" if outcome.ok else "FAILED: " + "; ".join(outcome.problems)
        kind = "invalidates" if case.invalidates else "continues "
        print(f"{case.name:36} {kind} {outcome.seconds:6.1f} s  {verdict}", flush=True)
    passed = sum(o.ok for o in outcomes)
    minutes = (time.monotonic() - started) / 60
    print(f"{passed}/{len(outcomes)} cases as the settings table says ({minutes:.1f} min)")
    if args.json:
        record = {
            "cases": [asdict(o) for o in outcomes],
            "passed": passed,
            "total": len(outcomes),
            "minutes": round(minutes, 1),
        }
        write_text(args.json, json.dumps(record, indent=2, default=str) + "\n")
    return 0 if passed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
