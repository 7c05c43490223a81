#!/usr/bin/env python
"""Augmentation-only time per sample: our training pipeline, and optionally upstream's.

Builds one synthetic sample of the initial (larger) patch for ``--patch`` (random image, a
smooth multi-label segmentation) and times the per-sample training transforms on it, single
threaded (torch threads = 1, as upstream's loader workers run). With ``--peer`` upstream's
``nnUNetTrainer.get_training_transforms`` (batchgeneratorsv2) runs in a subprocess of the peer
venv's own python on the same sample; rounds of the two alternate so that machine load hits both
alike, and the speed-up (upstream time / ours) is printed.

    python -m benchmarks.speed.augmentation --patch 48 56 64 --peer
    python -m benchmarks.speed.augmentation --patch 56 64 --samples 400 --peer
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from scipy import ndimage as ndi  # noqa: E402

from nnunet_core.training.augmentation import configure_augmentation, training_transforms  # noqa: E402

DEFAULT_PEER = Path.home() / ".cache/nnunet-peer/venv"

# Runs inside the peer venv: builds upstream's pipeline and answers "N" on stdin with the seconds
# that N samples took (fresh input copies made outside the timed region, as a loader would).
PEER_WORKER = textwrap.dedent(
    """
    import os, sys, time
    os.environ["OMP_NUM_THREADS"] = "1"
    import numpy as np, torch
    torch.set_num_threads(1)
    from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer
    z = np.load(sys.argv[1])
    patch = tuple(int(v) for v in z["patch"])
    rotation = tuple(float(v) for v in z["rotation"])
    mirror = tuple(int(v) for v in z["mirror"])
    tr = nnUNetTrainer.get_training_transforms(patch, rotation, None, mirror, bool(z["dummy_2d"]))
    data, seg = z["data"], z["seg"]
    print("ready", flush=True)
    for line in sys.stdin:
        total = 0.0
        for _ in range(int(line)):
            d, s = torch.from_numpy(data.copy()), torch.from_numpy(seg.copy())
            t = time.perf_counter()
            tr(image=d, segmentation=s)
            total += time.perf_counter() - t
        print(total, flush=True)
    """
)


def make_sample(
    shape: tuple[int, ...], channels: int, labels: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Random image and a smooth segmentation with ``labels`` values (0 = background)."""
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((channels, *shape)).astype(np.float32)
    field = ndi.gaussian_filter(rng.standard_normal(shape), sigma=max(2.0, min(shape) / 12))
    # background below the median, the foreground labels split the upper half
    cuts = np.quantile(field, 0.5 + 0.5 * np.arange(labels - 1) / max(labels - 1, 1))
    return data, np.digitize(field, cuts).astype(np.int16)[None]


class Peer:
    """Upstream's pipeline in a peer-venv subprocess, timed on request."""

    def __init__(self, venv: Path, sample_file: Path) -> None:
        python = venv / "bin" / "python"
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ""}
        self.proc = subprocess.Popen(
            [str(python), "-c", PEER_WORKER, str(sample_file)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("peer worker failed to start")

    def time(self, n: int) -> float:
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def time_ours(transform, data: np.ndarray, seg: np.ndarray, n: int, rng) -> float:
    total = 0.0
    for _ in range(n):
        t = time.perf_counter()
        transform(data, seg, rng)
        total += time.perf_counter() - t
    return total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patch", type=int, nargs="+", default=[48, 56, 64])
    parser.add_argument("--channels", type=int, default=1)
    parser.add_argument("--labels", type=int, default=3, help="label values incl. background")
    parser.add_argument("--samples", type=int, default=50, help="samples per round")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--peer",
        nargs="?",
        const=DEFAULT_PEER,
        type=Path,
        help=f"peer venv (default {DEFAULT_PEER})",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    patch = tuple(args.patch)
    cfg = configure_augmentation(patch)
    data, seg = make_sample(cfg.initial_patch_size, args.channels, args.labels, args.seed)
    transform = training_transforms(patch, cfg.rotation, cfg.do_dummy_2d, cfg.mirror_axes)
    rng = np.random.default_rng(args.seed)
    print(
        f"patch {patch}  initial {cfg.initial_patch_size}  dummy_2d {cfg.do_dummy_2d}  "
        f"channels {args.channels}  labels {args.labels}  torch threads 1"
    )

    peer = None
    with tempfile.TemporaryDirectory() as tmp:
        if args.peer is not None:
            sample_file = Path(tmp) / "sample.npz"
            np.savez(
                sample_file, data=data, seg=seg, patch=np.array(patch),
                rotation=np.array(cfg.rotation), mirror=np.array(cfg.mirror_axes),
                dummy_2d=np.array(cfg.do_dummy_2d),
            )  # fmt: skip
            peer = Peer(args.peer, sample_file)
            peer.time(max(20, args.samples // 4))  # warm-up (upstream's blur benchmarks itself)
        time_ours(transform, data, seg, max(20, args.samples // 4), rng)
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(time_ours(transform, data, seg, args.samples, rng) / args.samples)
            if peer is not None:
                theirs.append(peer.time(args.samples) / args.samples)
        if peer is not None:
            peer.close()

    ms_ours = 1000 * float(np.median(ours))
    print(f"ours      {ms_ours:8.3f} ms/sample  (median of {args.rounds} rounds x {args.samples})")
    if theirs:
        ms_theirs = 1000 * float(np.median(theirs))
        print(f"upstream  {ms_theirs:8.3f} ms/sample")
        paired = float(np.median(np.array(theirs) / np.array(ours)))
        print(
            f"speed-up  {ms_theirs / ms_ours:8.2f}x (upstream time / ours; "
            f"median of per-round ratios {paired:.2f}x)"
        )


if __name__ == "__main__":
    sys.exit(main())
