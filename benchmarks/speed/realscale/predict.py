"""The prediction stages of ``benchmarks.speed.realscale``: export, one case, one fold's validation.

``run_prediction_stages`` returns, per stage, ``{"ours_s", "upstream_s", "ratio",
"ours_peak_mb", "upstream_peak_mb", "note"}`` (ratio = ours_s / upstream_s; upstream's None
without a peer). Each side runs in its own process, so a peak is that side's alone:

- ``predict_export``: one real-size case's 3d_fullres logits (its label one-hot plus seeded noise,
  at the preprocessed size, the same values for both) resampled back to the original geometry,
  argmax, the segmentation written, with ``--save_probabilities``' npz. Ours:
  ``export_prediction`` on float32 numpy (what our sliding window hands over); upstream:
  ``export_prediction_from_logits`` on a float16 tensor (what its sliding window hands over).
  Seconds of the export call; peak RSS of the process (``ru_maxrss``: exact, logits included);
- ``predict_case``: ``nnunet-core predict ... --disable_tta`` against ``nnUNetv2_predict ...
  --disable_tta -device cpu`` on one raw case, same weights; wall and peak RSS of the process tree;
- ``validation_fold``: ``nnunet-core train D 3d_fullres 0 --val --npz`` against ``nnUNetv2_train
  ... --val --npz`` on the fold's real-size validation cases, from the same weights.

The planned network is too slow for this CPU at real size, so both model folders hold the same
smaller one (``setup.FEATURE_DIVISOR``); the notes say so.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.speed.preprocess import timed
from benchmarks.speed.realscale.setup import (
    CONFIGURATION,
    DATASET_ID,
    FEATURE_DIVISOR,
    TRAINER,
    Sides,
    make_ct_dataset,
    prepare,
    run,
)
from nnunet_core.layout.preprocessed import plans_file

MAKE_LOGITS = r"""
import json, sys
import numpy as np
from nnunet_core.io.blosc2_store import open_case
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.io.plans import Plans
pre, case, out = sys.argv[1:]
dataset_json = load_dataset_json(f"{pre}/dataset.json")
plans = Plans.load(f"{pre}/nnUNetPlans.json")
# the case as preprocessed for the other stages (no second preprocessing)
_, seg, properties = open_case(f"{pre}/{plans.configuration('3d_fullres').data_identifier}", case)
seg = seg[:]
classes = 1 + len(dataset_json.label_spec.foreground_labels)
rng = np.random.default_rng(0)
logits = np.empty((classes, *seg.shape[1:]), dtype=np.float32)
for c in range(classes):
    logits[c] = (seg[0] == c) * 4.0 + rng.normal(0, 1.5, seg.shape[1:])
# float16 values: upstream's sliding window hands float16 over, ours float32 of the same values
np.save(f"{out}/logits.npy", logits.astype(np.float16).astype(np.float32))
json.dump(properties, open(f"{out}/properties.json", "w"))
print(list(logits.shape))
"""

EXPORT_OURS = r"""
import json, resource, sys, time
import numpy as np
import torch  # loaded wherever export runs (predictor, validation); upstream's imports it too
from nnunet_core.inference.export import export_prediction
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.io.plans import Plans
pre, folder, out = sys.argv[1:]
plans = Plans.load(f"{pre}/nnUNetPlans.json")
dataset_json = load_dataset_json(f"{pre}/dataset.json")
logits = np.load(f"{folder}/logits.npy")
properties = json.load(open(f"{folder}/properties.json"))
start = time.perf_counter()
export_prediction(logits, properties, plans, plans.configuration("3d_fullres"),
                  dataset_json.label_spec, f"{out}/case", dataset_json.file_ending, True)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

