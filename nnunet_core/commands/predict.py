"""Predict raw images with a trained model: ``nnunet-core predict -i DIR -o DIR -d D -c CONFIG``.

Upstream's ``nnUNetv2_predict``: images named ``CASE_XXXX{ending}`` in ``-i`` are preprocessed as
in training, the logits of the folds ``-f`` (default 0-4) are averaged with mirroring test-time
augmentation (``--disable_tta`` turns it off) and the segmentations are written to ``-o`` with the
input's geometry; ``--save_probabilities`` adds ``{case}.npz`` + ``{case}.json``. The model comes
from ``$nnUNet_results/D/<tr>__<p>__<c>/``, or from ``-m MODEL_FOLDER`` (upstream's
``nnUNetv2_predict_from_modelfolder``). Test-time mirroring uses the axes the trainer stored
(``inference_allowed_mirroring_axes``): none for a ``NoMirroring`` trainer. A model of a user's
trainer rebuilds its network from the code it carries, which runs only with ``--trust-model-code``.

A cascade stage (3d_cascade_fullres) reads the previous stage's segmentations from
``-prev_stage_predictions DIR`` (``<case><file ending>``, as its prediction wrote them). Without
it, the previous stage is predicted first into ``-o/prediction_<stage>`` from the sibling model
folder ``<trainer>__<plans>__<stage>`` with the same flags; upstream refuses instead.

``--gpu-slot`` (the workflow's prediction jobs) takes a whole GPU through train's slot locks
(``cluster.gpu_slots``) before CUDA starts, so that a prediction never lands on a fold's GPU.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from nnunet_core.commands.common import add_output_folder_flags, add_root_flags, dataset_from_args
from nnunet_core.errors import ConfigurationError
from nnunet_core.extension.consent import TRUST_FLAG
from nnunet_core.io.atomic import write_json
from nnunet_core.io.prediction_output import check_output_folder as check_output_place
from nnunet_core.io.prediction_output import mark_prediction_folder
from nnunet_core.layout.preprocessed import DEFAULT_PLANS_NAME
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.results import CHECKPOINT_FINAL as FINAL
from nnunet_core.layout.results import DEFAULT_TRAINER, PLANS_JSON, parse_fold, trained_model_dir
from nnunet_core.layout.roots import results_dataset_dir
from nnunet_core.runtime.devices import resolve_device as resolve_torch_device

if TYPE_CHECKING:  # torch loads only once the flags, roots and -o are checked (one-line errors)
    from nnunet_core.dataset.discovery import RawCase
    from nnunet_core.inference.model_folder import LoadedModel
    from nnunet_core.inference.predictor import PredictionSettings

ARGS_JSON = "predict_from_raw_data_args.json"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_io_flags(parser)
    parser.add_argument("-d", "--dataset", help="dataset id (900) or name (Dataset900_Synth)")
    parser.add_argument("-c", dest="configuration", help="e.g. 3d_fullres (with -d)")
    parser.add_argument(
        "-m",
        dest="model_folder",
        help="a trained model folder instead of -d/-c/-p/-tr (nnUNetv2_predict_from_modelfolder)",
    )
    parser.add_argument("-p", dest="plans", default=DEFAULT_PLANS_NAME, help="plans name")
    parser.add_argument("-tr", dest="trainer", default=DEFAULT_TRAINER, help="trainer name")
    add_prediction_flags(parser)
    add_root_flags(parser)


def add_io_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", dest="input", required=True, help="folder with CASE_XXXX images")
    add_output_folder_flags(parser, "folder for the predictions")


def add_prediction_flags(parser: argparse.ArgumentParser) -> None:
    """Everything after the model's name (also predict-from-modelfolder's flags)."""
    parser.add_argument(
        "-f", dest="folds", nargs="+", default=["0", "1", "2", "3", "4"], help="folds or 'all'"
    )
    parser.add_argument("-chk", dest="checkpoint", default=FINAL, help="checkpoint file name")
    parser.add_argument(
        "--save_probabilities", action="store_true", help="also write {case}.npz and {case}.json"
    )
    parser.add_argument(
        "--disable_tta", action="store_true", help="no mirroring (about 8x faster in 3D)"
    )
    parser.add_argument(
        "-step_size", type=float, default=0.5, help="tile step as a fraction of the patch (0.5)"
    )
    parser.add_argument(
        "-device",
        choices=("auto", "cuda", "cpu", "mps"),
        help="auto (default): cuda if available, else cpu",
    )
    parser.add_argument("-npp", type=int, default=3, help="preprocessing processes (3; 0 = inline)")
    parser.add_argument("-nps", type=int, default=3, help="export processes (3; 0 = inline)")
    parser.add_argument(
        "--continue_prediction", "--c", action="store_true", help="skip cases already predicted"
    )
    parser.add_argument(
        "-prev_stage_predictions",
        "--prev_stage_predictions",
        "--prev-stage-predictions",
        dest="prev_stage_predictions",
        metavar="DIR",
        help="a cascade stage's input: the previous stage's predictions (<case><file ending>); "
        "without it the previous stage is predicted first into -o/prediction_<stage>",
    )
    parser.add_argument("-num_parts", type=int, default=1, help="split the cases into N parts")
    parser.add_argument("-part_id", type=int, default=0, help="which part this process predicts")
    parser.add_argument("--disable_progress_bar", action="store_true", help="no progress bar")
    parser.add_argument(
        "--gpu-slot",
        action="store_true",
        help="take a free GPU through train's slot locks first (waiting while folds hold every "
        "GPU; an exported CUDA_VISIBLE_DEVICES is the pool); the workflow's jobs pass it",
    )
    parser.add_argument("--gpu-lock-dir", help="with --gpu-slot: the lock folder, as train's")
    parser.add_argument(
        TRUST_FLAG,
        dest="trust_model_code",
        action="store_true",
        help="run the trainer code a model folder carries (trainer_source/*.py of a user's "
        "trainer; its file and sha256 are printed first); without it such a model is refused",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="one line per case instead of a progress bar"
    )
    parser.add_argument(
        "--fp16_accumulation",
        action="store_true",
        help="sum the tiles in float16 as upstream nnU-Net does: its numbers exactly (the "
        "default float32 sums are more accurate at tile corners)",
    )
    parser.add_argument(
        "--not_on_device",
        action="store_true",
        help="keep the case and the sliding-window sums on the CPU (the network still runs on "
        "-device): for a case too large for the device's memory. Without it they start on the "
        "device and move to the CPU by themselves when it runs out of memory",
    )


def resolve_device(name: str | None) -> str:
    """``-device`` as a device type; the rules are the train command's (one place)."""
    return resolve_torch_device(name).type


