"""One shard job of the prediction mode: predict its cases into the user's output folder.

``python -m nnunet_core.new_scans.shard RUN_DIR SHARD``. The cases still missing (a retried job
finds some done) are checked first: a case that cannot be read or does not fit the model fails
alone, with one line naming it and the reason, recorded in the output folder for ``failed.tsv``.
The others are predicted by each member model into the run's staging folder (reading and
preprocessing the next cases, the network and, on a GPU, the export of the previous ones overlap:
``prediction_settings``), averaged when the model is an ensemble, postprocessed as selected and
written aside and renamed into the output folder; then the case's record (its key and figures)
and its overlay PNG. A job killed half-way keeps every case it finished. The job succeeds when
each case is either predicted or recorded as failed; ``summary`` reports both.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nnunet_core.cluster.no_retry import marks, read_marker, write_marker
from nnunet_core.dataset.discovery import RawCase, case_channel_files
from nnunet_core.dataset.verify_case import check_test_case
from nnunet_core.errors import NnunetCoreError
from nnunet_core.io.atomic import (
    atomic_path,
    read_json,
    remove_atomic_temporaries,
    write_json,
)
from nnunet_core.io.dataset_json import DatasetJson, load_dataset_json
from nnunet_core.io.plans import Plans
from nnunet_core.io.prediction_output import mark_prediction_folder
from nnunet_core.io.readers import reader_for_plans
from nnunet_core.layout.new_scans import (
    SPEC_JSON,
    STAGING_FOLDER,
    case_record_path,
    failure_record_path,
    qc_png_path,
)
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.results import PLANS_JSON, TrainedModel
from nnunet_core.new_scans.plan import is_done, no_retry_marker, shard_cases, shard_marker

if TYPE_CHECKING:
    from nnunet_core.inference.predictor import PredictionSettings

PREFIX = "nnunet-core predict"


def fail(output: Path, case: str, key: str, reason: str) -> None:
    print(f"{PREFIX}: case {case} failed: {reason}", flush=True)
    write_json(failure_record_path(output, case), {"case": case, "key": key, "reason": reason})


def checked_cases(
    cases: list[str], spec: dict[str, Any], dataset_json: DatasetJson, plans: Plans, ndim: int
) -> tuple[list[RawCase], dict[str, tuple]]:
    """The cases that can be predicted, with each one's (shape, spacing); the others fail."""
    folder, output, key = Path(spec["input"]), Path(spec["output"]), spec["key"]
    reader = reader_for_plans(plans).name
    good: list[RawCase] = []
    geometry: dict[str, tuple] = {}
    for identifier in cases:
        case = RawCase(identifier, case_channel_files(folder, identifier, dataset_json), None)
        missing = [p.name for p in case.images if not p.is_file()]
        if missing:
            count = dataset_json.num_channels
            reason = f"{', '.join(missing)} missing (the model takes {count} channel(s))"
            fail(output, identifier, key, reason)
            continue
        check = check_test_case(case, folder.parent, (), None, reader)
        if check.problems:
            fail(output, identifier, key, "; ".join(check.problems))
        elif ndim == 3 and check.ndim == 2:
            fail(output, identifier, key, "a 2-D image, but the model is 3-D")
        else:
            good.append(case)
            geometry[identifier] = (check.shape, check.spacing)
    return good, geometry


def prediction_settings(settings: dict[str, Any], members: int) -> PredictionSettings:
    """The predictor's settings for this shard's job.

    Workers read and preprocess the next cases beside the network. On the CPU the export runs in
    the job's process: the network already keeps every core busy, and an export worker beside it
    only competes for them and holds 0.3-0.6 GB more. ``low_memory`` passes one tile per forward
    pass, as upstream, instead of the plan's batch of tiles: about 0.7 GB less at the CT benchmark's
    size, 10-25 % more network time on a CPU (benchmarks/results/speed/predict_many.md)."""
    from nnunet_core.inference.predictor import PredictionSettings
    from nnunet_core.runtime.devices import resolve_device

    workers = max(0, min(2, (os.cpu_count() or 1) - 1))
    device = resolve_device(settings["device"]).type
    low_memory = bool(settings["low_memory"])
    return PredictionSettings(
        step_size=float(settings["step_size"]),
        use_mirroring=bool(settings["use_mirroring"]),
        save_probabilities=bool(settings["save_probabilities"]) or members > 1,
        device=device,
        num_processes_preprocessing=workers,
        num_processes_export=0 if device == "cpu" or low_memory else workers,
        batch_tiles=1 if low_memory else None,
        overwrite=False,
        progress=False,
    )


