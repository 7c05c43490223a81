"""Names a package exports without importing their modules until first use.

``nnunet_core`` and ``nnunet_core.training.trainer`` hand out torch-backed classes (``Trainer``,
...) while an import of the package itself stays light: a command such as ``nnunet-core verify``
never pays for torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, defined_in: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package``: each name of ``defined_in`` (name ->
    module defining it) is imported from its module when first asked for."""

    def __getattr__(name: str) -> Any:
        if name not in defined_in:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        return getattr(importlib.import_module(defined_in[name]), name)

    return __getattr__
