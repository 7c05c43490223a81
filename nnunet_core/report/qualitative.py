"""The report's qualitative examples: the best, median and worst case by Dice, each a picture of
its slice under the reference and under the predicted labels (``qualitative/<rank>_<case>.png``).

The cases are the test set's (its ``summary.json``: the selected model with its postprocessing)
where the test set has labels, else the selected model's cross-validation cases (its
postprocessed cross-validation summary where postprocessing was decided, else the plain one);
the page says which. The images are the raw dataset's (``imagesTs`` or ``imagesTr``, first
channel), read with the dataset's reader. What is missing (no raw folder, an image or a
prediction gone) skips the page with a note, as every other part of the report.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from nnunet_core.dataset.discovery import test_cases, training_cases
from nnunet_core.errors import DatasetError, NnunetCoreError
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.io.readers import ImageReader, reader_for_dataset
from nnunet_core.layout.raw import IMAGES_TR, IMAGES_TS, dataset_json_file
from nnunet_core.layout.results import (
    POSTPROCESSED_FOLDER,
    REPORT_EXAMPLES_FOLDER,
    SUMMARY_JSON,
)
from nnunet_core.report.qualitative_cases import (
    ONLY,
    Example,
    pick_examples,
    png_name,
    scored_cases,
)
from nnunet_core.report.qualitative_figure import example_figure
from nnunet_core.visualization.comparison import Comparison, compare_files

QUALITATIVE_DIR = REPORT_EXAMPLES_FOLDER
TEST_SET, CROSS_VALIDATION = "test", "cross-validation"


@dataclass(frozen=True)
class ExampleSource:
    """Where the examples come from: the test set or the cross-validation, and its summary."""

    kind: str
    summary: Path

    @property
    def images_folder(self) -> str:
        return IMAGES_TS if self.kind == TEST_SET else IMAGES_TR

    @property
    def postprocessed(self) -> bool:
        return self.kind == TEST_SET or self.summary.parent.name == POSTPROCESSED_FOLDER


def example_source(test_summary: Path | None, cv_summary: Path | None) -> ExampleSource | None:
    """The test summary if given, else the selected model's postprocessed (else plain)
    cross-validation summary; None when there is neither."""
    if test_summary is not None:
        return ExampleSource(TEST_SET, test_summary)
    if cv_summary is None:
        return None
    postprocessed = cv_summary.parent / POSTPROCESSED_FOLDER / SUMMARY_JSON
    if postprocessed.is_file():
        return ExampleSource(CROSS_VALIDATION, postprocessed)
    return ExampleSource(CROSS_VALIDATION, cv_summary) if cv_summary.is_file() else None


def _image_files(raw_dir: Path, source: ExampleSource) -> tuple[dict[str, Path], ImageReader]:
    """Case id -> its first channel file in the source's images folder, and the reader."""
    json_path = dataset_json_file(raw_dir)
    dataset_json = load_dataset_json(json_path)
    find = test_cases if source.kind == TEST_SET else training_cases
    images = {c.identifier: c.images[0] for c in find(raw_dir, dataset_json) if c.images}
    if not images:
        msg = f"no images in {raw_dir / source.images_folder}"
        raise DatasetError(msg)
    reader = reader_for_dataset(dataset_json.raw, str(json_path), next(iter(images.values())))
    return images, reader


def _files_of(example: Example, images: dict[str, Path], images_dir: Path) -> list[Path]:
    """The example's image, reference and prediction files, each checked to exist."""
    case = example.case
    if case.case not in images:
        msg = f"case {case.case}: no image in {images_dir}"
        raise DatasetError(msg)
    files = [images[case.case], case.reference, case.prediction]
    for path in files:
        if not path.is_file():
            msg = f"case {case.case}: {path} not found"
            raise DatasetError(msg)
    return files


