"""What the prediction stages of ``benchmarks.speed.realscale`` need before anything is timed.

A reduced copy of the raw dataset (links to a few of its cases), planned and preprocessed for
3d_fullres by us and, from the same plans, by upstream; a small fixed network in those plans
where the planned one would take the CPU too long (features per stage divided by
``FEATURE_DIVISOR``, the same in both); one fold of random weights written by our trainer and
loaded into upstream's trainer (the same weights, each side's own checkpoint format for ``--val``,
ours read by upstream's predictor as it is).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common.peer.env import peer_environment
from nnunet_core.layout.preprocessed import FINGERPRINT_JSON, SPLITS_JSON, plans_file
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.results import (
    CHECKPOINT_FINAL,
    PLANS_JSON,
    fold_dir,
    trained_model_dir,
)

DATASET_ID = 934
CONFIGURATION = "3d_fullres"
FEATURE_DIVISOR = 32
# no test-time mirroring: the final validation would run the network 8 times per tile
TRAINER = "nnUNetTrainerNoMirroring"
# upstream looks a variant up by importing every trainer module (its Primus ones need a working
# torchvision): its default trainer, with no mirror axes stored in the checkpoint, is the same
PEER_TRAINER = "nnUNetTrainer"
PLANNED = "nnUNetPlans.planned.json"  # the plans as planned, before the network is shrunk

OUR_CHECKPOINT = r"""
import sys
from nnunet_core.commands.train import configure_parser, fold_request
from nnunet_core.training.fold.run import prepare_folder, resolve_fold
from nnunet_core.training.trainer.lookup import resolve_trainer
import argparse
parser = argparse.ArgumentParser()
configure_parser(parser)
request = fold_request(parser.parse_args(sys.argv[1:]))
setup = resolve_fold(request)
trainer_class, _ = resolve_trainer(request.settings.trainer_name)
trainer = trainer_class(setup, request.settings, request.device, request.topology)
prepare_folder(request, setup)
print(trainer.save_checkpoint("checkpoint_final.pth"))
"""

PEER_CHECKPOINT = r"""
import json, os, sys, torch
from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer
preprocessed, ours, configuration = sys.argv[1], sys.argv[2], sys.argv[3]
plans = json.load(open(os.path.join(preprocessed, 'nnUNetPlans.json')))
plans['continue_training'] = False  # what run_training adds
dataset_json = json.load(open(os.path.join(preprocessed, 'dataset.json')))
trainer = nnUNetTrainer(plans, configuration, 0, dataset_json, device=torch.device('cpu'))
trainer.initialize()
weights = torch.load(ours, map_location='cpu', weights_only=False)['network_weights']
trainer.network.load_state_dict(weights)
trainer.inference_allowed_mirroring_axes = None  # as nnUNetTrainerNoMirroring stores it
trainer.save_checkpoint(os.path.join(trainer.output_folder, 'checkpoint_final.pth'))
print(trainer.output_folder)
"""


@dataclass(frozen=True)
class Sides:
    """Roots and environments of both sides; ``peer`` is None without upstream."""

    work: Path
    dataset: str  # DatasetXXX_Name
    cases: tuple[str, ...]  # training cases linked into the reduced dataset
    ending: str
    peer: Path | None

    @property
    def raw(self) -> Path:
        return self.work / "raw"

    def root(self, side: str, kind: str) -> Path:
        return self.work / side / kind

    def our_roots(self) -> list[str]:
        return [
            "--raw",
            str(self.raw),
            "--preprocessed",
            str(self.root("ours", "pre")),
            "--results",
            str(self.root("ours", "results")),
        ]

    def peer_env(self) -> dict[str, str]:
        assert self.peer is not None
        return peer_environment(
            self.peer, self.raw, self.root("upstream", "pre"), self.root("upstream", "results")
        )

    def peer_bin(self, name: str) -> str:
        assert self.peer is not None
        return str(self.peer / "bin" / name)

    def model_dir(self, side: str) -> Path:
        results = self.root(side, "results") / self.dataset
        trainer = TRAINER if side == "ours" else PEER_TRAINER
        return trained_model_dir(results, CONFIGURATION, trainer=trainer)


def make_ct_dataset(target: Path, num_training: int, slices: int = 100, seed: int = 0) -> Path:
    """A CT-like real-size raw dataset (512x512xN at 0.7x0.7x2.5 mm, HU-like, organ + lesion):
    ``nnunet_core.dataset.realscale``'s "ct" preset."""
    from nnunet_core.dataset.realscale import synthesize_realscale

    return synthesize_realscale(target, "ct", num_training, 0, seed, slices)


def run(command: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout)[-3000:]
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{tail}")
    return done.stdout


def raw_cases(raw_dataset: Path) -> tuple[list[str], str]:
    """The training cases (sorted) and the file ending of a raw dataset."""
    ending = json.loads((raw_dataset / DATASET_JSON).read_text())["file_ending"]
    cases = sorted(
        p.name[: -len(f"_0000{ending}")]
        for p in (raw_dataset / "imagesTr").iterdir()
        if p.name.endswith(f"_0000{ending}")
    )
    if not cases:
        sys.exit(f"{raw_dataset}/imagesTr: no training images ending _0000{ending}")
    return cases, ending