def predict_members(
    spec: dict[str, Any], cases: list[RawCase], staging: Path, timings: dict[str, float]
) -> list[Path]:
    """Each member's predictions into ``staging/member_<i>``; returns those folders."""
    from nnunet_core.inference.cascade import with_previous_stage
    from nnunet_core.inference.model_folder import load_trained_model
    from nnunet_core.inference.predictor import predict_cases

    members = spec["members"]
    predictor = prediction_settings(spec["settings"], len(members))
    folders = []
    for index, member in enumerate(members):
        folder = staging / f"member_{index}"
        model = load_trained_model(
            member["model_dir"],
            member["folds"],
            trust_model_code=True,  # the planning refused a model whose code may not run
            consent_how=spec["consent"],
        )
        todo = cases
        if model.previous_stage is not None:  # a cascade stage: its previous stage first
            before = staging / f"member_{index}_{model.previous_stage}"
            lowres = load_trained_model(
                model.sibling(model.previous_stage),
                member["folds"],
                trust_model_code=True,
                consent_how=spec["consent"],
            )
            segmentations_only = dataclasses.replace(predictor, save_probabilities=False)
            predict_cases(lowres, cases, before, segmentations_only)
            todo = with_previous_stage(cases, before, model.dataset_json.file_ending)
        predict_cases(model, todo, folder, predictor, timings)
        folders.append(folder)
    return folders


def finish_case(
    case: RawCase,
    folders: list[Path],
    spec: dict[str, Any],
    dataset_json: DatasetJson,
    extra: dict[str, Any],
) -> None:
    """Ensemble, postprocess and write one case into the output folder, then its record."""
    from nnunet_core.evaluation.ensemble import merge_case
    from nnunet_core.evaluation.postprocessing import load_postprocessing, postprocess_file
    from nnunet_core.io.images import read_seg
    from nnunet_core.new_scans.montage import write_case_png
    from nnunet_core.new_scans.quality import case_figures, flags

    output, ending = Path(spec["output"]), dataset_json.file_ending
    identifier = case.identifier
    save_probabilities = bool(spec["settings"]["save_probabilities"])
    if len(folders) > 1:
        base = folders[0].parent / "ensemble" / identifier
        base.parent.mkdir(parents=True, exist_ok=True)
        npz = [f / f"{identifier}.npz" for f in folders]
        source = merge_case(npz, base, ending, dataset_json.label_spec, save_probabilities)
        probability_base = base
    else:
        source = folders[0] / f"{identifier}{ending}"
        probability_base = folders[0] / identifier
    steps = load_postprocessing(spec["postprocessing"]) if spec["postprocessing"] else []
    target = output / f"{identifier}{ending}"
    if save_probabilities:
        for suffix in (".npz", ".json"):
            with atomic_path(output / f"{identifier}{suffix}", suffix=suffix) as tmp:
                shutil.copyfile(probability_base.with_name(identifier + suffix), tmp)
    postprocess_file(source, target, steps)  # written aside and renamed
    segmentation, _ = read_seg(target)
    shape, spacing = extra["geometry"]
    volumes = case_figures(segmentation[0], spacing, dataset_json.label_spec)["volumes_ml"]
    record = {
        "case": identifier,
        "key": spec["key"],
        "shape": list(shape),
        "spacing": list(spacing),
        # the case's own time: its network passes, then ensembling, postprocessing and export
        "seconds": round(extra["network_s"] + time.perf_counter() - extra["started"], 3),
        "volumes_ml": volumes,
        "flags": flags(volumes, extra["ranges"]),
        "segmentation": target.name,
    }
    try:
        write_case_png(case.images[0], target, qc_png_path(output, identifier))
    except (NnunetCoreError, OSError, ValueError) as exc:  # a picture never fails a case
        print(f"{PREFIX}: case {identifier}: no overlay PNG ({exc})", file=sys.stderr)
    write_json(case_record_path(output, identifier), record)
    failure_record_path(output, identifier).unlink(missing_ok=True)


def _staged(staging: Path, case: str, ending: str) -> list[Path]:
    """A case's files in the run's staging folders (each member's, a previous stage's, the
    ensemble's)."""
    if not staging.is_dir():
        return []
    names = (f"{case}{ending}", f"{case}.npz", f"{case}.json")
    return [f for folder in staging.iterdir() if folder.is_dir() for n in names
            if (f := folder / n).is_file()]  # fmt: skip


