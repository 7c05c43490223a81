"""Cascade inference: each case's previous-stage segmentation becomes extra input channels.

A cascade stage (``previous_stage`` in its configuration) reads, per case, the segmentation the
previous stage predicted: ``<DIR>/<case><file_ending>`` in the raw image's geometry. Upstream's
predictor hands that file to its preprocessor as the case's seg (``run_case(images, seg_file)``):
it is read with the dataset's reader, transposed, cropped to the image's nonzero bounding box
(-1 outside the nonzero mask where it is 0), resampled with the configuration's seg resampling
to its spacing, and its foreground labels are stacked one-hot onto the image channels. We reuse
the training preprocessor's seg path (``run_case`` with the file as the case's label) and the
training one-hot (``cascade_input``), so inference sees what training and validation saw.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nnunet_core.dataset.discovery import RawCase
from nnunet_core.errors import ConfigurationError, DatasetError
from nnunet_core.inference.cascade_input import cascade_input
from nnunet_core.io.dataset_json import DatasetJson
from nnunet_core.io.plans import Plans
from nnunet_core.preprocessing.preprocessor import run_case

PREVIOUS_STAGE_FOLDER = "prediction_{stage}"


def previous_stage_file(folder: Path, identifier: str, file_ending: str) -> Path:
    """Where the previous stage's prediction wrote ``identifier`` (upstream's naming)."""
    return folder / f"{identifier}{file_ending}"


def with_previous_stage(
    cases: Sequence[RawCase], folder: str | os.PathLike, file_ending: str
) -> list[RawCase]:
    """``cases`` carrying their previous-stage file as ``label`` (upstream passes it as the seg).

    A missing file is a one-line error naming the case and the folder, before anything is written.
    """
    folder = Path(folder)
    if not folder.is_dir():
        msg = f"-prev_stage_predictions {folder}: folder not found"
        raise ConfigurationError(msg)
    out = []
    for case in cases:
        path = previous_stage_file(folder, case.identifier, file_ending)
        if not path.is_file():
            msg = (
                f"case {case.identifier}: no previous-stage segmentation {path.name} in {folder} "
                "(predict the previous stage into that folder first)"
            )
            raise DatasetError(msg)
        out.append(dataclasses.replace(case, label=path))
    return out


def preprocess_case(
    case: RawCase, plans: Plans, configuration: str, dataset_json: DatasetJson
) -> tuple[np.ndarray, dict[str, Any]]:
    """The network input of one case and its properties (for the export).

    A case with a ``label`` is a cascade case (``with_previous_stage``): the previous stage's file
    is preprocessed like a training seg and stacked one-hot onto the image; the class locations
    sampled from it are dropped (only training samples patches).
    """
    if case.label is None:
        data, _, properties = run_case(case, plans, configuration, dataset_json)
        return data, properties
    try:
        data, seg, properties = run_case(case, plans, configuration, dataset_json)
    except DatasetError as exc:
        msg = f"{exc} (previous-stage segmentation {case.label})"
        raise DatasetError(msg) from None
    properties.pop("class_locations", None)
    return cascade_input(data, seg, dataset_json.label_spec, case.identifier), properties
