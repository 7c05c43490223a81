"""Final validation of a fold: predict its validation cases, export them, write summary.json.

Cases are read from the preprocessed folder (as upstream: no second preprocessing), predicted
with the sliding window (step 0.5, Gaussian weighting, mirroring over the training's mirror axes)
and exported to ``fold_k/validation/{case}{file_ending}`` in the raw image's geometry, plus
``{case}.npz``/``{case}.json`` with probabilities when asked (model selection needs them).
``summary.json`` compares them with ``$preprocessed/D/gt_segmentations``. A configuration with a
next stage (3d_lowres) also writes each case for the cascade (``training.fold.next_stage``); a
cascade stage stacks its previous stage's one-hot onto each case before the sliding window
(upstream's ``perform_actual_validation``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from nnunet_core.evaluation.metrics import (
    classes_from_dataset_json,
    compute_metrics_on_folder,
    save_summary_json,
)
from nnunet_core.inference.cascade_input import cascade_input
from nnunet_core.inference.export import export_prediction, exported_files
from nnunet_core.inference.predictor import tile_batch_size
from nnunet_core.inference.sliding_window import sliding_window_logits
from nnunet_core.io.blosc2_store import open_array, open_case
from nnunet_core.io.dataset_json import parse_dataset_json
from nnunet_core.io.removal import remove_file
from nnunet_core.layout.results import (
    NEXT_STAGE_SUFFIX,
    PREDICTED_NEXT_STAGE_FOLDER,
    SUMMARY_JSON,
    VALIDATION_FOLDER,
    next_stage_file,
)
from nnunet_core.training.distributed import barrier
from nnunet_core.training.fold.next_stage import export_next_stage, exports_next_stage
from nnunet_core.training.fold.setup import FoldSetup
from nnunet_core.training.fold.validation_resume import done_cases
from nnunet_core.training.optimizer import unwrap

STEP_SIZE = 0.5


def remove_stale_predictions(folder: Path, keep: Sequence[str], file_ending: str) -> list[Path]:
    """Delete predictions of cases that are no longer validated here (they would be evaluated)."""
    keep_names = {f"{k}{suffix}" for k in keep for suffix in (file_ending, ".npz", ".json")}
    stale = [
        p
        for p in folder.iterdir()
        if p.is_file()
        and p.name != SUMMARY_JSON
        and p.name.endswith((file_ending, ".npz", ".json"))
        and p.name not in keep_names
    ]
    for path in stale:
        remove_file(path, inside=[folder])
    return stale


def network_input(setup: FoldSetup, case_id: str, data: np.ndarray) -> np.ndarray:
    """The case's float32 data, with a cascade stage's previous-stage one-hot stacked on."""
    data = np.ascontiguousarray(data, dtype=np.float32)
    if setup.previous_stage_folder is None:
        return data
    previous = open_array(setup.previous_stage_folder / f"{case_id}{NEXT_STAGE_SUFFIX}")
    return cascade_input(data, previous[:], setup.label_spec, case_id)


def predict_case(
    network: nn.Module,
    setup: FoldSetup,
    case_id: str,
    device: torch.device,
    mirror_axes: Sequence[int] | None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """Logits ``(heads, *preprocessed shape)`` and the properties of one preprocessed case."""
    data, _seg, properties = open_case(setup.data_folder, case_id)
    tensor = torch.from_numpy(network_input(setup, case_id, data[:]))
    logits = sliding_window_logits(
        network,
        tensor,
        setup.configuration.patch_size,
        setup.label_spec.num_segmentation_heads,
        step_size=STEP_SIZE,
        use_gaussian=True,
        mirror_axes=mirror_axes,
        device=device,
        batch_tiles=tile_batch_size(setup.configuration),  # as nnunet-core predict
    )
    return logits, properties


def validate_fold(
    network: nn.Module,
    setup: FoldSetup,
    device: torch.device,
    mirror_axes: Sequence[int] | None,
    save_probabilities: bool = False,
    log: Callable[..., None] = print,
    rank: int = 0,
    world_size: int = 1,
    keep_after: Path | None = None,
) -> None:
    """Predict and export this rank's share of the validation cases.

    ``keep_after``: a retried fold's ``checkpoint_final.pth``; cases exported after it are kept
    (``validation_resume``), the others predicted.

    Rank 0 first removes stale files (other cases, a killed run's temporaries); under DDP every
    rank waits for that in a barrier before it writes, so the cleanup never sees another rank's
    temporary file. Under DDP the caller puts a barrier between the exports and rank 0's
    ``summarize_validation``.
    """
    output = setup.output_folder / VALIDATION_FOLDER
    output.mkdir(parents=True, exist_ok=True)
    file_ending = setup.dataset_json["file_ending"]
    if rank == 0:
        for path in remove_stale_predictions(output, setup.val_keys, file_ending):
            log(f"removed stale validation file {path.name}")
    if world_size > 1:
        barrier()  # the cleanup is done before any rank writes (it would delete their temporaries)
    next_stage = exports_next_stage(setup.configuration, setup.fold)
    if rank == 0 and setup.configuration.next_stage and not next_stage:
        log(
            f"fold {setup.fold}: no {PREDICTED_NEXT_STAGE_FOLDER} "
            "(only cross-validation folds write it)"
        )
    plain = unwrap(network)
    plain.deep_supervision = False
    plain.eval()
    # a case is exported on a thread while the next one is predicted (upstream: an export pool);
    # at most one export at a time, so at most two cases' logits are held
    exporter = ThreadPoolExecutor(1, thread_name_prefix="validation-export")
    exporting: Future | None = None
    try:
        mine = setup.val_keys[rank::world_size]
        kept = kept_cases(setup, mine, keep_after, save_probabilities, next_stage)
        for index, case_id in enumerate(mine, 1):
            if case_id in kept:
                log(f"validation: case {index}/{len(mine)} ({case_id}) kept from the last attempt")
                continue
            start = time.time()
            logits, properties = predict_case(plain, setup, case_id, device, mirror_axes)
            if exporting is not None:
                exporting.result()
            exporting = exporter.submit(
                export_prediction,
                logits,
                properties,
                setup.plans,
                setup.configuration,
                setup.label_spec,
                output / case_id,
                file_ending,
                save_probabilities=save_probabilities,
            )
            if next_stage:
                export_next_stage(
                    logits,
                    properties,
                    setup.plans,
                    setup.configuration,
                    setup.label_spec,
                    setup.output_folder.parent,
                    setup.data_folder.parent,
                    case_id,
                )
            seconds = time.time() - start
            shape = list(logits.shape[1:])
            log(f"validation: case {index}/{len(mine)} ({case_id}) {seconds:.1f} s, shape {shape}")
        if exporting is not None:
            exporting.result()
    finally:
        exporter.shutdown(wait=True)
        plain.deep_supervision = True


def kept_cases(
    setup: FoldSetup,
    cases: Sequence[str],
    weights: Path | None,
    save_probabilities: bool,
    next_stage: bool,
) -> set[str]:
    """The cases a retried fold need not predict again (none without ``weights``)."""
    if weights is None:
        return set()
    output = setup.output_folder / VALIDATION_FOLDER
    ending = setup.dataset_json["file_ending"]
    stages = setup.configuration.next_stage if next_stage else ()
    model_dir = setup.output_folder.parent

    def files_of(case_id: str) -> list[Path]:
        files = exported_files(output, case_id, ending, save_probabilities)
        return files + [next_stage_file(model_dir, name, case_id) for name in stages]

    return done_cases(cases, weights, files_of)


def summarize_validation(setup: FoldSetup, log: Callable[..., None] = print) -> dict[str, Any]:
    """The metrics of the exported predictions (upstream's ``chill``), not yet written: the
    caller writes ``validation/summary.json`` with ``write_validation_summary`` as the fold's
    very last file, because the workflow counts a fold with that file as done."""
    output = setup.output_folder / VALIDATION_FOLDER
    classes = classes_from_dataset_json(parse_dataset_json(setup.dataset_json))
    summary = compute_metrics_on_folder(
        setup.gt_folder,
        output,
        setup.dataset_json["file_ending"],
        setup.label_spec,
        chill=True,
        classes=classes,
    )
    log(f"Mean Validation Dice: {summary['foreground_mean']['Dice']}")
    return summary


def write_validation_summary(setup: FoldSetup, summary: dict[str, Any]) -> Path:
    """``validation/summary.json`` (atomic, upstream's layout)."""
    target = setup.output_folder / VALIDATION_FOLDER / SUMMARY_JSON
    save_summary_json(summary, target)
    return target
