"""Image readers/writers named and chosen as upstream's (``nnunetv2.imageio``)."""

from nnunet_core.io.readers.base import FileImage, ImageReader
from nnunet_core.io.readers.registry import (
    KNOWN_NAMES,
    READER_KEY,
    READERS,
    reader_by_name,
    reader_for_dataset,
    reader_for_plans,
    reader_for_properties,
    reader_name,
)

__all__ = [
    "KNOWN_NAMES",
    "READERS",
    "READER_KEY",
    "FileImage",
    "ImageReader",
    "reader_by_name",
    "reader_for_dataset",
    "reader_for_plans",
    "reader_for_properties",
    "reader_name",
]