def read_examples(raw_dir: Path, source: ExampleSource) -> tuple[list[Example], list[Comparison]]:
    """The source's examples (``pick_examples``) and the picture of each."""
    file_ending = load_dataset_json(dataset_json_file(raw_dir)).file_ending
    examples = pick_examples(scored_cases(source.summary, file_ending))
    if not examples:
        msg = f"no case of {source.summary} has a Dice to rank by"
        raise DatasetError(msg)
    images, reader = _image_files(raw_dir, source)
    images_dir = raw_dir / source.images_folder
    return examples, [compare_files(*_files_of(e, images, images_dir), reader) for e in examples]


def write_examples(
    output_dir: Path,
    raw_dir: Path | None,
    source: ExampleSource | None,
    class_names: dict[str, str],
    notes: list[str],
) -> tuple[list[Path], list[str]]:
    """Draw the examples into ``output_dir/qualitative``; returns the files written and the
    page's section (both empty, and a line in ``notes``, when the examples cannot be drawn)."""
    (output_dir / QUALITATIVE_DIR).mkdir(parents=True, exist_ok=True)
    if source is None:
        notes.append("no test or cross-validation summary: qualitative examples skipped")
        return [], []
    if raw_dir is None or not dataset_json_file(raw_dir).is_file():
        where = f"no {dataset_json_file(raw_dir)}" if raw_dir is not None else "no raw folder"
        notes.append(f"{where} (--raw or nnUNet_raw): qualitative examples skipped")
        return [], []
    try:
        examples, comparisons = read_examples(raw_dir, source)
    except (NnunetCoreError, OSError, RuntimeError, ValueError) as exc:
        notes.append(f"qualitative examples skipped: {exc}")
        return [], []
    written = []
    for example, comparison in zip(examples, comparisons, strict=True):
        title = f"{_rank_words(example)} {source.kind} case: {example.case.case}, "
        title += f"foreground-mean Dice {example.case.dice:.4f}"
        target = output_dir / QUALITATIVE_DIR / png_name(example)
        written.append(
            example_figure(comparison, title, example.case.class_dice, class_names, target)
        )
    return written, section(examples, source, _link(source.summary, output_dir))


def _rank_words(example: Example) -> str:
    return "The only" if example.rank == ONLY else example.rank.capitalize()


def _which(examples: list[Example]) -> str:
    """``The best, median and worst``, ``The best and worst``, ``The only``."""
    ranks = [e.rank for e in examples]
    if ranks == [ONLY]:
        return "The only"
    return "The " + (", ".join(ranks[:-1]) + " and " + ranks[-1])


def _link(path: Path, page_dir: Path) -> str:
    """``path`` as the page links it: relative to the page's folder, so the page reads the same
    wherever the run's folder is (a rerun elsewhere writes the same bytes)."""
    try:
        return Path(os.path.relpath(path.resolve(), page_dir.resolve())).as_posix()
    except ValueError:  # another drive (Windows): no relative path
        return path.as_posix()


def section(examples: list[Example], source: ExampleSource, summary_link: str) -> list[str]:
    """``report.md``'s lines: what is shown and why, then each example under its heading;
    ``summary_link``: where the page finds the summary with every case."""
    scope = "with its postprocessing" if source.postprocessed else "before postprocessing"
    if source.kind == TEST_SET:
        what = f"test cases by foreground-mean Dice: the selected model {scope}"
    else:
        what = (
            "cross-validation cases by foreground-mean Dice, since there is no labelled test "
            f"set: the selected model {scope}, each case predicted by the fold that did not "
            "train on it"
        )
    lines = [
        "",
        "## Qualitative examples",
        "",
        f"{_which(examples)} {what} (equal Dice ranked by case name; every case's Dice is in "
        f"[{source.summary.name}]({summary_link})). Each picture "
        "shows one slice, the one with the most reference foreground as `plot-overlay-pngs` "
        "picks it, twice: left under the reference labels, right under the predicted ones, in "
        "`plot-overlay-pngs`'s colours (the legend names them).",
    ]
    for example in examples:
        path = f"{QUALITATIVE_DIR}/{png_name(example)}"
        words = _rank_words(example)
        lines += [
            "",
            f"### {words if example.rank != ONLY else 'The only case'}: {example.case.case} "
            f"(Dice {example.case.dice:.4f})",
            "",
            f"![{words} {source.kind} case {example.case.case}]({path})",
        ]
    return lines
