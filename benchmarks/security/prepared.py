"""What many probes share, made once per campaign with the real commands: the tiny demo run to
a trained fold (raw dataset, preprocessed data, a model folder), a prediction folder with
probabilities, a valid postprocessing.json and the model's zip.

The schedule is the smallest that trains and validates (1 epoch of 1 iteration, fold 0,
3d_fullres): its weights are meaningless, but every file prediction, ensembling, export and
install read is real."""

from __future__ import annotations

import copy
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from benchmarks.security.commands import nnunet_core, probe_env, snakemake, write_config
from benchmarks.security.scenario import demo_config

DATASET = "Dataset900_Synth"
MODEL = "nnUNetTrainer__nnUNetPlans__3d_fullres"
KEEP_LARGEST = "remove_all_but_largest_component_from_segmentation"


def base_config(work_dir: str) -> dict:
    """The scenario ``demo`` (6 + 2 cases of 12 x 32 x 32) cut to 3d_fullres, fold 0, one epoch
    of one iteration, writing into ``work_dir``."""
    config = demo_config()
    config["work_dir"] = work_dir
    config["planning"]["configurations"] = ["3d_fullres"]
    config["training"].update(
        folds=[0], epochs=1, iterations_per_epoch=1, val_iterations_per_epoch=1, npz=False,
        device="cpu",
    )  # fmt: skip
    return config


def raw_root_config(work_dir: str, raw_root: str) -> dict:
    """``base_config`` on a raw root the user holds (no synthetic data)."""
    config = base_config(work_dir)
    config["dataset"]["raw_root"] = raw_root
    config["dataset"]["synthetic"]["enabled"] = False
    return config


@dataclass(frozen=True)
class Prepared:
    """The shared files (read-only for probes: they copy what they change)."""

    base: Path
    work: Path  # a work_dir after `snakemake trained`

    @property
    def raw(self) -> Path:
        return self.work / "raw" / DATASET

    @property
    def results(self) -> Path:
        return self.work / "results"

    @property
    def model(self) -> Path:
        return self.results / DATASET / MODEL

    @property
    def predictions(self) -> Path:
        """Two test cases predicted with --save_probabilities (.nii.gz, .npz, .json)."""
        return self.base / "prepared" / "pred_a"

    @property
    def postprocessing(self) -> Path:
        return self.base / "prepared" / "postprocessing.json"

    @property
    def model_zip(self) -> Path:
        return self.base / "prepared" / "model.zip"

    def copy_preprocessed(self, work: Path) -> Path:
        """A work_dir holding the raw and preprocessed data (file times kept): a run of
        ``base_config`` there starts at training."""
        for part in ("raw", "preprocessed"):
            shutil.copytree(self.work / part, work / part, symlinks=True)
        return work

    def copy_results(self, results: Path) -> Path:
        shutil.copytree(self.results, results, symlinks=True)
        return results


def _check(outcome, what: str) -> None:
    if outcome.returncode != 0:
        raise SystemExit(f"preparing {what} failed ({outcome.returncode}):\n{outcome.text[-3000:]}")


def prepare(base: Path) -> Prepared:
    """Build the shared files under ``base/prepared`` (about half a minute on 2 cores)."""
    folder = base / "prepared"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    env = probe_env(base)
    work = folder / "work"
    configfile = write_config(folder / "config.yaml", base_config(str(work)))
    _check(snakemake(folder / "snake", configfile, ["trained"], env), "the trained demo fold")
    prepared = Prepared(base, work)
    roots = ["--results", str(prepared.results)]
    predict = ["predict", "-i", str(prepared.raw / "imagesTs"), "-o", str(prepared.predictions),
               "-d", "900", "-c", "3d_fullres", "-f", "0", "--disable_tta", "-device", "cpu",
               "-npp", "0", "-nps", "0", "--save_probabilities", *roots]  # fmt: skip
    _check(nnunet_core(predict, folder, env), "the prediction folder")
    steps = {
        "postprocessing_fns": [KEEP_LARGEST],
        "postprocessing_kwargs": [{"labels_or_regions": [1]}],
    }
    prepared.postprocessing.write_text(json.dumps(steps))
    export = ["export-model-to-zip", "-d", "900", "-c", "3d_fullres", "-f", "0",
              "-o", str(prepared.model_zip), *roots]  # fmt: skip
    _check(nnunet_core(export, folder, env), "the model zip")
    return prepared


def predict_args(input_dir: Path, output: Path, results: Path, *extra: str) -> list[str]:
    """``nnunet-core predict`` of the prepared model: fold 0, no mirroring, inline workers."""
    return ["predict", "-i", str(input_dir), "-o", str(output), "-d", "900", "-c", "3d_fullres",
            "-f", "0", "--disable_tta", "-device", "cpu", "-npp", "0", "-nps", "0",
            "--results", str(results), *extra]  # fmt: skip


def deep(config: dict) -> dict:
    return copy.deepcopy(config)
