"""Run one function over many cases in worker processes, with readable progress.

Progress is a tqdm bar when stderr is a terminal and ``case i/N`` lines on stdout otherwise
(a log file under Snakemake); see ``nnunet_core.runtime.case_progress`` for the format and
throttling.
A worker that dies (e.g. killed by the OOM killer) surfaces as an error naming the case, instead
of upstream's "background worker is 6 feet under".
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from nnunet_core.errors import NnunetCoreError
from nnunet_core.runtime.case_progress import CaseProgress

T = TypeVar("T")


def _context() -> mp.context.BaseContext:
    # fork starts workers in milliseconds; the parent holds no threads that matter here.
    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if "fork" in methods else "spawn")


def _timed(function: Callable[..., T], *args: Any) -> tuple[T, float]:
    """``function(*args)`` and its seconds, measured where it runs (in the worker)."""
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def map_cases(
    function: Callable[..., T],
    tasks: Sequence[tuple[str, tuple[Any, ...]]],
    num_processes: int,
    description: str,
    disable_progress: bool | None = None,
    worker_setup: Callable[[], object] | None = None,
) -> dict[str, T]:
    """Call ``function(*args)`` for every ``(case_id, args)``; return ``{case_id: result}``.

    Results come back in the order of ``tasks``. The first error stops the run and is re-raised.
    ``disable_progress``: None shows a bar in a terminal and lines elsewhere; True never shows
    the bar (lines instead, so a log still tells how far it got); False always shows the bar.
    ``worker_setup``: called once in each worker process before its first case (never in the
    caller's own process, which runs the cases itself with one process).
    """
    bar = None if disable_progress is None else not disable_progress
    with CaseProgress(len(tasks), description, bar=bar) as progress:
        if num_processes <= 1 or len(tasks) <= 1:
            results: dict[str, T] = {}
            for case_id, args in tasks:
                results[case_id], seconds = _timed(function, *args)
                progress.done(case_id, seconds)
        else:
            results = _run_pool(function, tasks, num_processes, progress, worker_setup)
    return {case_id: results[case_id] for case_id, _ in tasks}


def _run_pool(
    function: Callable[..., T],
    tasks: Iterable[tuple[str, tuple[Any, ...]]],
    num_processes: int,
    progress: CaseProgress,
    worker_setup: Callable[[], object] | None = None,
) -> dict[str, T]:
    results: dict[str, T] = {}
    with ProcessPoolExecutor(
        max_workers=num_processes, mp_context=_context(), initializer=worker_setup
    ) as pool:
        futures = {pool.submit(_timed, function, *args): case_id for case_id, args in tasks}
        try:
            for future in as_completed(futures):
                case_id = futures[future]
                try:
                    results[case_id], seconds = future.result()
                except BrokenProcessPool:
                    msg = (
                        f"a worker process died while processing case {case_id} (out of memory? "
                        "try fewer processes with -np)"
                    )
                    raise NnunetCoreError(msg) from None
                progress.done(case_id, seconds)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return results
