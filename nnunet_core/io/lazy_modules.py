"""Image libraries imported at their first use, not at import.

SimpleITK and nibabel take about 0.2 CPU s to import. Every Snakemake start imports the readers
(through the integrity check and the listing of training files), and so do commands that never
read an image; the test suite alone starts some thousand such processes. The stand-in returned
here imports the library when one of its attributes is first read, so a process that reads no
image never pays for it. It is a plain attribute forwarder, not ``importlib.util.LazyLoader``
(whose module is not safe when two threads touch it first at once before Python 3.12; the
export threads of a validation may), and it is never put into ``sys.modules``.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any


class DeferredModule(ModuleType):
    """Forwards attribute reads to the real module, imported (under the import lock) at the
    first read."""

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self.__name__), attribute)


def lazy_module(name: str) -> ModuleType:
    """A stand-in for module ``name`` that imports it at its first attribute read. A module that
    is not installed raises ImportError here, at once, as an import would."""
    if importlib.util.find_spec(name) is None:
        msg = f"No module named {name!r}"
        raise ImportError(msg, name=name)
    return DeferredModule(name)
