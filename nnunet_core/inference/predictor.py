"""Predict raw cases with a trained model folder (upstream's
``nnUNetPredictor.predict_from_files``).

The model comes from a trained model folder (``model_folder``). Each case is read and preprocessed
exactly as in training, the folds' logits are averaged (sliding window, Gaussian weighting,
mirroring over the checkpoint's ``inference_allowed_mirroring_axes``) and exported in the input
image's geometry.

The three stages overlap with bounded memory: preprocessing runs at most one case per worker
ahead of prediction, and at most ``workers + 1`` cases of logits wait for an export worker before
prediction blocks (upstream's backpressure); the last case is exported in this process, which
has nothing else to do by then. A stage with 0 processes runs inline. Workers are
forked before the networks move to the device; export workers use torch on the CPU with one
thread each, the others never touch torch.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nnunet_core.dataset.discovery import (
    RawCase,
    case_channel_files,
    case_identifiers,
    several_channels_per_file,
)
from nnunet_core.errors import ConfigurationError, DatasetError, NnunetCoreError
from nnunet_core.inference.cascade import preprocess_case
from nnunet_core.inference.export import export_prediction, exported_files
from nnunet_core.inference.input_check import check_inputs
from nnunet_core.inference.model_folder import (
    Fold,
    LoadedModel,
    checkpoint_paths,
    model_file,
)
from nnunet_core.inference.sliding_window import predict_logits_from_folds
from nnunet_core.io.atomic import write_json
from nnunet_core.io.dataset_json import DatasetJson, load_dataset_json
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.layout.raw import (
    DATASET_JSON,
    IMAGES_TS,
    channel_file_name,
    channel_file_pattern,
    channel_suffix,
)
from nnunet_core.layout.results import PLANS_JSON
from nnunet_core.model import checkpoint as ckpt
from nnunet_core.runtime.case_progress import CaseProgress, wants_bar

MAX_TILE_BATCH = 8


@dataclass(frozen=True)
class PredictionSettings:
    """How to predict; defaults are upstream's ``nnUNetv2_predict`` defaults."""

    step_size: float = 0.5
    use_mirroring: bool = True
    save_probabilities: bool = False
    device: str = "cpu"
    num_processes_preprocessing: int = 3
    num_processes_export: int = 3
    overwrite: bool = True  # False: keep cases whose outputs exist (--continue_prediction)
    progress: bool | None = None  # None: a bar when stderr is a terminal, else case i/N lines
    batch_tiles: int | None = None  # None: tile_batch_size(configuration)
    fp16_accumulation: bool = False  # True: upstream's float16 sums (its numbers exactly)
    on_device: bool = True  # False: the case and the sums on the CPU (--not_on_device)


def tile_batch_size(configuration: Configuration) -> int:
    """Tiles per forward pass: the plan's training batch size, at most ``MAX_TILE_BATCH``.

    Upstream predicts one tile at a time. Batching is our deviation: small 2-D tiles run about
    twice as fast per tile on a CPU in batches of 8, large 3-D tiles run as fast, and memory stays
    below that of a training step (which holds a batch and its activations for the gradients).
    """
    batch_size = configuration.batch_size if configuration.has("batch_size") else 1
    return max(1, min(batch_size, MAX_TILE_BATCH))


def input_cases(folder: str | os.PathLike, dataset_json: DatasetJson) -> list[RawCase]:
    """The cases of an input folder (``CASE_XXXX{ending}``), each with exactly the model's
    channels."""
    folder = Path(folder)
    if not folder.is_dir():
        msg = f"{folder}: input folder not found"
        raise DatasetError(msg)
    ending, count = dataset_json.file_ending, dataset_json.num_channels
    identifiers = case_identifiers(folder, ending)
    if not identifiers:
        msg = (
            f"{folder}: no images named {channel_file_name('CASE', 0, ending)} "
            f"(one file per channel, like {IMAGES_TS})"
        )
        raise DatasetError(msg)
    pattern = channel_file_pattern(ending)
    channels: dict[str, list[int]] = defaultdict(list)
    for path in folder.iterdir():
        if match := pattern.match(path.name):
            channels[match.group(1)].append(int(match.group(2)))
    for identifier in identifiers:
        found = sorted(channels[identifier])
        # an RGB natural image holds several channels in one file (NaturalImage2DIO)
        if found != list(range(count)) and not (found and several_channels_per_file(dataset_json)):
            names = ", ".join(channel_suffix(c) for c in found)
            expected = channel_file_name(identifier, 0, ending)
            if count > 1:
                expected += f" to {channel_file_name(identifier, count - 1, ending)}"
            msg = (
                f"case {identifier} in {folder}: channel files {names} but the model expects "
                f"{count} channel(s) {list(dataset_json.channel_names.values())}: {expected}"
            )
            raise DatasetError(msg)
    return [RawCase(i, case_channel_files(folder, i, dataset_json), None) for i in identifiers]


