"""The command-line flags the workflow's rules pass to `nnunet-core` (nnunet_core.workflow.flags),
checked from config dicts as the schema fills them in."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from nnunet_core.cluster import torchrun
from nnunet_core.cluster.gpu_slots import FOLDS_PER_GPU_ENV
from nnunet_core.layout.roots import Roots
from nnunet_core.layout.work import staging_folder_of
from nnunet_core.workflow import flags
from nnunet_core.workflow.pretrained import PretrainedWeights


def training_config(**training) -> dict:
    base = {
        "trainer": "nnUNetTrainer",
        "epochs": 3,
        "iterations_per_epoch": 10,
        "val_iterations_per_epoch": 2,
        "save_every": 1,
        "stop_margin": 300,
        "num_workers": None,
        "npz": True,
        "gpu_lock_dir": None,
        "nodes": 1,
        "rdzv_endpoint": None,
    }
    return {"seed": 7, "deterministic": False, "training": {**base, **training}}


def test_shared_flags_name_the_folds_model_and_trees() -> None:
    assert flags.folds_argument([0, 1, "all"]) == "0 1 all"
    assert flags.model_flags("nnUNetResEncUNetMPlans", "nnUNetTrainer") == (
        "-p nnUNetResEncUNetMPlans -tr nnUNetTrainer"
    )
    roots = Roots(Path("/w/raw"), Path("/w/pre"), Path("/w/res"))
    assert flags.root_flags(roots) == "--raw /w/raw --preprocessed /w/pre --results /w/res"


def test_surface_metrics_off_adds_nothing() -> None:
    assert flags.surface_metric_flags({"surface_metrics": False, "nsd_tolerance_mm": 1}) == ""


def test_one_tolerance_for_every_label() -> None:
    options = {"surface_metrics": True, "nsd_tolerance_mm": 1.5}
    assert flags.surface_metric_flags(options) == "--surface-metrics --nsd-tolerance 1.5"


def test_per_label_tolerances_are_quoted_pairs_a_shell_splits_back() -> None:
    options = {"surface_metrics": True, "nsd_tolerance_mm": {"liver": 2, "left kidney": 1}}
    text = flags.surface_metric_flags(options)
    assert shlex.split(text) == [
        "--surface-metrics",
        "--nsd-tolerance",
        "liver=2",
        "left kidney=1",
    ]


def test_synthetic_options_with_a_2d_shape_and_spacing() -> None:
    options = {
        "num_training": 6,
        "num_test": 2,
        "channels": 1,
        "seed": 3,
        "shape": [32, 32],
        "spacing": [0.8, 0.8],
    }
    assert flags.synthetic_options(options) == (
        "--num-training 6 --num-test 2 --channels 1 --seed 3 --shape 32 32 --2d --spacing 0.8 0.8"
    )


def test_synthetic_options_without_shape_leave_the_generator_defaults() -> None:
    options = {"num_training": 4, "num_test": 0, "channels": 2, "seed": 0}
    assert flags.synthetic_options(options) == "--num-training 4 --num-test 0 --channels 2 --seed 0"


def test_synthetic_options_pass_a_lesion_scale_other_than_one() -> None:
    """The schema's default 1.0 adds no flag (every other dataset's command stays the same)."""
    options = {"num_training": 4, "num_test": 0, "channels": 1, "seed": 0, "lesion_scale": 1.0}
    assert "--lesion-scale" not in flags.synthetic_options(options)
    options["lesion_scale"] = 1.6
    assert flags.synthetic_options(options).endswith("--seed 0 --lesion-scale 1.6")


def test_planning_options_and_overrides() -> None:
    planning = {"planner": "default", "gpu_memory_target_gb": None, "overrides": {}}
    assert flags.planning_options(planning, "nnUNetPlans") == "-pl default --plans-name nnUNetPlans"
    planning.update(gpu_memory_target_gb=24, overrides={"3d_big": {"inherits_from": "3d_fullres"}})
    assert flags.planning_options(planning, "P").endswith("--gpu-memory-target 24")
    assert json.loads(flags.plan_overrides(planning)) == planning["overrides"]


def test_training_options_carry_the_schedule_seed_and_device() -> None:
    text = flags.training_options(training_config(), "nnUNetPlans", "cpu")
    assert text == (
        "-tr nnUNetTrainer -p nnUNetPlans -device cpu --epochs 3 --iterations 10 "
        "--val-iterations 2 --save-every 1 --seed 7 --stop-margin 300 --npz"
    )


def test_training_options_optional_switches() -> None:
    config = training_config(num_workers=0, npz=False, gpu_lock_dir="/locks")
    config["deterministic"] = True
    words = flags.training_options(config, "P", "cuda").split()
    assert "--deterministic" in words
    assert words[words.index("--num-workers") + 1] == "0"  # 0 workers is a value, not unset
    assert "--npz" not in words
    assert words[words.index("--gpu-lock-dir") + 1] == "/locks"


def test_pretrained_weights_flag_is_quoted_or_absent() -> None:
    assert flags.pretrained_weights_flag(None) == ""
    weights = PretrainedWeights(Path("/models/my run/checkpoint_final.pth"))
    flag = flags.pretrained_weights_flag(weights)
    assert flag.startswith(" ")  # follows `--c` directly in the rule's shell line
    assert shlex.split(flag) == ["-pretrained_weights", "/models/my run/checkpoint_final.pth"]


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [(1, "nnunet-core train"), (0, "nnunet-core train"), (4, "nnunet-core train -num_gpus 4")],
)
def test_one_node_launcher(gpus: int, expected: str) -> None:
    command = flags.training_launcher(
        training_config()["training"],
        1,
        job_gpus=gpus,
        cpus_per_gpu=None,
        threads=2,
        rendezvous_id="x",
    )
    assert command == expected


def test_several_nodes_launch_torchrun_with_the_folds_rendezvous() -> None:
    training = training_config(nodes=2, rdzv_endpoint="head:29400")["training"]
    rendezvous = torchrun.rendezvous_id("Dataset004_Hippocampus", "3d_fullres", "0")
    command = flags.training_launcher(
        training, 4, job_gpus=0, cpus_per_gpu=8, threads=2, rendezvous_id=rendezvous
    )
    words = command.split()
    assert words[0] == "srun"
    assert words[words.index("--nodes") + 1] == "2"
    assert words[words.index("--cpus-per-task") + 1] == "32"
    assert words[words.index("--nproc_per_node") + 1] == "4"
    assert words[words.index("--rdzv_endpoint") + 1] == "head:29400"
    assert words[words.index("--rdzv_id") + 1] == "Dataset004_Hippocampus_3d_fullres_0"


def test_gpu_slots_when_folds_share_gpus() -> None:
    assert flags.gpu_slot_total(requested_gpus=2, folds_per_gpu=3) == 6
    assert flags.gpu_slot_total(requested_gpus=2, folds_per_gpu=1) is None
    assert flags.gpu_slot_total(requested_gpus=0, folds_per_gpu=3) is None
    assert flags.folds_per_gpu_variable(1) == ""
    assert flags.folds_per_gpu_variable(2) == f"{FOLDS_PER_GPU_ENV}=2 "
    assert flags.prediction_gpu_resource(gpus_per_job=1, folds_per_gpu=3) == 3
    # one device predicts: a DDP fold's gpus_per_job does not reserve idle GPUs for prediction
    assert flags.prediction_gpu_resource(gpus_per_job=4, folds_per_gpu=1) == 1
    assert flags.prediction_gpu_resource(gpus_per_job=0, folds_per_gpu=2) == 0


def test_a_local_gpu_prediction_takes_a_gpu_slot_as_folds_do() -> None:
    training = training_config()["training"]
    assert flags.prediction_slot_flags(training, 1, cluster=False) == "--gpu-slot "
    training = training_config(gpu_lock_dir="/my locks")["training"]
    local = flags.prediction_slot_flags(training, 2, cluster=False)
    assert local == "--gpu-slot --gpu-lock-dir '/my locks' "  # the folds' folder
    assert flags.prediction_slot_flags(training, 1, cluster=True) == ""  # the scheduler's GPU
    assert flags.prediction_slot_flags(training, 0, cluster=False) == ""  # CPU jobs


def test_gpu_slot_notices() -> None:
    assert flags.gpu_slot_notices(1, 1, cluster=False, requested_gpus=2) == []
    local = flags.gpu_slot_notices(2, 2, cluster=False, requested_gpus=2)
    assert len(local) == 1 and "counts 4 GPU slots" in local[0]
    on_cluster = flags.gpu_slot_notices(2, 1, cluster=True, requested_gpus=0)
    assert len(on_cluster) == 1 and "local runs only" in on_cluster[0]


def test_report_selection_and_prediction_flags() -> None:
    assert flags.chosen_configurations_argument(["2d", "3d_fullres"]) == "2d 3d_fullres"
    assert flags.report_test_summary_flag(False, "/w/test/summary.json") == ""
    assert flags.report_test_summary_flag(True, "/w/test/summary.json") == (
        "--test-summary /w/test/summary.json"
    )
    assert staging_folder_of("/w/predictions/D/2d") == "/w/predictions/D/2d.partial"
    assert flags.previous_stage_flag([]) == ""
    assert flags.previous_stage_flag("/w/predictions/D/3d_lowres") == (
        "-prev_stage_predictions /w/predictions/D/3d_lowres "
    )
