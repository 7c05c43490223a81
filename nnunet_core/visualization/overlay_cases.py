"""The cases ``plot-overlay-pngs`` draws: a raw dataset's training cases, or a preprocessed
configuration's cases (upstream's two modes), one ``<case>.png`` each.

Each source gives picklable tasks ``(case_id, args)`` for ``runtime.parallel.map_cases`` and a
module-level function that draws one case from them. Everything a user can get wrong (the
channel, missing files, an unpreprocessed configuration) is checked before the first case is
drawn and is one line naming the file or flag.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from nnunet_core.dataset.discovery import training_cases
from nnunet_core.errors import ConfigurationError, DatasetError
from nnunet_core.io.blosc2_store import open_array, open_case
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.io.plans import Plans, load_plans
from nnunet_core.io.readers import reader_by_name, reader_for_dataset
from nnunet_core.layout.preprocessed import CASE_DATA_SUFFIX, CASE_SEG_SUFFIX, plans_file
from nnunet_core.layout.raw import IMAGES_TR, dataset_json_file
from nnunet_core.visualization.overlay import overlay_rgb, select_slice, write_png

PNG_ENDING = ".png"
Task = tuple[str, tuple[Any, ...]]


def png_path(output_dir: Path, case_id: str) -> Path:
    """Upstream's name: ``<output>/<case>.png``."""
    return Path(output_dir) / f"{case_id}{PNG_ENDING}"


def draw_slice(
    image: np.ndarray, seg: np.ndarray, output: str | Path, overlay_intensity: float
) -> int:
    """Draw the chosen slice of a 3-D ``image`` and ``seg`` (same shape) into ``output``; return
    the slice's index."""
    index = select_slice(seg)
    write_png(output, overlay_rgb(image[index], seg[index], overlay_intensity))
    return index


def _check_channel(channel: int, available: int, where: str) -> None:
    if not 0 <= channel < available:
        msg = f"-channel_idx {channel}: {where} has channels 0 to {available - 1}"
        raise ConfigurationError(msg)


def raw_tasks(
    raw_dir: Path, output_dir: Path, channel: int, overlay_intensity: float
) -> list[Task]:
    """A task per training case of ``imagesTr``/``labelsTr``, read with the dataset's reader."""
    json_path = dataset_json_file(raw_dir)
    dataset_json = load_dataset_json(json_path)
    cases = training_cases(raw_dir, dataset_json)
    if not cases:
        msg = f"{raw_dir}: no training cases in {IMAGES_TR}"
        raise DatasetError(msg)
    for case in cases:
        _check_channel(channel, len(case.images), f"case {case.identifier}")
        for path in (case.images[channel], case.label):
            if path is None or not path.is_file():
                msg = f"case {case.identifier}: {path or 'its label'} not found"
                raise DatasetError(msg)
    reader = reader_for_dataset(dataset_json.raw, str(json_path), cases[0].images[channel])
    return [
        (
            case.identifier,
            (
                str(case.images[channel]),
                str(case.label),
                reader.name,
                str(png_path(output_dir, case.identifier)),
                overlay_intensity,
            ),
        )
        for case in cases
    ]


def draw_raw_case(
    image_file: str, label_file: str, reader_name: str, output: str, overlay_intensity: float
) -> int:
    """One raw case: the file's first channel (upstream's) under its label map."""
    reader = reader_by_name(reader_name)
    image = reader.read_images([image_file])[0][0]
    seg = reader.read_seg(label_file)[0][0]
    if image.shape != seg.shape:
        msg = f"{image_file} has shape {image.shape} but {label_file} has {seg.shape}"
        raise DatasetError(msg)
    return draw_slice(image, seg, output, overlay_intensity)


def default_configuration(plans: Plans) -> str:
    """Upstream's default: 3d_fullres when the plans have it, else 2d."""
    return "3d_fullres" if "3d_fullres" in plans else "2d"


def preprocessed_case_ids(folder: Path) -> list[str]:
    """Sorted ids of the cases stored in a data folder (one per ``<case>.b2nd``)."""
    return sorted(
        p.name[: -len(CASE_DATA_SUFFIX)]
        for p in folder.iterdir()
        if p.name.endswith(CASE_DATA_SUFFIX) and not p.name.endswith(CASE_SEG_SUFFIX)
    )


def preprocessed_tasks(
    preprocessed_dir: Path,
    plans_name: str,
    configuration: str | None,
    output_dir: Path,
    channel: int,
    overlay_intensity: float,
) -> list[Task]:
    """A task per case of the configuration's data folder (``-c`` default as upstream's)."""
    plans = load_plans(plans_file(preprocessed_dir, plans_name))
    configuration = configuration or default_configuration(plans)
    folder = preprocessed_dir / plans.data_identifier_of(configuration)
    ids = preprocessed_case_ids(folder) if folder.is_dir() else []
    if not ids:
        msg = (
            f"{folder}: no preprocessed cases of configuration {configuration} (run "
            f"`nnunet-core preprocess -c {configuration} -plans_name {plans_name}` first)"
        )
        raise ConfigurationError(msg)
    channels = open_array(folder / f"{ids[0]}{CASE_DATA_SUFFIX}").shape[0]
    _check_channel(channel, channels, f"{folder.name} (case {ids[0]})")
    return [
        (case_id, (str(folder), case_id, channel, str(png_path(output_dir, case_id)),
                   overlay_intensity))
        for case_id in ids
    ]  # fmt: skip


def draw_preprocessed_case(
    folder: str, case_id: str, channel: int, output: str, overlay_intensity: float
) -> int:
    """One preprocessed case: only its segmentation and the chosen slice of the channel are
    decompressed; preprocessing's -1 (outside the image) is drawn as background, as upstream."""
    data, seg_array, _ = open_case(folder, case_id)
    seg = np.asarray(seg_array[0])
    index = select_slice(seg)
    image = np.asarray(data[channel, index])
    labels = np.maximum(seg[index], 0)
    write_png(output, overlay_rgb(image, labels, overlay_intensity))
    return index