def prediction_exists(output_dir: Path, identifier: str, ending: str, probabilities: bool) -> bool:
    """A case's outputs are complete: each file is written atomically, so existing means whole,
    and a case killed between two of them is redone."""
    files = exported_files(output_dir, identifier, ending, probabilities)
    return all(path.is_file() for path in files)


def _one_torch_thread() -> None:
    """An export worker resamples with torch on one thread: a forked child that enters the
    parent's OpenMP thread pool hangs, and the workers share the cores anyway."""
    torch.set_num_threads(1)


class _Stage:
    """One pipeline stage: ``processes`` forked workers, or inline calls when 0."""

    def __init__(self, processes: int, initializer: Callable[[], None] | None = None) -> None:
        self.pool: ProcessPoolExecutor | None = None
        if processes > 0:
            methods = mp.get_all_start_methods()
            context = mp.get_context("fork" if "fork" in methods else "spawn")
            self.pool = ProcessPoolExecutor(processes, mp_context=context, initializer=initializer)
            # fork every worker now: before CUDA starts in this process (a forked CUDA context
            # breaks); the workers never touch CUDA (export uses torch on the CPU only)
            self.pool.submit(os.getpid).result()

    def submit(self, function: Callable[..., Any], *args: Any) -> Future:
        if self.pool is not None:
            return self.pool.submit(function, *args)
        future: Future = Future()
        try:
            future.set_result(function(*args))
        except Exception as exc:
            future.set_exception(exc)
        return future

    def close(self, cancel: bool) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=cancel)


def _result(future: Future, identifier: str, stage: str) -> Any:
    """A stage's result; a dead worker or a bug names the case."""
    try:
        return future.result()
    except BrokenProcessPool:
        msg = f"case {identifier}: a {stage} worker died (out of memory? use fewer processes)"
        raise NnunetCoreError(msg) from None
    except NnunetCoreError:
        raise
    except Exception as exc:
        exc.add_note(f"during {stage} of case {identifier}")
        raise


def _check_previous_stage(model: LoadedModel, cases: Sequence[RawCase]) -> None:
    """A cascade stage needs every case's previous-stage file; other models take none."""
    previous = model.previous_stage
    for case in cases:
        if previous is not None and case.label is None:
            msg = (
                f"case {case.identifier}: {model.configuration_name} is a cascade stage and needs "
                f"the {previous} segmentation (-prev_stage_predictions DIR)"
            )
            raise ConfigurationError(msg)
        if previous is None and case.label is not None:
            msg = (
                f"case {case.identifier}: {model.configuration_name} is no cascade stage; it takes "
                "no previous-stage segmentation"
            )
            raise ConfigurationError(msg)


def _write_model_files(model: LoadedModel, output_dir: Path) -> None:
    """dataset.json and plans.json next to the predictions (ensembling reads them there)."""
    write_json(output_dir / DATASET_JSON, model.dataset_json.raw)
    write_json(output_dir / PLANS_JSON, model.plans.raw)


def predict_cases(
    model: LoadedModel,
    cases: Sequence[RawCase],
    output_dir: str | os.PathLike,
    settings: PredictionSettings = PredictionSettings(),
    timings: dict[str, float] | None = None,
) -> list[Path]:
    """Predict ``cases`` into ``output_dir/{case}{file_ending}``; returns the written
    segmentations. A cascade stage's cases carry their previous-stage file as ``label``
    (``cascade.with_previous_stage``). ``timings`` adds each predicted case's network seconds (the
    device's work, the logits back on the CPU included; not the wait for its preprocessing)."""
    _check_previous_stage(model, cases)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    _write_model_files(model, output_dir)
    ending = model.dataset_json.file_ending
    todo = [
        c
        for c in cases
        if settings.overwrite
        or not prediction_exists(output_dir, c.identifier, ending, settings.save_probabilities)
    ]
    if len(todo) < len(cases):
        print(f"{len(cases) - len(todo)} case(s) already predicted; {len(todo)} to go", flush=True)
    if not todo:
        return []
    show_bar = wants_bar(settings.progress)
    # the job's threads (the workflow sets OMP_NUM_THREADS): a slow CPU job shows its cores
    threads = torch.get_num_threads()
    print(f"predict: {len(todo)} case(s) on {settings.device}, {threads} torch threads", flush=True)
    # never more workers than cases they could serve: the first case is preprocessed while this
    # process waits anyway and the last is exported here, so one case needs no worker at all
    preprocessing = _Stage(min(max(0, settings.num_processes_preprocessing), len(todo) - 1))
    exporting = _Stage(min(max(0, settings.num_processes_export), len(todo) - 1), _one_torch_thread)
    cancel = True
    try:
        written = _run(
            model, todo, output_dir, settings, preprocessing, exporting, show_bar, timings
        )
        cancel = False
    finally:
        preprocessing.close(cancel)
        exporting.close(cancel)
    return written


