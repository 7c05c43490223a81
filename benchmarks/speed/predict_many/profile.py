"""Where a shard job's seconds go: the workflow's shard run with a timer around each step.

``python -m benchmarks.speed.predict_many.profile RUN_DIR SHARD EVENTS`` runs
``nnunet_core.new_scans.shard`` on a planned shard exactly as the workflow's job does, with the
functions of each step wrapped (``STEPS``): every call appends one line ``step, process, start,
end, case, the process's RSS in MB at the end`` to EVENTS. The wrappers are installed before the
predictor forks its workers (and under the function's own module name too, which is how a task
reaches a worker), so the preprocessing and export workers time their calls too. ``summarize``
turns the lines into seconds per step: where the job's own process spends its time (``main``;
nested steps are listed under their parent) and what the workers do beside it (``workers``,
seconds of work, not wall). A wrapper costs a few microseconds; the run is a separate run from
the timed one.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

PAGE = os.sysconf("SC_PAGE_SIZE")

# (module, attribute, step name, nested in): the shard's steps in the order a case meets them
STEPS = (
    ("nnunet_core.new_scans.shard", "check_test_case", "check: read and verify each case", ""),
    ("nnunet_core.inference.model_folder", "load_trained_model", "load the model", ""),
    ("nnunet_core.inference.predictor", "_Stage.__init__", "fork the worker pools", ""),
    (
        "nnunet_core.inference.predictor",
        "preprocess_case",
        "preprocess: read, crop, normalize, resample",
        "",
    ),  # fmt: skip
    ("nnunet_core.inference.predictor", "_result", "wait for a worker's result", ""),
    ("nnunet_core.inference.predictor", "predict_logits_from_folds", "network: sliding window", ""),
    ("nnunet_core.inference.predictor", "export_prediction", "export: resample, argmax, write", ""),
    (
        "nnunet_core.new_scans.training_volumes",
        "training_volume_ranges",
        "training volume ranges",
        "",
    ),  # fmt: skip
    ("nnunet_core.new_scans.shard", "finish_case", "finish: per case after all predictions", ""),
    (
        "nnunet_core.evaluation.postprocessing",
        "postprocess_file",
        "postprocess: read staged, write output",
        "finish",
    ),  # fmt: skip
    ("nnunet_core.io.images", "read_seg", "read the output again (volumes)", "finish"),
    ("nnunet_core.new_scans.quality", "case_figures", "volumes per label", "finish"),
    (
        "nnunet_core.new_scans.montage",
        "write_case_png",
        "QC png: read image + output, draw",
        "finish",
    ),  # fmt: skip
)


def _case_of(args: tuple, kwargs: dict) -> str:
    """The case a call is about: a RawCase argument, an identifier, or an output path's name."""
    for value in (*args, *kwargs.values()):
        identifier = getattr(value, "identifier", None)
        if isinstance(identifier, str):
            return identifier
    for value in args[1:2]:  # _result(future, identifier, stage)
        if isinstance(value, str):
            return value
    paths = [v for v in args if isinstance(v, Path)]
    return paths[-1].name.split(".")[0] if paths else ""  # the output (segmentation, png)


def _rss_mb() -> int:
    return round(int(Path("/proc/self/statm").read_text().split()[1]) * PAGE / 2**20)


def _wrap(function, step: str, events: int):
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.time()
        try:
            return function(*args, **kwargs)
        finally:
            name = step
            if function.__name__ == "_result" and len(args) > 2:
                name = f"wait for {args[2]}"  # preprocessing or export
            case = _case_of(args, kwargs)
            line = json.dumps([name, os.getpid(), start, time.time(), case, _rss_mb()])
            os.write(events, (line + "\n").encode())

    return timed


def install(events_file: Path) -> None:
    events = os.open(events_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    # every module first: one that imports a wrapped name later would call the wrapper too
    modules = {name: importlib.import_module(name) for name, *_ in STEPS}
    for module_name, attribute, step, _ in STEPS:
        owner: Any = modules[module_name]
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = getattr(owner, name)
        wrapped = _wrap(original, step, events)
        setattr(owner, name, wrapped)
        # a worker gets a function by its module and name: that name must give the wrapper too
        home = sys.modules.get(getattr(original, "__module__", ""))
        if home is not None and getattr(home, original.__qualname__, None) is original:
            setattr(home, original.__qualname__, wrapped)


def main(argv: list[str] | None = None) -> int:
    run_dir, shard_id, events_file = (argv or sys.argv[1:])[:3]
    started = time.time()
    install(Path(events_file))  # imports torch and the predictor, as the shard does lazily
    imported, imported_mb = time.time(), _rss_mb()
    from nnunet_core.new_scans import shard

    code = shard.main([run_dir, shard_id])
    with open(events_file, "a") as handle:
        for name, start in (("imports", started), ("shard job (all)", started)):
            end = imported if name == "imports" else time.time()
            rss = imported_mb if name == "imports" else _rss_mb()
            handle.write(json.dumps([name, os.getpid(), start, end, "", rss]) + "\n")
    return code


def summarize(events_file: Path, main_pid: int | None = None) -> dict[str, Any]:
    """Seconds per step: ``main`` (the job's process), ``workers`` (the forked ones), with the
    largest RSS (MB) a step's process had when one of its calls returned (``rss_mb``)."""
    rows = [json.loads(line) for line in events_file.read_text().splitlines() if line.strip()]
    if main_pid is None:
        main_pid = next(row[1] for row in rows if row[0] == "imports")
    nested = {step: parent for _, _, step, parent in STEPS}
    whole = next((row[3] - row[2] for row in rows if row[0] == "shard job (all)"), 0)
    main: dict[str, list[tuple[float, int]]] = defaultdict(list)
    workers: dict[str, list[tuple[float, int]]] = defaultdict(list)
    per_case: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name, pid, start, end, case, *rss in rows:
        if name == "shard job (all)":
            continue
        (main if pid == main_pid else workers)[name].append((end - start, (rss or [0])[0]))
        if case:
            per_case[case][name] += end - start

    def table(source: dict[str, list[tuple[float, int]]]) -> dict[str, dict[str, float]]:
        ordered = sorted(source.items(), key=lambda kv: -sum(t for t, _ in kv[1]))
        return {
            name: {
                "s": round(sum(t for t, _ in calls), 2),
                "calls": len(calls),
                "rss_mb": max(r for _, r in calls),
            }
            for name, calls in ordered
        }

    top = sum(t for n, calls in main.items() if not nested.get(n) for t, _ in calls)
    return {
        "shard_job_s": round(whole, 2),
        "main": table(main),
        "main_unaccounted_s": round(whole - top, 2),
        "workers": table(workers),
        "finish_nested": sorted(n for n, p in nested.items() if p),
        "per_case_s": {
            case: {k: round(v, 2) for k, v in steps.items()} for case, steps in per_case.items()
        },
    }


if __name__ == "__main__":
    sys.exit(main())
