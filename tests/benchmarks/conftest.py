"""The benchmark tests import the package ``benchmarks`` from the repository root, as the scripts
run (``python -m benchmarks.<family>.<script>`` there): put the root on ``sys.path`` also for a
bare ``pytest`` started elsewhere (``python -m pytest`` from the root has it already)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
