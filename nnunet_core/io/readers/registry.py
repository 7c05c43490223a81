"""Which reader a dataset uses: ``overwrite_image_reader_writer``, else upstream's choice by ending.

Upstream tries its readers in a fixed order (natural 2-D images, SimpleITK, 3-D tiff, nibabel)
and takes the first whose endings include the dataset's ``file_ending``; given an example file it
skips readers that cannot read it (a 3-D ``.tif`` goes to Tiff3DIO). ``SimpleITKIOWithReorient``
is only chosen by name. An ending no reader claims goes to SimpleITKIO (upstream has no reader for
it; ITK reads e.g. ``.nhdr`` and ``.gipl.gz``). An unknown name is an error here (upstream warns and
falls back), since a misspelt reader would silently change the geometry of every result.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nnunet_core.errors import ConfigurationError, DatasetError
from nnunet_core.io.readers.base import ImageReader
from nnunet_core.io.readers.natural_io import NaturalImage2DIO, Tiff3DIO
from nnunet_core.io.readers.nibabel_io import NibabelIO, NibabelIOWithReorient
from nnunet_core.io.readers.sitk_io import SimpleITKIO, SimpleITKIOWithReorient

if TYPE_CHECKING:
    from nnunet_core.io.plans import Plans

READER_KEY = "overwrite_image_reader_writer"
# upstream's order of trying readers by file ending
BY_ENDING_ORDER: tuple[type[ImageReader], ...] = (
    NaturalImage2DIO,
    SimpleITKIO,
    Tiff3DIO,
    NibabelIO,
    NibabelIOWithReorient,
)
READERS: dict[str, type[ImageReader]] = {
    cls.name: cls for cls in (*BY_ENDING_ORDER, SimpleITKIOWithReorient)
}
KNOWN_NAMES = tuple(READERS)
DEFAULT_READER = SimpleITKIO.name


def supported_endings() -> tuple[str, ...]:
    return tuple(dict.fromkeys(e for cls in BY_ENDING_ORDER for e in cls.endings))


def reader_by_name(
    name: str, source: str = "plans", error: type[Exception] = ConfigurationError
) -> ImageReader:
    """The reader called ``name``; an unknown name is a one-line error naming ``source``."""
    cls = READERS.get(name)
    if cls is None:
        msg = f"{source}: unknown image reader/writer {name!r}; known: {', '.join(KNOWN_NAMES)}"
        raise error(msg)
    return cls()


def name_for_ending(file_ending: str, example_file: Path | None = None) -> str:
    """Upstream's choice for ``file_ending``: the first reader in order that claims it (and reads
    ``example_file`` when one is given)."""
    ending = file_ending.lower()
    claiming = [cls for cls in BY_ENDING_ORDER if ending in cls.endings]
    if not claiming:
        # upstream stops here; ITK reads many more formats (.nhdr, .gipl.gz), so we let it try
        return DEFAULT_READER
    if example_file is None or not Path(example_file).is_file():
        return claiming[0].name
    for cls in claiming:
        if cls().can_read(Path(example_file)):
            return cls.name
    return claiming[0].name  # none reads it: the first one reports why when it is used


def reader_name(
    dataset_json: dict[str, Any], source: str = "dataset.json", example_file: Path | None = None
) -> str:
    """The reader name a dataset uses (``None``/``'None'`` count as no key, as upstream)."""
    name = check_reader_key(dataset_json, source)
    if name is not None:
        return name
    return name_for_ending(str(dataset_json.get("file_ending", "")), example_file)


def check_reader_key(dataset_json: dict[str, Any], source: str = "dataset.json") -> str | None:
    """The ``overwrite_image_reader_writer`` name, None without one (``None``/``'None'`` count as
    no key, as upstream); an unknown name is a one-line DatasetError naming ``source`` and the
    key (parsing dataset.json calls this, so every command refuses it before any work)."""
    name = dataset_json.get(READER_KEY)
    if name is None or name == "None":
        return None
    if not isinstance(name, str) or name not in READERS:
        by_lower = {known.lower(): known for known in KNOWN_NAMES}
        close = difflib.get_close_matches(str(name).lower(), list(by_lower), 1)
        hint = f" (did you mean {by_lower[close[0]]}?)" if close else ""
        msg = f"{source}: unknown {READER_KEY} {name!r}{hint}; known: {', '.join(KNOWN_NAMES)}"
        raise DatasetError(msg)
    return name


def reader_for_dataset(
    dataset_json: dict[str, Any], source: str = "dataset.json", example_file: Path | None = None
) -> ImageReader:
    """The reader instance for a ``dataset.json`` content (see :func:`reader_name`)."""
    return READERS[reader_name(dataset_json, source, example_file)]()


def reader_for_plans(plans: Plans, source: str = "plans") -> ImageReader:
    """The reader the plans name (``image_reader_writer``); SimpleITKIO for plans without one."""
    return reader_by_name(plans.image_reader_writer or DEFAULT_READER, source)


def reader_for_properties(properties: dict[str, Any], file_name: str) -> ImageReader:
    """The writer that fits a case's properties (what a case read by that reader carries);
    properties without geometry (natural images, tiffs) go by the file name's ending."""
    if "nibabel_stuff" in properties:
        reorient = "reoriented_affine" in properties["nibabel_stuff"]
        return NibabelIOWithReorient() if reorient else NibabelIO()
    if "sitk_stuff" in properties:
        reorient = "original_orientation" in properties["sitk_stuff"]
        return SimpleITKIOWithReorient() if reorient else SimpleITKIO()
    name = file_name.lower()
    ending = max((e for e in supported_endings() if name.endswith(e)), key=len, default="")
    return READERS[name_for_ending(ending)]()