def autotune_convolutions(device: torch.device) -> None:
    """cuDNN autotuning on CUDA as upstream's predictor, except under deterministic algorithms (a
    deterministic fold's final validation): autotuning may pick another algorithm on each run."""
    if device.type == "cuda" and not torch.are_deterministic_algorithms_enabled():
        torch.backends.cudnn.benchmark = True


def _run(
    model: LoadedModel,
    cases: list[RawCase],
    output_dir: Path,
    settings: PredictionSettings,
    preprocessing: _Stage,
    exporting: _Stage,
    show_bar: bool,
    timings: dict[str, float] | None = None,
) -> list[Path]:
    device = torch.device(settings.device)
    autotune_convolutions(device)
    networks = [n.to(device).eval() for n in model.networks]
    mirror_axes = model.mirror_axes if settings.use_mirroring else None
    # upstream's numbers: its one tile per forward pass too (a batched conv rounds differently)
    single = 1 if settings.fp16_accumulation else None
    batch_tiles = settings.batch_tiles or single or tile_batch_size(model.configuration)
    ahead = 1 + max(0, settings.num_processes_preprocessing)
    max_queued = max(0, settings.num_processes_export) + 1
    queue: deque[tuple[RawCase, Future]] = deque()
    exports: deque[tuple[str, Future]] = deque()
    written: list[Path] = []
    submitted = 0
    pre_args = (model.plans, model.configuration_name, model.dataset_json)
    inline = _Stage(0)
    with CaseProgress(len(cases), "predict", bar=show_bar) as progress:
        for _ in cases:
            while submitted < len(cases) and len(queue) < ahead:
                upcoming = cases[submitted]
                queue.append((upcoming, preprocessing.submit(preprocess_case, upcoming, *pre_args)))
                submitted += 1
            case, future = queue.popleft()
            start = time.perf_counter()
            data, properties = _result(future, case.identifier, "preprocessing")
            network_start = time.perf_counter()
            logits = predict_logits_from_folds(
                networks,
                torch.from_numpy(data),
                model.patch_size,
                model.num_outputs,
                step_size=settings.step_size,
                use_gaussian=True,
                mirror_axes=mirror_axes,
                device=device,
                batch_tiles=batch_tiles,
                accumulate=torch.float16 if settings.fp16_accumulation else torch.float32,
                on_device=settings.on_device,
            ).numpy()
            network_seconds = time.perf_counter() - network_start
            del data
            while exports and (len(exports) >= max_queued or exports[0][1].done()):
                identifier, done = exports.popleft()
                written.append(_result(done, identifier, "export"))
            export_args = (
                properties,
                model.plans,
                model.configuration,
                model.dataset_json.label_spec,
                output_dir / case.identifier,
                model.dataset_json.file_ending,
                settings.save_probabilities,
            )
            # the last case is exported here: nothing else runs now, so a worker would only add
            # a pickled copy of its logits, and this process has all of torch's threads
            stage = inline if case is cases[-1] else exporting
            exports.append((case.identifier, stage.submit(export_prediction, logits, *export_args)))
            del logits
            if timings is not None:
                timings[case.identifier] = timings.get(case.identifier, 0.0) + network_seconds
            progress.done(case.identifier, time.perf_counter() - start)
        while exports:
            identifier, done = exports.popleft()
            written.append(_result(done, identifier, "export"))
    return written


def prepare_inputs(
    model_dir: str | os.PathLike,
    input_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    folds: Sequence[Fold] | None = None,
    checkpoint_name: str = ckpt.FINAL,
    num_parts: int = 1,
    part_id: int = 0,
    check_processes: int = 1,
) -> list[RawCase]:
    """Check everything a prediction needs before anything is written; returns this part's cases.

    The part is ``cases[part_id::num_parts]`` (upstream's split for several GPUs or processes).
    Its images get verify's per-file checks (``input_check``) in ``check_processes`` workers.
    """
    if Path(input_dir).resolve() == Path(output_dir).resolve():
        msg = f"{output_dir}: output folder must differ from the input folder"
        raise ConfigurationError(msg)
    if not 0 <= part_id < num_parts:
        msg = f"part_id {part_id} must be in 0..{num_parts - 1} (num_parts {num_parts})"
        raise ConfigurationError(msg)
    model_dir = Path(model_dir)
    checkpoint_paths(model_dir, folds, checkpoint_name)
    dataset_json = load_dataset_json(model_file(model_dir, DATASET_JSON))
    plans_path = model_file(model_dir, PLANS_JSON)
    cases = input_cases(input_dir, dataset_json)[part_id::num_parts]
    check_inputs(cases, input_dir, plans_path, check_processes)
    return cases
