"""TRANSITIONAL alias of ``tests.helpers.workflow``, kept only for the files another branch moves
(tests/fault_campaign.py, tests/integration/test_gpu_check.py, the benchmark tests): they still
import ``workflow_helpers`` by its old name.
Delete this file once they import ``tests.helpers.workflow``."""

import sys
from pathlib import Path

# the repository root, for ``tests.helpers`` when a script (benchmarks/fault_campaign.py) imports
# this without pytest's pythonpath
sys.path.append(str(Path(__file__).resolve().parents[1]))

from tests.helpers.workflow import *  # noqa: E402, F403
