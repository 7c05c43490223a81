"""JSON files handed to us (a user's ``--pp-file``, a results tree from elsewhere), read with one
line naming the file and what is wrong, never a traceback.

A binary file, text that is not JSON, nesting deep enough to exhaust Python's recursion and a
file holding a list or a number where an object belongs are each refused here; what the keys
must hold is the caller's check (``type_name`` words the types alike).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from nnunet_core.errors import DatasetError, NnunetCoreError

_TYPE_NAMES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


def type_name(value: Any) -> str:
    """JSON's word for the type of ``value`` ('a list', 'null', ...)."""
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def read_json_object(
    path: str | os.PathLike, what: str, error: type[NnunetCoreError] = DatasetError
) -> dict[str, Any]:
    """The object in the JSON file ``path`` (``what`` names the file's role in the message);
    ``error`` (one line: the path, then the problem) otherwise."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        msg = f"{path}: cannot read the {what} ({exc.strerror or exc})"
        raise error(msg) from None
    try:
        content = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        msg = f"{path}: the {what} is not text (a binary file, or not UTF-8)"
        raise error(msg) from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        msg = f"{path}: the {what} is not valid JSON ({exc.msg}: {where})"
        raise error(msg) from None
    except RecursionError:
        msg = f"{path}: the {what} is nested too deeply to read"
        raise error(msg) from None
    if not isinstance(content, dict):
        msg = f"{path}: the {what} must hold a JSON object, not {type_name(content)}"
        raise error(msg)
    return content
