#!/usr/bin/env python
"""Prediction time per case (s/case) with and without mirroring TTA, ours and upstream's.

    python -m benchmarks.speed.predict \
        --plans ../shared/reference/plans/synth3d_peer900/nnUNetPlans.json \
        -c 3d_fullres 2d --peer ~/.cache/nnunet-peer/venv
    python -m benchmarks.speed.predict \
        --model-dir $nnUNet_results/D/nnUNetTrainer__nnUNetPlans__3d_fullres

A trained model folder (``--model-dir``) is used as it is. With ``--plans``, a model folder with
freshly initialised weights is made per configuration: random weights cost the same compute as
trained ones. The cases are seeded synthetic phantoms of exactly ``--shape`` and ``--spacing``.

Phases are those of upstream's harness (../shared/peer/bench_predict.py): read + preprocess,
sliding window (all folds), export (resample back + argmax; ours also writes the file). Both use
``torch.set_num_threads(cpu_count)`` like ``nnUNetv2_predict -device cpu``. With ``--peer`` an
upstream model folder with random weights is built from the same plans.json/dataset.json, and runs
alternate (ours, upstream, ours, ...) because the machine is noisy; the best run of each counts.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import SimpleITK as sitk
import torch

from benchmarks.common.peer.env import peer_environment
from nnunet_core.dataset.discovery import RawCase
from nnunet_core.dataset.shapes import make_phantom
from nnunet_core.dataset.synthesize import channel_names
from nnunet_core.inference.export import export_prediction
from nnunet_core.inference.model_folder import LoadedModel, load_trained_model
from nnunet_core.inference.predictor import tile_batch_size
from nnunet_core.inference.sliding_window import predict_logits_from_folds, tile_slicers
from nnunet_core.io.plans import Plans
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.model import build_network
from nnunet_core.model import checkpoint as ckpt
from nnunet_core.preprocessing.preprocessor import run_case

HARNESS = Path(__file__).resolve().parents[3] / "shared" / "peer" / "bench_predict.py"
LABELS = {"background": 0, "organ": 1, "lesion": 2}

PEER_MAKE_MODEL = r"""
import json, os, sys, torch
from nnunetv2.utilities.plans_handling.plans_handler import PlansManager
from nnunetv2.utilities.label_handling.label_handling import determine_num_input_channels
from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer
model_dir, configuration, axes, folds = (
    sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4:]
)
plans = json.load(open(os.path.join(model_dir, 'plans.json')))
dataset_json = json.load(open(os.path.join(model_dir, 'dataset.json')))
pm = PlansManager(plans)
cm = pm.get_configuration(configuration)
n_in = determine_num_input_channels(pm, cm, dataset_json)
heads = pm.get_label_manager(dataset_json).num_segmentation_heads
net = nnUNetTrainer.build_network_architecture(pm, cm, n_in, heads, enable_deep_supervision=True)
state = {'network_weights': net.state_dict(), 'trainer_name': 'nnUNetTrainer', 'current_epoch': 0,
         'init_args': {'plans': plans, 'configuration': configuration, 'fold': 0,
                       'dataset_json': dataset_json},
         'inference_allowed_mirroring_axes': tuple(axes)}
for fold in folds:
    os.makedirs(os.path.join(model_dir, f'fold_{fold}'), exist_ok=True)
    torch.save(state, os.path.join(model_dir, f'fold_{fold}', 'checkpoint_final.pth'))
print(sum(p.numel() for p in net.parameters()))
"""


def run(command: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-3000:]}")
    return done.stdout


def write_cases(folder: Path, count: int, shape: list[int], spacing: list[float], channels: int):
    """``count`` phantoms of exactly ``shape`` (z, y, x) and ``spacing``; returns RawCases."""
    folder.mkdir(parents=True, exist_ok=True)
    cases = []
    for index in range(count):
        phantom = make_phantom(np.random.default_rng(index), tuple(shape), channels)
        files = []
        for channel, array in enumerate(phantom.images):
            image = sitk.GetImageFromArray(array.astype(np.float32))
            image.SetSpacing([float(s) for s in spacing[::-1]])
            path = folder / f"bench_{index:03d}_{channel:04d}.nii.gz"
            sitk.WriteImage(image, str(path), useCompression=True)
            files.append(path)
        cases.append(RawCase(f"bench_{index:03d}", tuple(files), None))
    return cases


def mirror_axes(configuration: Configuration) -> list[int]:
    """The training's mirror axes (upstream: every spatial axis of the patch)."""
    return list(range(len(configuration.patch_size)))


