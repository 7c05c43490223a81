"""Settings as flat ``key: text`` pairs, the form trackers store parameters in."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

MAX_VALUE = 500  # MLflow stores up to 6000 characters a value; a hash or a path is far less


def flat_settings(settings: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested mappings become dotted keys; lists and other values become JSON text."""
    flat: dict[str, str] = {}
    for key, value in settings.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flat_settings(value, f"{name}."))
        else:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            flat[name] = text[:MAX_VALUE]
    return flat
