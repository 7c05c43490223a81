"""Run one function over many cases in worker processes, with a progress bar.

A worker that dies (e.g. killed by the OOM killer) surfaces as an error naming the case, instead
of upstream's "background worker is 6 feet under".
"""

from __future__ import annotations

import multiprocessing as mp
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from tqdm import tqdm

from nnunet_core.errors import NnunetCoreError

T = TypeVar("T")


def _context() -> mp.context.BaseContext:
    # fork starts workers in milliseconds; the parent holds no threads that matter here.
    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if "fork" in methods else "spawn")


def map_cases(
    function: Callable[..., T],
    tasks: Sequence[tuple[str, tuple[Any, ...]]],
    num_processes: int,
    description: str,
    disable_progress: bool | None = None,
) -> dict[str, T]:
    """Call ``function(*args)`` for every ``(case_id, args)``; return ``{case_id: result}``.

    Results come back in the order of ``tasks``. The first error stops the run and is re-raised.
    """
    disable = (not sys.stderr.isatty()) if disable_progress is None else disable_progress
    bar = tqdm(total=len(tasks), desc=description, unit="case", disable=disable, file=sys.stderr)
    results: dict[str, T] = {}
    try:
        if num_processes <= 1 or len(tasks) <= 1:
            for case_id, args in tasks:
                results[case_id] = function(*args)
                bar.update()
        else:
            results = _run_pool(function, tasks, num_processes, bar)
    finally:
        bar.close()
    return {case_id: results[case_id] for case_id, _ in tasks}


def _run_pool(
    function: Callable[..., T],
    tasks: Iterable[tuple[str, tuple[Any, ...]]],
    num_processes: int,
    bar: tqdm,
) -> dict[str, T]:
    results: dict[str, T] = {}
    with ProcessPoolExecutor(max_workers=num_processes, mp_context=_context()) as pool:
        futures = {pool.submit(function, *args): case_id for case_id, args in tasks}
        try:
            for future in as_completed(futures):
                case_id = futures[future]
                try:
                    results[case_id] = future.result()
                except BrokenProcessPool:
                    msg = f"a worker process died while processing case {case_id} (out of memory? try fewer processes with -np)"
                    raise NnunetCoreError(msg) from None
                bar.update()
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return results
