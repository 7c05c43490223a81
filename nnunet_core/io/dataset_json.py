"""``dataset.json``: channels, labels (with regions and the ignore label), numTraining, file
ending."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnunet_core.errors import DatasetError
from nnunet_core.io.atomic import read_json

REQUIRED_KEYS = ("channel_names", "labels", "numTraining", "file_ending")
IGNORE_KEY = "ignore"


@dataclass(frozen=True)
class LabelSpec:
    """Labels of a dataset as the method needs them.

    ``labels`` maps a name to an int label or, for region-based training, to a tuple of labels.
    """

    labels: dict[str, tuple[int, ...]]
    regions_class_order: tuple[int, ...] | None = None
    ignore_label: int | None = None
    has_regions: bool = False
    all_labels: tuple[int, ...] = field(default_factory=tuple)

    @property
    def foreground_labels(self) -> tuple[int, ...]:
        """Every declared label except background and the ignore label."""
        return tuple(v for v in self.all_labels if v != 0 and v != self.ignore_label)

    @property
    def foreground_regions(self) -> list[tuple[int, ...]]:
        """Regions (background excluded) in dictionary order, for region-based training."""
        return [v for k, v in self.labels.items() if k != "background" and k != IGNORE_KEY]

    @property
    def num_segmentation_heads(self) -> int:
        """Output channels of the network: regions, or labels incl. background."""
        if self.has_regions:
            return len(self.foreground_regions)
        return len(self.foreground_labels) + 1


def _as_tuple(value: Any) -> tuple[int, ...]:
    if isinstance(value, (list, tuple)):
        return tuple(int(v) for v in value)
    return (int(value),)


def parse_labels(dataset_json: dict[str, Any], source: str = "dataset.json") -> LabelSpec:
    """Parse ``labels`` (+ ``regions_class_order``) and apply upstream's ignore-label rules."""
    raw_labels = dataset_json["labels"]
    if not isinstance(raw_labels, dict) or not raw_labels:
        msg = f"{source}: 'labels' must be a non-empty mapping of name -> label"
        raise DatasetError(msg)
    try:
        labels = {str(k): _as_tuple(v) for k, v in raw_labels.items()}
    except (TypeError, ValueError):
        msg = f"{source}: 'labels' values must be ints or lists of ints, got {raw_labels!r}"
        raise DatasetError(msg) from None
    has_regions = any(len(v) > 1 for k, v in labels.items() if k != IGNORE_KEY)
    all_labels = sorted({x for k, v in labels.items() if k != IGNORE_KEY for x in v})
    if labels.get("background") != (0,) and 0 not in all_labels:
        msg = f"{source}: 'labels' must contain background with value 0"
        raise DatasetError(msg)
    ignore_label = None
    if IGNORE_KEY in labels:
        value = raw_labels[IGNORE_KEY]
        if not isinstance(value, int) or isinstance(value, bool):
            msg = f"{source}: the ignore label must be a single int, got {value!r}"
            raise DatasetError(msg)
        if value != max(all_labels) + 1:
            msg = (
                f"{source}: the ignore label must be max(labels)+1 = {max(all_labels) + 1}, "
                f"got {value}"
            )
            raise DatasetError(msg)
        ignore_label = value
    order = dataset_json.get("regions_class_order")
    if has_regions and order is None:
        msg = f"{source}: region-based labels need 'regions_class_order'"
        raise DatasetError(msg)
    if has_regions and len(order) != len(
        [k for k in labels if k not in ("background", IGNORE_KEY)]
    ):
        msg = f"{source}: 'regions_class_order' needs one entry per region (background excluded)"
        raise DatasetError(msg)
    every_label = tuple(all_labels + ([ignore_label] if ignore_label is not None else []))
    return LabelSpec(
        labels=labels,
        regions_class_order=tuple(int(x) for x in order) if order is not None else None,
        ignore_label=ignore_label,
        has_regions=has_regions,
        all_labels=every_label,
    )


@dataclass(frozen=True)
class DatasetJson:
    """The parsed ``dataset.json`` plus the raw dict (free-form keys are kept)."""

    channel_names: dict[str, str]
    label_spec: LabelSpec
    num_training: int
    file_ending: str
    raw: dict[str, Any]

    @property
    def num_channels(self) -> int:
        return len(self.channel_names)


def parse_dataset_json(content: dict[str, Any], source: str = "dataset.json") -> DatasetJson:
    """Validate the required keys and parse them; errors name the file and the key."""
    missing = [k for k in REQUIRED_KEYS if k not in content]
    if "channel_names" in missing and "modality" in content:
        missing.remove("channel_names")
        content = {**content, "channel_names": content["modality"]}
    if missing:
        msg = f"{source}: missing required key(s) {', '.join(missing)}"
        raise DatasetError(msg)
    channels = content["channel_names"]
    if not isinstance(channels, dict) or not channels:
        msg = f"{source}: 'channel_names' must be a non-empty mapping like {{'0': 'CT'}}"
        raise DatasetError(msg)
    expected = [str(i) for i in range(len(channels))]
    if sorted(channels, key=lambda k: int(k) if str(k).isdigit() else -1) != expected:
        msg = f"{source}: 'channel_names' keys must be 0..{len(channels) - 1}, got {list(channels)}"
        raise DatasetError(msg)
    num_training = content["numTraining"]
    if not isinstance(num_training, int) or isinstance(num_training, bool) or num_training < 0:
        msg = f"{source}: 'numTraining' must be a non-negative int, got {num_training!r}"
        raise DatasetError(msg)
    file_ending = content["file_ending"]
    if not isinstance(file_ending, str) or not file_ending.startswith("."):
        msg = f"{source}: 'file_ending' must look like '.nii.gz', got {file_ending!r}"
        raise DatasetError(msg)
    return DatasetJson(
        channel_names={str(k): str(v) for k, v in channels.items()},
        label_spec=parse_labels(content, source),
        num_training=num_training,
        file_ending=file_ending,
        raw=content,
    )


def load_dataset_json(path: str | Path) -> DatasetJson:
    """Read and parse a ``dataset.json``."""
    path = Path(path)
    if not path.is_file():
        msg = f"{path}: dataset.json not found"
        raise DatasetError(msg)
    try:
        content = read_json(path)
    except ValueError as exc:
        msg = f"{path}: not valid JSON ({exc})"
        raise DatasetError(msg) from None
    if not isinstance(content, dict):
        msg = f"{path}: must hold a JSON object"
        raise DatasetError(msg)
    return parse_dataset_json(content, str(path))
