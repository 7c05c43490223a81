"""``postprocessing.json`` read back and checked: its steps, or one line naming the file and the
key that is wrong.

The file is ours or upstream's (``find-best-config`` writes it, a user passes it to
``apply-postprocessing -pp_pkl_file``, an export turns it into upstream's pickle). Two lists of
one length: ``postprocessing_fns``, each upstream's one function name, and
``postprocessing_kwargs``, each ``{"labels_or_regions": v}`` with ``v`` a label, a region (a list
of labels) or, for the step on all foreground, a list of labels or regions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nnunet_core.errors import DatasetError, NnunetCoreError
from nnunet_core.io.json_input import read_json_object, type_name

KEEP_LARGEST = "remove_all_but_largest_component_from_segmentation"  # upstream's function name
Step = dict[str, Any]  # {"function": KEEP_LARGEST, "labels_or_regions": int | list}
WHAT = "postprocessing file"
MAX_LABEL = 2**31 - 1  # a segmentation's labels fit an int32


def _is_label(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_LABEL


def _labels_problem(value: Any, depth: int = 0) -> str | None:
    """Why ``value`` is no label, region or list of them (None: it is one)."""
    if _is_label(value):
        return None
    if not isinstance(value, list) or depth >= 2:
        return f"{value!r} is {type_name(value)}, not a label (0-{MAX_LABEL}) or a list of labels"
    if not value:
        return "[] names no label"
    return next((p for item in value if (p := _labels_problem(item, depth + 1))), None)


def parse_postprocessing(
    content: dict[str, Any], path: Path, error: type[NnunetCoreError] = DatasetError
) -> list[Step]:
    """The steps of the ``postprocessing.json`` content ``content`` read from ``path``."""
    functions = content.get("postprocessing_fns")
    kwargs = content.get("postprocessing_kwargs")
    for key, value in (("postprocessing_fns", functions), ("postprocessing_kwargs", kwargs)):
        if not isinstance(value, list):
            msg = f"{path}: '{key}' must be a list, not {type_name(value)}"
            raise error(msg)
    if len(functions) != len(kwargs):
        msg = (
            f"{path}: 'postprocessing_fns' ({len(functions)}) and 'postprocessing_kwargs' "
            f"({len(kwargs)}) differ in length"
        )
        raise error(msg)
    steps = []
    for index, (function, arguments) in enumerate(zip(functions, kwargs, strict=True)):
        if function != KEEP_LARGEST:
            msg = (
                f"{path}: postprocessing_fns[{index}] is {function!r}; the only postprocessing "
                f"function is {KEEP_LARGEST!r}"
            )
            raise error(msg)
        if not isinstance(arguments, dict):
            msg = (
                f"{path}: postprocessing_kwargs[{index}] must be an object with "
                f"'labels_or_regions', not {type_name(arguments)}"
            )
            raise error(msg)
        if "labels_or_regions" not in arguments:
            msg = f"{path}: postprocessing_kwargs[{index}] has no 'labels_or_regions'"
            raise error(msg)
        problem = _labels_problem(arguments["labels_or_regions"])
        if problem is not None:
            msg = f"{path}: postprocessing_kwargs[{index}].labels_or_regions: {problem}"
            raise error(msg)
        steps.append({"function": function, "labels_or_regions": arguments["labels_or_regions"]})
    return steps


def read_postprocessing(
    path: str | Path, error: type[NnunetCoreError] = DatasetError
) -> tuple[dict[str, Any], list[Step]]:
    """The content of the ``postprocessing.json`` at ``path`` and its checked steps."""
    path = Path(path)
    content = read_json_object(path, WHAT, error)
    return content, parse_postprocessing(content, path, error)