def check_flags(args: argparse.Namespace) -> None:
    if args.model_folder is not None:
        given = [f for f, v in (("-d", args.dataset), ("-c", args.configuration)) if v]
        if given:
            msg = (
                f"-m names the model; {' and '.join(given)} would name another (give one or the "
                "other)"
            )
            raise ConfigurationError(msg)
    elif not (args.dataset and args.configuration):
        msg = "name the model with -d DATASET -c CONFIGURATION (or -m MODEL_FOLDER)"
        raise ConfigurationError(msg)
    if not 0 < args.step_size <= 1:
        msg = f"-step_size must be in (0, 1], got {args.step_size}"
        raise ConfigurationError(msg)
    if args.npp < 0 or args.nps < 0:
        msg = f"-npp and -nps must be >= 0, got {args.npp} and {args.nps}"
        raise ConfigurationError(msg)


def model_dir_from_args(args: argparse.Namespace) -> Path:
    """``-m``, else ``$nnUNet_results/D/<tr>__<p>__<c>``."""
    if args.model_folder is not None:
        return Path(args.model_folder)
    roots, name = dataset_from_args(args)
    return trained_model_dir(
        results_dataset_dir(roots, name), args.configuration, args.plans, args.trainer
    )


def check_output_folder(output: Path) -> None:
    """``-o`` must be a folder or creatable as one (checked before anything is loaded)."""
    if output.exists() and not output.is_dir():
        msg = f"-o {output}: exists and is not a folder"
        raise ConfigurationError(msg)
    parent = next((p for p in output.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        msg = f"-o {output}: {parent} is a file, not a folder"
        raise ConfigurationError(msg)
    check_output_place(output)  # never into a raw dataset (its images or ground truth)


def run(args: argparse.Namespace) -> int:
    check_flags(args)
    output = Path(args.output)
    check_output_folder(output)
    model_dir = model_dir_from_args(args)
    folds = [parse_fold(f) for f in args.folds]
    if getattr(args, "gpu_slot", False):  # a whole GPU; a cascade's previous stage keeps it
        from nnunet_core.cluster.gpu_slots import take_slots_for

        take_slots_for(args.device, 1, args.gpu_lock_dir, folds_per_gpu=1)
    from nnunet_core.inference.model_folder import load_trained_model
    from nnunet_core.inference.predictor import predict_cases, prepare_inputs

    cases = prepare_inputs(
        model_dir, args.input, output, folds, args.checkpoint, args.num_parts, args.part_id
    )
    # files of a folder that is no prediction folder are replaced only with --overwrite
    check_output_place(
        output,
        [case.identifier for case in cases],
        (ARGS_JSON, DATASET_JSON, PLANS_JSON),
        getattr(args, "overwrite", False),
    )
    # the model first: a broken checkpoint leaves -o as it was (no folder, no args json)
    model = load_trained_model(
        model_dir, folds, args.checkpoint, trust_model_code=args.trust_model_code
    )
    cases, previous = cascade_cases(args, model, cases, output)
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"-o {output}: cannot create the folder ({exc.strerror or exc})"
        raise ConfigurationError(msg) from None
    record = {k: v for k, v in vars(args).items() if not k.startswith("_")}
    record["prev_stage_predictions"] = None if previous is None else str(previous)
    write_json(output / ARGS_JSON, {**record, "model_dir": str(model_dir)})
    mark_prediction_folder(output, "predict")
    written = predict_cases(model, cases, output, settings_from_args(args))
    print(f"wrote {len(written)} prediction(s) to {output}")
    return 0


def settings_from_args(args: argparse.Namespace) -> PredictionSettings:
    from nnunet_core.inference.predictor import PredictionSettings

    return PredictionSettings(
        step_size=args.step_size,
        use_mirroring=not args.disable_tta,
        save_probabilities=args.save_probabilities,
        device=resolve_device(args.device),
        num_processes_preprocessing=args.npp,
        num_processes_export=args.nps,
        overwrite=not args.continue_prediction,
        progress=False if args.disable_progress_bar or args.verbose else None,
        fp16_accumulation=args.fp16_accumulation,
        on_device=not args.not_on_device,
    )


def cascade_cases(
    args: argparse.Namespace, model: LoadedModel, cases: list[RawCase], output: Path
) -> tuple[list[RawCase], Path | None]:
    """A cascade stage's cases with their previous-stage files (predicted first when
    ``-prev_stage_predictions`` is not given) and their folder; other models' cases as they
    are."""
    from nnunet_core.inference.cascade import with_previous_stage

    folder = args.prev_stage_predictions
    if model.previous_stage is None:
        if folder is not None:
            msg = (
                f"-prev_stage_predictions: {model.configuration_name} is not a cascade stage "
                "(only a configuration with a previous_stage reads one)"
            )
            raise ConfigurationError(msg)
        return cases, None
    if folder is None:
        folder = predict_previous_stage(args, model, output)
    return with_previous_stage(cases, folder, model.dataset_json.file_ending), Path(folder)


def predict_previous_stage(args: argparse.Namespace, model: LoadedModel, output: Path) -> Path:
    """Predict the previous stage into ``output/prediction_<stage>`` with the same folds,
    checkpoint and settings (segmentations only). Upstream's predictor refuses a cascade stage
    without ``-prev_stage_predictions``; this runs the first of the two commands for the user."""
    from nnunet_core.inference.cascade import PREVIOUS_STAGE_FOLDER

    stage = model.previous_stage
    assert stage is not None
    model_dir = model.sibling(stage)
    if not model_dir.is_dir():
        msg = (
            f"{model.configuration_name} is a cascade stage: its previous stage {stage} has no "
            f"model folder {model_dir}; give its predictions with -prev_stage_predictions DIR"
        )
        raise ConfigurationError(msg)
    folder = output / PREVIOUS_STAGE_FOLDER.format(stage=stage)
    print(
        f"{model.configuration_name} is a cascade stage: predicting its previous stage {stage} "
        f"first into {folder} (-prev_stage_predictions DIR reuses existing predictions)",
        flush=True,
    )
    previous = argparse.Namespace(**vars(args))
    previous.model_folder, previous.dataset, previous.configuration = str(model_dir), None, None
    previous.output, previous.prev_stage_predictions = str(folder), None
    previous.save_probabilities = False
    if run(previous) != 0:
        msg = f"predicting the previous stage {stage} into {folder} failed"
        raise ConfigurationError(msg)
    return folder
