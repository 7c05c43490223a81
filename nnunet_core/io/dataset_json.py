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


def _is_int(value: Any) -> bool:
    """A JSON integer (``true`` is an int to Python, ``1.0`` and ``"1"`` are not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _describe(value: Any) -> str:
    kind = {str: "a string", float: "a float", bool: "a boolean"}.get(type(value))
    return f"{value!r} ({kind})" if kind else repr(value)


def _label_value(name: str, value: Any, source: str) -> tuple[int, ...]:
    """One ``labels`` entry as a tuple: an int label, or a non-empty list of ints (a region)."""
    if _is_int(value) and value >= 0:
        return (value,)
    if isinstance(value, (list, tuple)) and value and all(_is_int(v) and v >= 0 for v in value):
        return tuple(value)
    got = repr(list(value)) if isinstance(value, (list, tuple)) else _describe(value)
    msg = (
        f"{source}: labels[{name!r}] must be a label value (an int >= 0) or, for a region, a "
        f"non-empty list of them; got {got}"
    )
    raise DatasetError(msg)


def _check_unique(labels: dict[str, tuple[int, ...]], has_regions: bool, source: str) -> None:
    """Two labels with one value (or two identical regions) are a mistake: a segmentation can
    only say one of them."""
    seen: dict[frozenset[int], str] = {}
    for name, value in labels.items():
        if name == IGNORE_KEY:
            continue
        key = frozenset(value)
        if key in seen:
            first = f"labels[{seen[key]!r}] and labels[{name!r}]"
            if has_regions:
                msg = f"{source}: {first} are the same region {sorted(key)}"
            else:
                msg = f"{source}: {first} have the same value {value[0]}"
            raise DatasetError(f"{msg}; each needs its own")
        seen[key] = name


def _regions_class_order(
    order: Any, labels: dict[str, tuple[int, ...]], has_regions: bool, source: str
) -> tuple[int, ...] | None:
    """``regions_class_order``: only with regions, one int label per region."""
    if order is None:
        if has_regions:
            msg = f"{source}: region-based labels need 'regions_class_order'"
            raise DatasetError(msg)
        return None
    if not has_regions:
        msg = (
            f"{source}: 'regions_class_order' is given but no label is a region (a list of "
            "several label values); remove it or declare the regions in 'labels'"
        )
        raise DatasetError(msg)
    if not isinstance(order, (list, tuple)) or not all(_is_int(v) and v >= 0 for v in order):
        msg = f"{source}: 'regions_class_order' must be a list of label values, got {order!r}"
        raise DatasetError(msg)
    regions = [k for k in labels if k not in ("background", IGNORE_KEY)]
    if len(order) != len(regions):
        msg = (
            f"{source}: 'regions_class_order' needs one entry per region (background excluded): "
            f"{len(regions)} region(s), got {len(order)} entries"
        )
        raise DatasetError(msg)
    return tuple(order)


def parse_labels(dataset_json: dict[str, Any], source: str = "dataset.json") -> LabelSpec:
    """Parse ``labels`` (+ ``regions_class_order``) and apply upstream's ignore-label rules.

    Stricter than upstream (which calls ``int()`` on whatever it finds): a label value is a JSON
    int, so ``"1"`` and ``1.5`` are errors instead of label 1, two labels may not share a value,
    and ``regions_class_order`` without regions is refused instead of ignored.
    """
    raw_labels = dataset_json["labels"]
    if not isinstance(raw_labels, dict) or not raw_labels:
        msg = f"{source}: 'labels' must be a non-empty mapping of name -> label"
        raise DatasetError(msg)
    labels = {str(k): _label_value(str(k), v, source) for k, v in raw_labels.items()}
    has_regions = any(len(v) > 1 for k, v in labels.items() if k != IGNORE_KEY)
    all_labels = sorted({x for k, v in labels.items() if k != IGNORE_KEY for x in v})
    if labels.get("background") != (0,) and 0 not in all_labels:
        msg = f"{source}: 'labels' must contain background with value 0"
        raise DatasetError(msg)
    _check_unique(labels, has_regions, source)
    ignore_label = None
    if IGNORE_KEY in labels:
        value = raw_labels[IGNORE_KEY]
        if not _is_int(value):
            msg = f"{source}: the ignore label must be a single int, got {value!r}"
            raise DatasetError(msg)
        if value != max(all_labels) + 1:
            msg = (
                f"{source}: the ignore label must be max(labels)+1 = {max(all_labels) + 1}, "
                f"got {value}"
            )
            raise DatasetError(msg)
        ignore_label = value
    order = _regions_class_order(
        dataset_json.get("regions_class_order"), labels, has_regions, source
    )
    every_label = tuple(all_labels + ([ignore_label] if ignore_label is not None else []))
    return LabelSpec(
        labels=labels,
        regions_class_order=order,
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
    # imported here: the readers pull in SimpleITK/nibabel, which parsing alone does not need
    from nnunet_core.io.readers.registry import check_reader_key

    check_reader_key(content, source)
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
