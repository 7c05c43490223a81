"""The raw tree (upstream's): a dataset folder as a user hands it in.

<nnUNet_raw>/DatasetXXX_Name/dataset.json
    imagesTr/<case>_0000<ending> ...   one file per channel
    labelsTr/<case><ending>
    imagesTs/, labelsTs/               optional test set (labels optional too)
"""

from __future__ import annotations

import re
from pathlib import Path

DATASET_JSON = "dataset.json"
IMAGES_TR = "imagesTr"
LABELS_TR = "labelsTr"
IMAGES_TS = "imagesTs"
LABELS_TS = "labelsTs"
# The folders a training set lives in (their files decide whether verification is current).
TRAINING_FOLDERS = (IMAGES_TR, LABELS_TR)
TEST_FOLDERS = (IMAGES_TS, LABELS_TS)


def channel_suffix(channel: int) -> str:
    """``0`` -> ``_0000``: what follows the case id in an image file name."""
    return f"_{channel:04d}"


def channel_file_name(case_id: str, channel: int, file_ending: str) -> str:
    """``('la_003', 0, '.nii.gz')`` -> ``la_003_0000.nii.gz`` (one file per channel)."""
    return f"{case_id}{channel_suffix(channel)}{file_ending}"


def images_tr_dir(raw_dir: Path) -> Path:
    return raw_dir / IMAGES_TR


def labels_tr_dir(raw_dir: Path) -> Path:
    return raw_dir / LABELS_TR


def images_ts_dir(raw_dir: Path) -> Path:
    return raw_dir / IMAGES_TS


def labels_ts_dir(raw_dir: Path) -> Path:
    return raw_dir / LABELS_TS


def dataset_json_file(raw_dir: Path) -> Path:
    return raw_dir / DATASET_JSON


def channel_file_pattern(file_ending: str) -> re.Pattern[str]:
    """Matches ``<case>_<4 digits><file_ending>``; group 1 the case id, group 2 the channel."""
    return re.compile(r"^(.+)_(\d{4})" + re.escape(file_ending) + "$")
