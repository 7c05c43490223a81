"""Pictures of the predicted cases: one overlay slice per case, and a montage of them all, so a
reader sees at a glance which predictions missed (an empty picture) or spilled over.

The slice and the colours are those of ``plot-overlay-pngs`` (``visualization.overlay``): a
class keeps its colour in every picture. The montage draws with Pillow, which matplotlib (a
dependency) requires and itself reads PNGs with.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from nnunet_core.errors import DatasetError
from nnunet_core.io.atomic import atomic_path
from nnunet_core.io.images import read_images, read_seg
from nnunet_core.io.readers import ImageReader, reader_by_name
from nnunet_core.layout.new_scans import QC_FOLDER
from nnunet_core.visualization.overlay import (
    DEFAULT_OVERLAY_INTENSITY,
    overlay_rgb,
    select_slice,
    write_png,
)

MAX_TILES = 100
NAME_HEIGHT = 14  # pixels of the case name under each tile (Pillow's default font: 11)
GAP = 2
BACKGROUND = (40, 40, 40)
TEXT = (255, 255, 255)


def case_slice(segmentation: np.ndarray) -> int:
    """The slice with the most foreground (``select_slice``); the middle one when there is
    none, the likeliest to show the organ the model missed."""
    if not np.any(segmentation > 0):
        return segmentation.shape[0] // 2
    return select_slice(segmentation)


def write_case_png(
    image_file: Path,
    segmentation_file: Path,
    png: Path,
    reader: ImageReader | str | None = None,
    overlay_intensity: float = DEFAULT_OVERLAY_INTENSITY,
) -> Path:
    """Draw a case's first channel (``image_file``) under its predicted labels into ``png``.

    ``reader``: the plans' reader (an instance, or its name, which pickles for a worker); None
    picks one by the files' ending as ``io.images`` does."""
    reader = reader_by_name(reader) if isinstance(reader, str) else reader
    image = read_images([image_file], reader)[0][0]
    segmentation = read_seg(segmentation_file, reader)[0][0]
    if image.shape != segmentation.shape:
        msg = (
            f"{image_file} has shape {image.shape} but {segmentation_file} has {segmentation.shape}"
        )
        raise DatasetError(msg)
    index = case_slice(segmentation)
    return write_png(png, overlay_rgb(image[index], segmentation[index], overlay_intensity))


def _read_rgb(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as picture:
        return np.asarray(picture.convert("RGB"))


def write_montage(pngs: Sequence[Path], destination: Path, columns: int = 6) -> Path:
    """Tile the per-case pictures (sorted by case name, each under its name, padded to the
    largest) into one PNG, written atomically. Past ``MAX_TILES`` cases only the first ones by
    name are shown, and a line at the top says so; the per-case pictures have them all."""
    from PIL import Image, ImageDraw

    if not pngs or columns < 1:
        msg = f"a montage needs a picture and a column, got {len(pngs)} and {columns}"
        raise ValueError(msg)
    ordered = sorted((Path(p) for p in pngs), key=lambda p: p.stem)
    shown = ordered[:MAX_TILES]
    tiles = [_read_rgb(p) for p in shown]
    height = max(t.shape[0] for t in tiles) + NAME_HEIGHT
    width = max(t.shape[1] for t in tiles)
    columns = min(columns, len(tiles))
    rows = -(-len(tiles) // columns)
    caption = NAME_HEIGHT + GAP if len(ordered) > len(shown) else 0
    canvas = Image.new(
        "RGB",
        (columns * (width + GAP) - GAP, caption + rows * (height + GAP) - GAP),
        BACKGROUND,
    )
    draw = ImageDraw.Draw(canvas)
    if caption:
        note = f"first {len(shown)} of {len(ordered)} cases by name ({QC_FOLDER}/ has every case)"
        draw.text((GAP, 1), note, fill=TEXT)
    for number, (path, tile) in enumerate(zip(shown, tiles, strict=True)):
        left = (number % columns) * (width + GAP)
        top = caption + (number // columns) * (height + GAP)
        canvas.paste(Image.fromarray(tile), (left, top))
        draw.text((left + 1, top + height - NAME_HEIGHT + 1), path.stem, fill=TEXT)
    destination = Path(destination)
    with atomic_path(destination, suffix=".png", fsync=False) as tmp:
        canvas.save(tmp, format="PNG")
    return destination
