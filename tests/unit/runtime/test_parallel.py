"""map_cases: a worker setup runs once in each worker process, never in the caller's process."""

from __future__ import annotations

import os

from nnunet_core.runtime.parallel import map_cases

_SET_UP_IN: list[int] = []


def _set_up() -> None:
    _SET_UP_IN.append(os.getpid())


def _where(_: int) -> tuple[int, list[int]]:
    return os.getpid(), list(_SET_UP_IN)


def test_worker_setup_runs_in_each_worker_before_its_cases() -> None:
    tasks = [(f"case_{i}", (i,)) for i in range(6)]
    results = map_cases(_where, tasks, 2, "setup", disable_progress=True, worker_setup=_set_up)
    assert list(results) == [case for case, _ in tasks]
    for pid, set_up_in in results.values():
        assert set_up_in == [pid]  # once, in the process that ran the case
    assert _SET_UP_IN == []  # not in the caller


def test_one_process_runs_the_cases_without_the_worker_setup() -> None:
    results = map_cases(_where, [("a", (0,)), ("b", (1,))], 1, "setup", worker_setup=_set_up)
    assert {pid for pid, _ in results.values()} == {os.getpid()}
    assert _SET_UP_IN == []
