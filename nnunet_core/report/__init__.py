"""The results report: figures, tables and a page a person reads instead of JSON files."""

from nnunet_core.report.build import build_report

__all__ = ["build_report"]