def link_dataset(raw_dataset: Path, work: Path, count: int, peer: Path | None) -> Sides:
    """``work/raw/Dataset934_<name>`` with links to the first ``count`` training cases."""
    match = re.match(r"Dataset\d+_(.+)", raw_dataset.name)
    name = f"Dataset{DATASET_ID}_{match.group(1) if match else 'RealScale'}"
    cases, ending = raw_cases(raw_dataset)
    cases = cases[:count]
    target = work / "raw" / name
    content = json.loads((raw_dataset / DATASET_JSON).read_text())
    content["numTraining"] = len(cases)
    for folder in ("imagesTr", "labelsTr"):
        (target / folder).mkdir(parents=True, exist_ok=True)
    for case in cases:
        for image in sorted(
            (raw_dataset / "imagesTr").glob(f"{case}_[0-9][0-9][0-9][0-9]{ending}")
        ):
            link = target / "imagesTr" / image.name
            link.unlink(missing_ok=True)
            link.symlink_to(image.resolve())
        link = target / "labelsTr" / f"{case}{ending}"
        link.unlink(missing_ok=True)
        link.symlink_to((raw_dataset / "labelsTr" / f"{case}{ending}").resolve())
    (target / DATASET_JSON).write_text(json.dumps(content, indent=1))
    return Sides(work, name, tuple(cases), ending, peer)


def write_plans(preprocessed: Path, small: bool) -> None:
    """The planned plans (kept aside as ``PLANNED``), with the configuration's features per
    stage divided by ``FEATURE_DIVISOR`` when ``small``."""
    planned = preprocessed / PLANNED
    if not planned.is_file():
        planned.write_bytes(plans_file(preprocessed).read_bytes())
    plans = json.loads(planned.read_text())
    kwargs = plans["configurations"][CONFIGURATION]["architecture"]["arch_kwargs"]
    if small:
        kwargs["features_per_stage"] = [
            max(2, f // FEATURE_DIVISOR) for f in kwargs["features_per_stage"]
        ]
    plans_file(preprocessed).write_text(json.dumps(plans, indent=1))


def write_splits(preprocessed: Path, cases: tuple[str, ...], validation: int) -> None:
    """One fold: the first ``validation`` cases validate (the rest train, else all)."""
    val = list(cases[:validation])
    train = list(cases[validation:]) or val
    (preprocessed / SPLITS_JSON).write_text(json.dumps([{"train": train, "val": val}], indent=1))


def preprocess_both(sides: Sides, log) -> None:
    """Plan and preprocess ours, preprocess upstream's from the same plans (skipped when done
    for the same cases)."""
    done = sides.work / "preprocessed.json"
    marker = {"cases": list(sides.cases), "peer": str(sides.peer)}
    if done.is_file() and json.loads(done.read_text()) == marker:
        log(f"predict stages: reusing the preprocessed cases in {sides.work}")
        return
    done.unlink(missing_ok=True)
    ours_pre = sides.root("ours", "pre") / sides.dataset
    log(f"predict stages: planning and preprocessing {len(sides.cases)} case(s) (ours)")
    run(
        [
            sys.executable,
            "-m",
            "nnunet_core",
            "plan-and-preprocess",
            "-d",
            str(DATASET_ID),
            "-c",
            CONFIGURATION,
            "-np",
            "2",
            *sides.our_roots()[:4],
        ]
    )
    (ours_pre / PLANNED).unlink(missing_ok=True)
    write_plans(ours_pre, False)
    if sides.peer is not None:
        peer_pre = sides.root("upstream", "pre") / sides.dataset
        peer_pre.mkdir(parents=True, exist_ok=True)
        for name in (DATASET_JSON, FINGERPRINT_JSON, plans_file(ours_pre).name):
            (peer_pre / name).write_bytes((ours_pre / name).read_bytes())
        log("predict stages: preprocessing the same cases from the same plans (upstream)")
        run(
            [
                sides.peer_bin("nnUNetv2_preprocess"),
                "-d",
                str(DATASET_ID),
                "-c",
                CONFIGURATION,
                "-np",
                "2",
            ],
            sides.peer_env(),
        )
    done.write_text(json.dumps(marker))


def prepare(
    raw_dataset: Path, work: Path, peer: Path | None, count: int, small: bool, validation: int, log
) -> Sides:
    """Plan and preprocess both sides, make the fold-0 checkpoints; returns the sides."""
    sides = link_dataset(raw_dataset, work, count, peer)
    preprocess_both(sides, log)
    ours_pre = sides.root("ours", "pre") / sides.dataset
    write_plans(ours_pre, small)
    write_splits(ours_pre, sides.cases, validation)
    trainer_args = [str(DATASET_ID), CONFIGURATION, "0", "-tr", TRAINER, "-device", "cpu"]
    trainer_args += sides.our_roots()
    checkpoint = Path(run([sys.executable, "-c", OUR_CHECKPOINT, *trainer_args]).split()[-1])
    if peer is not None:
        peer_pre = sides.root("upstream", "pre") / sides.dataset
        for name in (SPLITS_JSON, plans_file(ours_pre).name):
            (peer_pre / name).write_bytes((ours_pre / name).read_bytes())
        run(
            [
                sides.peer_bin("python"),
                "-c",
                PEER_CHECKPOINT,
                str(peer_pre),
                str(checkpoint),
                CONFIGURATION,
            ],
            sides.peer_env(),
        )
        # upstream's predictor reads the model folder's plans and dataset.json (ours: the same)
        peer_model = sides.model_dir("upstream")
        for name in (PLANS_JSON, DATASET_JSON):
            (peer_model / name).write_bytes((sides.model_dir("ours") / name).read_bytes())
    return sides


def our_checkpoint(sides: Sides) -> Path:
    return fold_dir(sides.model_dir("ours"), 0) / CHECKPOINT_FINAL


__all__ = ["Sides", "prepare"]
