"""Per-test CPU seconds, for finding where the suite's time goes (opt-in: NNUNET_CPU_LOG=FILE).

Wall durations (``--durations``) depend on what else the machine runs; CPU seconds of the test
process and of the subprocesses it waited for (Snakemake, training jobs) do not, so a run on a
busy machine still tells which tests cost the most. One tab-separated line per test phase:
nodeid, phase, CPU seconds, wall seconds, when it ended (Unix time: which tests ran last).
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Generator
from pathlib import Path

import pytest


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    yield from _logged(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    yield from _logged(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    yield from _logged(item, "teardown")


def _logged(item: pytest.Item, phase: str) -> Generator[None, None, None]:
    log = os.environ.get("NNUNET_CPU_LOG")
    cpu, wall = _cpu_seconds(), time.monotonic()
    yield
    if log:
        spent = f"{_cpu_seconds() - cpu:.1f}\t{time.monotonic() - wall:.1f}\t{time.time():.0f}"
        line = f"{item.nodeid}\t{phase}\t{spent}\n"
        with Path(log).open("a") as out:
            out.write(line)