EXPORT_UPSTREAM = r"""
import json, resource, sys, time
import numpy as np, torch
from nnunetv2.inference.export_prediction import export_prediction_from_logits
from nnunetv2.utilities.plans_handling.plans_handler import PlansManager
pre, folder, out = sys.argv[1:]
plans = PlansManager(f"{pre}/nnUNetPlans.json")
dataset_json = json.load(open(f"{pre}/dataset.json"))
logits = torch.from_numpy(np.load(f"{folder}/logits.npy")).half()
properties = json.load(open(f"{folder}/properties.json"))
start = time.perf_counter()
export_prediction_from_logits(logits, properties, plans.get_configuration("3d_fullres"), plans,
                              dataset_json, f"{out}/case", True)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def record(ours: tuple[float, float], upstream: tuple[float, float] | None, note: str) -> dict:
    """A stage's figures: (seconds, peak MB) per side."""
    return {
        "ours_s": round(ours[0], 2),
        "upstream_s": None if upstream is None else round(upstream[0], 2),
        "ratio": None if upstream is None else round(ours[0] / upstream[0], 3),
        "ours_peak_mb": round(ours[1], 1),
        "upstream_peak_mb": None if upstream is None else round(upstream[1], 1),
        "note": note,
    }


def best(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The least disturbed run's seconds, and the lowest peak (the machine is shared)."""
    return min(r[0] for r in runs), min(r[1] for r in runs)


def _fresh(folder: Path) -> Path:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def predict_export(sides: Sides, repeats: int, log: Callable[[str], None]) -> dict:
    folder = _fresh(sides.work / "export")
    ours_pre = sides.root("ours", "pre") / sides.dataset
    case = sides.cases[0]
    shape = run(
        [
            sys.executable,
            "-c",
            MAKE_LOGITS,
            str(ours_pre),
            case,
            str(folder),
        ]
    ).split("\n")[-2]
    runs: dict[str, list[tuple[float, float]]] = {"ours": [], "upstream": []}
    for _ in range(repeats):
        out = _fresh(folder / "ours")
        done = json.loads(
            run([sys.executable, "-c", EXPORT_OURS, str(ours_pre), str(folder), str(out)]).split(
                "\n"
            )[-2]
        )
        runs["ours"].append((done["seconds"], done["peak_mb"]))
        if sides.peer is not None:
            out = _fresh(folder / "upstream")
            command = [
                sides.peer_bin("python"),
                "-c",
                EXPORT_UPSTREAM,
                str(ours_pre),
                str(folder),
                str(out),
            ]
            done = json.loads(run(command, sides.peer_env()).split("\n")[-2])
            runs["upstream"].append((done["seconds"], done["peak_mb"]))
        log(f"predict_export: ours {runs['ours'][-1]}, upstream {runs['upstream'][-1:]}")
    note = (
        f"case {case}, logits {shape} (float32 ours, float16 upstream), with the npz; "
        "seconds of the export call, peak RSS of its process"
    )
    return record(best(runs["ours"]), best(runs["upstream"]) if runs["upstream"] else None, note)


def predict_case(sides: Sides, repeats: int, log: Callable[[str], None]) -> dict:
    case = sides.cases[0]
    images = _fresh(sides.work / "predict_in")
    for image in (sides.raw / sides.dataset / "imagesTr").glob(f"{case}_[0-9]*{sides.ending}"):
        (images / image.name).symlink_to(image.resolve())
    common = [
        "-i",
        str(images),
        "-d",
        str(DATASET_ID),
        "-c",
        CONFIGURATION,
        "-f",
        "0",
        "--disable_tta",
        "-device",
        "cpu",
    ]
    runs: dict[str, list[tuple[float, float]]] = {"ours": [], "upstream": []}
    for _ in range(repeats):
        out = _fresh(sides.work / "predict_out" / "ours")
        command = [
            sys.executable,
            "-m",
            "nnunet_core",
            "predict",
            *common,
            "-tr",
            TRAINER,
            "-o",
            str(out),
            "--results",
            str(sides.root("ours", "results")),
        ]
        wall, peak = timed(command, dict(__import__("os").environ))
        runs["ours"].append((wall, peak / 2**20))
        if sides.peer is not None:
            out = _fresh(sides.work / "predict_out" / "upstream")
            command = [sides.peer_bin("nnUNetv2_predict"), *common, "-o", str(out)]
            wall, peak = timed(command, sides.peer_env())
            runs["upstream"].append((wall, peak / 2**20))
        log(f"predict_case: ours {runs['ours'][-1]}, upstream {runs['upstream'][-1:]}")
    note = (
        f"case {case}, --disable_tta, 1 fold; network with features per stage / "
        f"{FEATURE_DIVISOR} in both model folders (the planned one is too slow for this "
        "CPU); wall and peak RSS of the process tree"
    )
    return record(best(runs["ours"]), best(runs["upstream"]) if runs["upstream"] else None, note)


def validation_fold(sides: Sides, validation: int, repeats: int, log) -> dict:
    common = [
        str(DATASET_ID),
        CONFIGURATION,
        "0",
        "--val",
        "--npz",
        "-device",
        "cpu",
    ]
    runs: dict[str, list[tuple[float, float]]] = {"ours": [], "upstream": []}
    env = dict(__import__("os").environ)
    for _ in range(repeats):
        command = [sys.executable, "-m", "nnunet_core", "train", *common, "-tr", TRAINER]
        command += sides.our_roots()
        wall, peak = timed(command, env)
        runs["ours"].append((wall, peak / 2**20))
        if sides.peer is not None:
            wall, peak = timed([sides.peer_bin("nnUNetv2_train"), *common], sides.peer_env())
            runs["upstream"].append((wall, peak / 2**20))
        log(f"validation_fold: ours {runs['ours'][-1]}, upstream {runs['upstream'][-1:]}")
    note = (
        f"fold 0 with {validation} real-size validation case(s), --npz, no test-time "
        f"mirroring (ours {TRAINER}, upstream's checkpoint without mirror axes); network with "
        f"features per stage / {FEATURE_DIVISOR}; wall and peak RSS of the process tree"
    )
    return record(best(runs["ours"]), best(runs["upstream"]) if runs["upstream"] else None, note)


def run_prediction_stages(
    raw_dataset: Path,
    work: Path,
    peer_venv: Path | None,
    quick: bool,
    log: Callable[[str], None],
) -> dict[str, dict[str, Any]]:
    """``predict_export``, ``predict_case`` and ``validation_fold`` on ``raw_dataset``'s first
    training cases (2 with ``quick``, else 3), ours beside upstream's when ``peer_venv``.

    ``quick`` validates one real-size case (the other trains), so that these stages stay
    within about 4 of the harness's 10 minutes on a 2-core machine: the fold's figure is then
    one case's prediction, export and metrics on each side."""
    count = 2 if quick else 3
    repeats = 1 if quick else 2
    validation = 1 if quick else count
    sides = prepare(
        Path(raw_dataset), Path(work) / "predict_stages", peer_venv, count, True, validation, log
    )
    assert plans_file(sides.root("ours", "pre") / sides.dataset).is_file()
    return {
        "predict_export": predict_export(sides, repeats, log),
        "predict_case": predict_case(sides, repeats, log),
        "validation_fold": validation_fold(sides, validation, repeats, log),
    }


def main() -> None:
    """``python -m benchmarks.speed.realscale.predict RAW_DATASET WORK [--peer VENV] [--quick]``:
    these stages alone (the harness ``benchmarks.speed.realscale`` runs them with the others)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.speed.realscale.predict", description=main.__doc__.split("\n")[0]
    )
    parser.add_argument("raw_dataset", type=Path)
    parser.add_argument("work", type=Path)
    parser.add_argument("--peer", type=Path)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--slices", type=int, default=100, help="of a dataset made here")
    args = parser.parse_args()
    if not args.raw_dataset.exists():
        make_ct_dataset(args.raw_dataset, 2 if args.quick else 3, args.slices)
    stages = run_prediction_stages(
        args.raw_dataset, args.work, args.peer, args.quick, lambda line: print(line, flush=True)
    )
    text = json.dumps(stages, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
