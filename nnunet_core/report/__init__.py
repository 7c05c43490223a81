"""The results report: figures, tables and a page a person reads instead of JSON files."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nnunet_core.report.build import build_report

__all__ = ["build_report"]


def __getattr__(name: str) -> Any:
    # The builder imports matplotlib (about 0.6 CPU s): loaded when it is asked for, so that a
    # command writing only tables (paper-table) does not pay for the figures.
    if name == "build_report":
        from nnunet_core.report.build import build_report

        return build_report
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
