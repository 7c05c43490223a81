"""Experiment planning: fingerprint, target spacing, topology, patch/batch size, plans files.

``Planner`` (``planning.base``) is the public base class of a planner of one's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nnunet_core.runtime.lazy_names import lazy_getattr

if TYPE_CHECKING:
    from nnunet_core.planning.base import Planner

__all__ = ["Planner"]

__getattr__ = lazy_getattr(__name__, {"Planner": "nnunet_core.planning.base"})