def make_random_model(folder: Path, plans: dict, configuration: str, folds: list[int]) -> Path:
    """A model folder as training leaves it, with freshly initialised weights per fold."""
    resolved = Plans(plans).configuration(configuration)
    channels = len(resolved.normalization_schemes)
    dataset_json = {
        "channel_names": channel_names(channels),
        "labels": LABELS,
        "numTraining": 1,
        "file_ending": ".nii.gz",
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plans.json").write_text(json.dumps(plans, indent=1))
    (folder / "dataset.json").write_text(json.dumps(dataset_json, indent=1))
    network = build_network(resolved, channels, len(LABELS), True)
    state = {
        "network_weights": network.state_dict(),
        "init_args": {"plans": plans, "configuration": configuration, "fold": 0},
        "trainer_name": "nnUNetTrainer",
        "inference_allowed_mirroring_axes": mirror_axes(resolved),
        "current_epoch": 0,
    }
    for fold in folds:
        ckpt.save_checkpoint(state, folder / f"fold_{fold}" / ckpt.FINAL)
    return folder


def time_ours(
    model: LoadedModel, cases: list[RawCase], mirror: bool, out: Path, batch_tiles: int | None
) -> dict:
    """Mean seconds per case and phase, as upstream's harness splits them."""
    batch_tiles = batch_tiles or tile_batch_size(model.configuration)
    rows = []
    axes = model.mirror_axes if mirror else None
    networks = list(model.networks)
    for case in cases:
        row = {}
        start = time.perf_counter()
        data, _, properties = run_case(
            case, model.plans, model.configuration_name, model.dataset_json
        )
        row["preprocess"] = time.perf_counter() - start
        padded = [
            max(s, p)
            for s, p in zip(data.shape[-len(model.patch_size) :], model.patch_size, strict=True)
        ]
        full = [*data.shape[1 : data.ndim - len(model.patch_size)], *padded]
        tiles = len(tile_slicers(full, model.patch_size, 0.5))
        start = time.perf_counter()
        logits = predict_logits_from_folds(
            networks,
            torch.from_numpy(data),
            model.patch_size,
            model.num_outputs,
            0.5,
            True,
            axes,
            batch_tiles=batch_tiles,
        )
        row["sliding_window"] = time.perf_counter() - start
        start = time.perf_counter()
        export_prediction(
            logits,
            properties,
            model.plans,
            model.configuration,
            model.dataset_json.label_spec,
            out / case.identifier,
            model.dataset_json.file_ending,
        )
        row["export"] = time.perf_counter() - start
        row["total"] = sum(row.values())
        rows.append({**row, "n_tiles": tiles, "preprocessed_shape": list(data.shape[1:])})
    mean = {
        k: float(np.mean([r[k] for r in rows]))
        for k in ("preprocess", "sliding_window", "export", "total")
    }
    return {
        **mean,
        "n_tiles": rows[0]["n_tiles"],
        "preprocessed_shape": rows[0]["preprocessed_shape"],
        "batch_tiles": batch_tiles,
    }


def peer_env(work: Path, venv: Path) -> dict[str, str]:
    roots = work / "peer_roots"
    return peer_environment(
        venv, roots / "nnUNet_raw", roots / "nnUNet_preprocessed", roots / "nnUNet_results"
    )


def make_peer_model(ours: Path, work: Path, venv: Path, configuration: str, folds: list) -> Path:
    folder = work / "peer_models" / configuration
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("plans.json", "dataset.json"):
        (folder / name).write_bytes((ours / name).read_bytes())
    plans = json.loads((ours / "plans.json").read_text())
    axes = mirror_axes(Plans(plans).configuration(configuration))
    python = str(venv / "bin" / "python")
    args = [python, "-c", PEER_MAKE_MODEL, str(folder), configuration, json.dumps(axes)]
    run([*args, *map(str, folds)], peer_env(work, venv))
    return folder


def time_peer(folder: Path, images: Path, work: Path, venv: Path, folds: list) -> dict:
    out = work / "peer_result.json"
    command = [
        str(venv / "bin" / "python"),
        str(HARNESS),
        str(folder),
        str(images),
        "--out",
        str(out),
    ]
    run([*command, "--folds", *map(str, folds)], peer_env(work, venv))
    runs = json.loads(out.read_text())["runs"]
    return {key: runs[f"mirroring_{'on' if key else 'off'}"]["mean"] for key in (True, False)}


def phases(ours: dict) -> str:
    return (
        f"pre {ours['preprocess']:.2f}, window {ours['sliding_window']:.2f}, "
        f"export {ours['export']:.2f}"
    )


def peer_phases(peer: dict) -> str:
    pre = peer["read"] + peer["preprocess"]
    return f"pre {pre:.2f}, window {peer['sliding_window']:.2f}, export {peer['export']:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model-dir", type=Path, help="a trained model folder (ours)")
    source.add_argument("--plans", type=Path, help="plans file: random weights per configuration")
    parser.add_argument("-c", "--configurations", nargs="+", default=["3d_fullres", "2d"])
    parser.add_argument(
        "-f", "--folds", nargs="+", default=None, help="default: 0 (--plans) or all found"
    )
    parser.add_argument("--shape", type=int, nargs=3, default=[48, 64, 64], help="Z Y X")
    parser.add_argument("--spacing", type=float, nargs=3, default=[2.5, 0.7815, 0.7815])
    parser.add_argument("--cases", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--batch-tiles", type=int, help="tiles per forward (default: the predictor's; upstream: 1)"
    )
    parser.add_argument("--no-tta-only", action="store_true", help="skip the mirroring runs")
    parser.add_argument("--peer", type=Path, help="upstream's venv (see ../shared/peer)")
    parser.add_argument("--work", type=Path, help="keep generated files here (default: temp)")
    args = parser.parse_args()
    torch.set_num_threads(multiprocessing.cpu_count())  # what upstream's harness does

    with tempfile.TemporaryDirectory(prefix="bench_predict_") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.model_dir is not None:
            configurations = [args.model_dir.name.split("__")[-1]]
            folds = args.folds
            model = load_trained_model(args.model_dir, folds)
            folds = list(model.folds)
            models = {configurations[0]: (args.model_dir, model)}
        else:
            configurations = args.configurations
            folds = [int(f) for f in (args.folds or [0])]
            plans = json.loads(args.plans.read_text())
            models = {}
            for name in configurations:
                folder = make_random_model(work / "ours" / name, plans, name, folds)
                models[name] = (folder, load_trained_model(folder, folds))
        first = next(iter(models.values()))[1]
        images = work / "images"
        cases = write_cases(
            images, args.cases, args.shape, args.spacing, first.dataset_json.num_channels
        )
        print(f"{args.cases} case(s) of {args.shape} at {args.spacing}, folds {folds}, "
              f"{torch.get_num_threads()} threads", flush=True)  # fmt: skip
        for name, (folder, model) in models.items():
            peer_folder = (
                make_peer_model(folder, work, args.peer, name, folds) if args.peer else None
            )
            modes = [False] if args.no_tta_only else [False, True]
            ours_runs: dict[bool, list[dict]] = {m: [] for m in modes}
            peer_runs: dict[bool, list[dict]] = {m: [] for m in modes}
            for _ in range(args.repeats):
                for mirror in modes:
                    out = work / "out" / name
                    out.mkdir(parents=True, exist_ok=True)
                    ours_runs[mirror].append(time_ours(model, cases, mirror, out, args.batch_tiles))
                if peer_folder is not None:
                    result = time_peer(peer_folder, images, work, args.peer, folds)
                    for mirror in modes:
                        peer_runs[mirror].append(result[mirror])
            report(name, ours_runs, peer_runs)


def report(name: str, ours_runs: dict, peer_runs: dict) -> None:
    some = next(iter(ours_runs.values()))[0]
    shape, tiles, batch = some["preprocessed_shape"], some["n_tiles"], some["batch_tiles"]
    print(f"{name}: preprocessed {shape}, {tiles} tiles, ours {batch} per forward", flush=True)
    for mirror, runs in ours_runs.items():
        best = min(runs, key=lambda r: r["total"])  # the least disturbed run
        line = (
            f"  TTA {'on ' if mirror else 'off'}: ours {best['total']:.2f} s/case ({phases(best)})"
        )
        if peer_runs[mirror]:
            peer = min(peer_runs[mirror], key=lambda r: r["total"])
            line += (
                f" | upstream {peer['total']:.2f} s/case "
                f"({peer_phases(peer)}, {peer['n_tiles']} tiles)"
            )
            line += f" | ours/upstream {best['total'] / peer['total']:.2f}"
            line += f" (window {best['sliding_window'] / peer['sliding_window']:.2f})"
        all_ours = [round(r["total"], 2) for r in runs]
        all_peer = [round(r["total"], 2) for r in peer_runs[mirror]]
        print(f"{line}  runs: ours {all_ours} upstream {all_peer}", flush=True)


if __name__ == "__main__":
    main()
