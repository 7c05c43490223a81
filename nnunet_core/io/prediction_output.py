"""Where prediction commands may write: never into a raw dataset, never over files not theirs.

``predict -i rawcopy/imagesTr -o rawcopy/labelsTr`` once replaced the ground-truth labels
without a word. ``predict``, ``ensemble`` and ``apply-postprocessing`` therefore refuse, in one
line and before anything is written:

- an output folder that is a raw dataset folder (``dataset.json`` beside ``imagesTr`` or
  ``labelsTr``) or lies inside one's ``imagesTr``/``labelsTr``/``imagesTs``/``labelsTs``
  (always: no flag allows it);
- an existing folder that is not a prediction folder and holds a file the command would write
  (a case's segmentation, probabilities, ``dataset.json``, ...), unless ``--overwrite``.

A prediction folder is one that holds ``PREDICTION_MARKER`` (each of the three commands writes
it) or upstream's ``predict_from_raw_data_args.json`` (our predict writes it too).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.atomic import write_json
from nnunet_core.layout.raw import DATASET_JSON, IMAGES_TR, IMAGES_TS, LABELS_TR, LABELS_TS

RAW_SPLIT_FOLDERS = (IMAGES_TR, LABELS_TR, IMAGES_TS, LABELS_TS)
RAW_SPLITS_TEXT = "/".join(RAW_SPLIT_FOLDERS)
# Written into every output folder of predict, ensemble and apply-postprocessing.
PREDICTION_MARKER = "nnunet_core_predictions.json"
# upstream's predictor (and ours) records its arguments in every folder it predicts into
UPSTREAM_PREDICT_RECORD = "predict_from_raw_data_args.json"
OVERWRITE_HELP = (
    "replace files in an existing -o that is no prediction folder (one without "
    f"{PREDICTION_MARKER} or {UPSTREAM_PREDICT_RECORD}); a raw dataset's folders are refused "
    "even so"
)


def is_raw_dataset_folder(folder: Path) -> bool:
    """``dataset.json`` beside ``imagesTr`` or ``labelsTr``: an nnU-Net raw dataset."""
    return (folder / DATASET_JSON).is_file() and any(
        (folder / name).is_dir() for name in (IMAGES_TR, LABELS_TR)
    )


def raw_dataset_part(path: str | os.PathLike) -> Path | None:
    """The raw dataset folder ``path`` is, or whose split folder (``imagesTr``, ...) holds
    ``path`` (resolved through symlinks); None elsewhere."""
    resolved = Path(path).resolve()
    if is_raw_dataset_folder(resolved):
        return resolved
    for folder in (resolved, *resolved.parents):
        if folder.name in RAW_SPLIT_FOLDERS and (folder.parent / DATASET_JSON).is_file():
            return folder.parent
    return None


def is_prediction_folder(folder: Path) -> bool:
    return any((folder / name).is_file() for name in (PREDICTION_MARKER, UPSTREAM_PREDICT_RECORD))


def _written_by_command(name: str, cases: set[str], fixed: set[str]) -> bool:
    """``name`` is one of ``fixed`` or a case's file (``{case}.<anything>``)."""
    if name in fixed:
        return True
    dot = name.find(".")
    while dot > 0:
        if name[:dot] in cases:
            return True
        dot = name.find(".", dot + 1)
    return False


def check_output_folder(
    output: str | os.PathLike,
    cases: Iterable[str] = (),
    fixed_names: Iterable[str] = (),
    overwrite: bool = False,
    flag: str = "-o",
) -> None:
    """Refuse (one-line ConfigurationError naming ``output``) a raw dataset's folder, and an
    existing non-prediction folder holding a file the command would write, unless
    ``overwrite``. ``cases``: the case identifiers whose files it writes; ``fixed_names``: the
    other files it writes (``dataset.json``, ...)."""
    output = Path(output)
    dataset = raw_dataset_part(output)
    if dataset is not None:
        msg = (
            f"{flag} {output}: it is in the raw dataset {dataset} ({RAW_SPLITS_TEXT} hold the "
            "inputs and the ground truth); write the predictions elsewhere"
        )
        raise ConfigurationError(msg)
    if overwrite or not output.is_dir() or is_prediction_folder(output):
        return
    case_ids, fixed = set(cases), {*fixed_names, PREDICTION_MARKER}
    clashes = sorted(
        entry.name for entry in output.iterdir() if _written_by_command(entry.name, case_ids, fixed)
    )
    if clashes:
        more = f" and {len(clashes) - 1} more" if len(clashes) > 1 else ""
        msg = (
            f"{flag} {output}: it is no prediction folder (no {PREDICTION_MARKER} or "
            f"{UPSTREAM_PREDICT_RECORD}) and holds {clashes[0]}{more}, which this command would "
            "replace; choose another folder or pass --overwrite"
        )
        raise ConfigurationError(msg)


def mark_prediction_folder(output: str | os.PathLike, command: str) -> None:
    """Write the marker that makes ``output`` a prediction folder (a later run may replace its
    files)."""
    write_json(Path(output) / PREDICTION_MARKER, {"written_by": f"nnunet-core {command}"})