def clean_before(cases: list[RawCase], output: Path, staging: Path, ending: str) -> None:
    """What a killed attempt left for these cases: the temporaries of its writes into the output
    folder (only these cases': other shards write there too), and staged predictions older than
    the case's images (an image replaced since is predicted again, not finished from them)."""
    names = [f"{c.identifier}{s}" for c in cases for s in (ending, ".npz", ".json")]
    remove_atomic_temporaries(output, names)
    for case in cases:
        newest = max(p.stat().st_mtime for p in case.images)
        for path in _staged(staging, case.identifier, ending):
            if path.stat().st_mtime < newest:
                path.unlink(missing_ok=True)


def run_shard(run_dir: Path, shard: str) -> int:
    job_start = time.perf_counter()
    spec = read_json(run_dir / SPEC_JSON)
    output, key = Path(spec["output"]), spec["key"]
    cases = shard_cases(run_dir, shard)
    first = Path(spec["members"][0]["model_dir"])
    dataset_json = load_dataset_json(first / DATASET_JSON)
    todo = [c for c in cases if not is_done(output, c, key, dataset_json.file_ending)]
    print(f"shard {shard}: {len(todo)} of {len(cases)} case(s) to predict", flush=True)
    output.mkdir(parents=True, exist_ok=True)
    mark_prediction_folder(output, "predict (workflow)")
    plans = Plans.load(first / PLANS_JSON)
    configuration = TrainedModel.from_identifier(first.name).configuration
    ndim = len(plans.configuration(configuration).patch_size)  # 3: a 2-D image does not fit
    good, geometry = checked_cases(todo, spec, dataset_json, plans, ndim)
    staging, ending = run_dir / STAGING_FOLDER, dataset_json.file_ending
    clean_before(good, output, staging, ending)
    failed = len(todo) - len(good)
    timings: dict[str, float] = {}
    if good:
        from nnunet_core.new_scans.training_volumes import training_volume_ranges

        folders = predict_members(spec, good, staging, timings)
        model_dirs = [Path(m["model_dir"]) for m in spec["members"]]
        ranges = training_volume_ranges(model_dirs, dataset_json.label_spec)
        for case in good:
            extra = {
                "geometry": geometry[case.identifier],
                "ranges": ranges,
                "network_s": timings.get(case.identifier, 0.0),
                "started": time.perf_counter(),
            }
            try:
                finish_case(case, folders, spec, dataset_json, extra)
                for path in _staged(staging, case.identifier, ending):  # written: not needed
                    path.unlink(missing_ok=True)
            except NnunetCoreError as exc:
                fail(output, case.identifier, key, str(exc))
                failed += 1
    wall = time.perf_counter() - job_start
    busy = sum(timings.values()) if good else 0.0
    write_json(
        shard_marker(run_dir, shard),
        {"cases": cases, "failed": failed, "seconds": round(wall, 2), "network_s": round(busy, 2)},
    )
    # what a user of several GPUs wants to know: how much of the job the device worked
    print(
        f"shard {shard}: the network ran {busy:.2f} s of the job's {wall:.2f} s "
        f"({100 * busy / max(wall, 1e-9):.0f} %; the rest: reading, checks, export, QC)",
        flush=True,
    )
    print(f"shard {shard}: {len(todo) - failed} case(s) predicted, {failed} failed", flush=True)
    print(f"wrote {len(todo) - failed} prediction(s) to {output}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnunet_core.new_scans.shard")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("shard")
    parser.add_argument("--gpu-slot", action="store_true", help="take a free GPU first")
    parser.add_argument("--gpu-lock-dir")
    args = parser.parse_args(argv)
    if args.gpu_slot:
        from nnunet_core.cluster.gpu_slots import take_slots_for

        device = read_json(args.run_dir / SPEC_JSON)["settings"]["device"]
        take_slots_for(device, 1, args.gpu_lock_dir, folds_per_gpu=1)
    # a retry (a cluster's resubmission) of an attempt that failed in a way no retry helps
    marker = no_retry_marker(args.run_dir, args.shard)
    earlier = read_marker(marker)
    if earlier is not None:
        print(f"{earlier.line} (an earlier attempt; not tried again)", file=sys.stderr)
        return earlier.exit_status
    try:
        return run_shard(args.run_dir, args.shard)
    except NnunetCoreError as exc:
        line = f"{PREFIX}: error: {exc}"
        print(line, file=sys.stderr)
        if marks(exc.exit_code):  # the model or its code: the next run of the workflow tries again
            write_marker(marker, exc.exit_code, line)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
