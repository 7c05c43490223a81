"""TRANSITIONAL alias of ``tests.helpers.peer``, kept only for the files another branch moves
(tests/fault_campaign.py, tests/integration/test_gpu_check.py, the benchmark tests): they still
import ``peer_helpers`` by its old name.
Delete this file once they import ``tests.helpers.peer``."""

import sys
from pathlib import Path

# the repository root, for ``tests.helpers`` when a script (benchmarks/fault_campaign.py) imports
# this without pytest's pythonpath
sys.path.append(str(Path(__file__).resolve().parents[1]))

from tests.helpers.peer import *  # noqa: E402, F403
