"""The cascade's network input: the image channels, then the previous stage's segmentation.

A cascade stage (a configuration with ``previous_stage``) sees, besides the image, one channel per
foreground label of the previous stage's prediction: 1 where the prediction is that label, else 0,
in the image's dtype and in the order of the dataset's foreground labels (background and the
ignore label get no channel). Upstream builds it with ``convert_labelmap_to_one_hot`` stacked onto
the data at validation and inference, and with ``MoveSegAsOneHotToDataTransform`` in training
(the same values). The network is built for that many input channels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.dataset_json import LabelSpec
from nnunet_core.io.plans_configuration import Configuration


def num_input_channels(
    configuration: Configuration, image_channels: int, label_spec: LabelSpec
) -> int:
    """Image channels, plus one per foreground label for a cascade stage."""
    if configuration.is_cascade_stage:
        return image_channels + len(label_spec.foreground_labels)
    return image_channels


def one_hot_foreground(
    segmentation: np.ndarray, foreground_labels: Sequence[int], dtype: np.dtype | type
) -> np.ndarray:
    """``(len(foreground_labels), *shape)``: channel i is ``segmentation == label i``."""
    out = np.zeros((len(foreground_labels), *segmentation.shape), dtype=dtype)
    for channel, label in zip(out, foreground_labels, strict=True):
        channel[segmentation == label] = 1
    return out


def cascade_input(
    data: np.ndarray, previous_segmentation: np.ndarray, label_spec: LabelSpec, case_id: str = ""
) -> np.ndarray:
    """``(c + n_foreground, *spatial)`` in ``data``'s dtype; ``previous_segmentation`` is the
    previous stage's 3-D file (or ``(1, *spatial)``), already in ``data``'s geometry."""
    segmentation = np.asarray(previous_segmentation)
    if segmentation.ndim == data.ndim:
        segmentation = segmentation[0]
    if segmentation.shape != data.shape[1:]:
        where = f"case {case_id}: " if case_id else ""
        msg = (
            f"{where}previous stage's segmentation has shape {list(segmentation.shape)}, the "
            f"data {list(data.shape[1:])} (the previous stage predicted another geometry)"
        )
        raise ConfigurationError(msg)
    one_hot = one_hot_foreground(segmentation, label_spec.foreground_labels, data.dtype)
    return np.concatenate((data, one_hot), axis=0)
