"""Where one loader worker's time goes, per batch: ours from a cProfile of its batches, upstream's
by timing each batchgeneratorsv2 transform (exclusive of the transforms it wraps).

``benchmarks.speed.dataloader --breakdown`` prints both side by side; the parts are named after
what they do (reading the patch, the spatial transform, each intensity transform, mirroring and
copies, deep-supervision targets), so that a slow part can be found on either side.
"""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable

Where = tuple[str, str]  # (file name ending, function name)
# part -> the function(s) whose cumulative time it is, ours; a pair of names covers the code
# before this issue too (the whole initial patch read, then ``SpatialTransform.__call__``)
OUR_PARTS: dict[str, Where | tuple[Where, Where]] = {
    "locate (case, box)": ("patch_loader.py", "locate"),
    "read patch (blosc2)": ("blosc2_store.py", "read_patch"),
    "spatial transform": (("spatial.py", "apply"), ("spatial.py", "__call__")),
    "noise": ("intensity.py", "gaussian_noise"),
    "blur": ("intensity.py", "gaussian_blur"),
    "brightness": ("intensity.py", "multiplicative_brightness"),
    "contrast": ("intensity.py", "contrast"),
    "low resolution": ("intensity.py", "simulate_low_resolution"),
    "gamma": ("intensity.py", "gamma"),
    "deep-supervision targets": ("deep_supervision.py", "downsample_targets"),
}
PIPELINE = (("pipeline.py", "transform_region"), ("pipeline.py", "__call__"))
BATCH = ("patch_loader.py", "__call__")

# Upstream's training script, timing each transform's own work; reading and collating are the
# rest of the batch. The peer's python runs it (see dataloader.PEER_SCRIPT).
PEER_TIMING = r"""
from batchgeneratorsv2.transforms.base.basic_transform import BasicTransform
SPENT, STACK = {}, []
_plain_call = BasicTransform.__call__
def _timed_call(self, **data_dict):
    STACK.append(0.0)
    t0 = time.perf_counter()
    out = _plain_call(self, **data_dict)
    total = time.perf_counter() - t0
    inner = STACK.pop()
    name = type(self).__name__
    SPENT[name] = SPENT.get(name, 0.0) + total - inner
    if STACK:
        STACK[-1] += total
    return out
BasicTransform.__call__ = _timed_call
"""


def profile_batches(
    make_batch: Callable[[int, int], object], iterations: list[int]
) -> pstats.Stats:
    """cProfile of ``make_batch(1, i)`` for each iteration ``i``."""
    profiler = cProfile.Profile()
    profiler.enable()
    for i in iterations:
        make_batch(1, i)
    profiler.disable()
    return pstats.Stats(profiler)


def _cumulative(stats: pstats.Stats, where: Where | tuple[Where, Where]) -> float:
    if isinstance(where[0], tuple):
        return sum(_cumulative(stats, w) for w in where)  # type: ignore[arg-type]
    suffix, name = where
    total = 0.0
    for (filename, _line, function), row in stats.stats.items():  # type: ignore[attr-defined]
        if function == name and filename.endswith(suffix):
            total += row[3]  # cumulative time; recursion-free functions only
    return total


def our_parts(stats: pstats.Stats, batches: int) -> dict[str, float]:
    """Seconds per batch of each part of our loader (``OUR_PARTS``, plus the rest of the
    pipeline (mask, label -1 -> 0, mirror, contiguous copies) and of the batch (assembly))."""
    parts = {name: _cumulative(stats, where) / batches for name, where in OUR_PARTS.items()}
    pipeline = _cumulative(stats, PIPELINE) / batches
    outside = {"locate (case, box)", "deep-supervision targets"}
    if _cumulative(stats, PIPELINE[0]) == 0:  # the whole initial patch was read before it
        outside.add("read patch (blosc2)")
    inside = [k for k in parts if k not in outside]
    parts["rest of the pipeline"] = pipeline - sum(parts[k] for k in inside)
    total = _cumulative(stats, BATCH) / batches
    counted = sum(parts.values())
    parts["batch assembly, other"] = total - counted
    parts["total"] = total
    return parts


def format_parts(ours: dict[str, float], upstream: dict[str, float] | None) -> str:
    """Two tables in ms per batch: ours by part, upstream's by transform."""
    lines = ["ours, ms per batch:"]
    lines += [f"  {name:28s} {1000 * s:8.1f}" for name, s in ours.items()]
    if upstream:
        lines.append("upstream, ms per batch (each transform's own time):")
        lines += [f"  {name:40s} {1000 * s:8.1f}" for name, s in upstream.items()]
    return "\n".join(lines)


def top_functions(stats: pstats.Stats, batches: int, n: int = 15) -> str:
    """The ``n`` functions with the most own time, ms per batch."""
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:n]  # type: ignore[attr-defined]
    lines = ["ours, top functions by own time (ms per batch):"]
    for (filename, line, function), row in rows:
        lines.append(
            f"  {1000 * row[2] / batches:8.1f}  {function} ({filename.split('/')[-1]}:{line})"
        )
    return "\n".join(lines)
