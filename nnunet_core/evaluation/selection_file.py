"""``inference_information.json`` read back and checked: the keys its readers use have the types
the selection writes, else one line naming the file, the key and what it holds.

The report, the paper tables and the workflow's prediction rules read it; a results tree may come
from elsewhere (upstream's file, an unpacked archive), so each key is checked where present. The
workflow needs the winner's configurations and postprocessing file: ``needs_winner`` makes them
required.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema

from nnunet_core.errors import DatasetError, NnunetCoreError
from nnunet_core.io.json_input import read_json_object
from nnunet_core.layout.results import INFERENCE_INFORMATION_JSON

WHAT = f"selection record ({INFERENCE_INFORMATION_JSON})"
_STRING = {"type": "string"}
_SCORE = {"type": ["number", "null"]}
_OBJECTS = {"type": "array", "items": {"type": "object"}}
_MODEL = {
    "type": "object",
    "required": ["configuration"],
    "properties": {"configuration": _STRING, "trainer": _STRING, "plans_identifier": _STRING},
}
_BEST = {
    "type": "object",
    "properties": {
        "identifier": _STRING,
        "postprocessing_file": _STRING,
        "some_plans_file": _STRING,
        "result_on_crossval_pre_pp": _SCORE,
        "result_on_crossval_post_pp": _SCORE,
        "selected_model_or_models": {"type": "array", "minItems": 1, "items": _MODEL},
    },
}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "winner": _STRING,
        "folds": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "ensembling_allowed": {"type": "boolean"},
        "all_results": {"type": "object", "additionalProperties": _SCORE},
        "candidates": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["identifier"],
                "properties": {
                    "identifier": _STRING,
                    "kind": _STRING,
                    "source": _STRING,
                    "members": {"type": "array", "items": _STRING},
                    "foreground_mean_dice": _SCORE,
                    "mean_dice": {"type": "object"},
                },
            },
        },
        "best_model_or_ensemble": _BEST,
        "postprocessing": {
            "type": "object",
            "properties": {
                "steps": _OBJECTS,
                "steps_tried": _OBJECTS,
                "mean_dice_before": {"type": "object"},
                "mean_dice_after": {"type": "object"},
            },
        },
    },
}
_WINNER = {
    "required": ["best_model_or_ensemble"],
    "properties": {
        "best_model_or_ensemble": {"required": ["selected_model_or_models", "postprocessing_file"]}
    },
}


def _where(error: jsonschema.ValidationError) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)


def check_inference_information(
    content: dict[str, Any],
    path: Path,
    error: type[NnunetCoreError] = DatasetError,
    needs_winner: bool = False,
) -> dict[str, Any]:
    """``content`` if its keys hold what the selection writes, else ``error`` naming the key."""
    schema = {"allOf": [SCHEMA, _WINNER]} if needs_winner else SCHEMA
    problem = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(content)
    )
    if problem is not None:
        key = _where(problem).lstrip(".") or "the top level"
        text = problem.message if len(problem.message) <= 200 else problem.message[:200] + "..."
        msg = f"{path}: {key}: {text} (written by `nnunet-core find-best-config`)"
        raise error(msg)
    return content


def read_inference_information(
    path: str | Path, error: type[NnunetCoreError] = DatasetError, needs_winner: bool = False
) -> dict[str, Any]:
    """The checked content of the ``inference_information.json`` at ``path``."""
    path = Path(path)
    content = read_json_object(path, WHAT, error)
    return check_inference_information(content, path, error, needs_winner)
