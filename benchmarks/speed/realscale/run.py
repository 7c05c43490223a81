#!/usr/bin/env python
"""Real scale: preprocessing, data loading and prediction of real-size volumes, ours beside upstream
nnU-Net 2.8.1 on the same data in the same run, written as one JSON record (issue 34).

Data: an isotropic MR-like set (256^3 at 1 mm) for ``preprocess`` and ``loader_3d_fullres``,
``loader_3d_lowres``, ``loader_2d``; a CT-like set (512x512xN at 0.7x0.7x2.5 mm, where upstream's
augmentation runs as dummy 2-D) for ``preprocess_aniso``, ``loader_3d_fullres_aniso`` and the
prediction stages (``predict_export``, ``predict_case``, ``validation_fold``, from
predict.py). ``--dataset`` benchmarks a user's raw dataset instead (its planned
configurations name the loader stages). Stage figures: ``preprocess`` is fingerprint + plan +
preprocess as command lines (wall, peak RSS of the process tree); ``loader_*`` are seconds per
batch of one augmentation worker (best of the runs; see loader.py). ``ratio`` is always
ours_s / upstream_s (lower is better).

    python -m benchmarks.speed.realscale --peer ~/.cache/nnunet-peer/venv --out r.json
    python -m benchmarks.speed.realscale --quick --peer ~/.cache/nnunet-peer/venv --out r.json
    python -m benchmarks.speed.realscale --dataset $nnUNet_raw/Dataset900_Mine --peer VENV \
        --out r.json
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.speed import preprocess as pp
from benchmarks.speed.realscale.data import (
    DataSet,
    loader_configurations,
    synthetic_sets,
    user_set,
)
from benchmarks.speed.realscale.loader import loader_stage
from benchmarks.speed.realscale.record import (
    absent_stage,
    commit_description,
    format_table,
    machine_description,
    make_record,
    stage_entry,
    write_record,
)

REPO = Path(__file__).resolve().parents[3]
CONFIGURATIONS = ["2d", "3d_fullres", "3d_lowres"]
PREDICT_STAGES = ("predict_export", "predict_case", "validation_fold")
PREDICT_MODULE = "benchmarks.speed.realscale.predict"


@dataclass(frozen=True)
class Sizes:
    """How much to run: cases per set, CT slices, loader batches per run, runs, warm-up, and
    the configurations ``preprocess_aniso`` preprocesses (its loader stage needs 3d_fullres)."""

    cases: int
    ct_slices: int | None  # None: the generator's 80-120 per case
    batches: int
    repeats: int
    warmup: int
    aniso_configurations: tuple[str, ...] = tuple(CONFIGURATIONS)


FULL = Sizes(cases=4, ct_slices=None, batches=40, repeats=3, warmup=5)
# --quick: one run per loader stage (a run is mostly both sides' start-up) and the CT-like set's
# 3d_fullres only (upstream's 2d and 3d_lowres of 512x512 slices take minutes), so that the whole
# command stays within 10 minutes on a 2-core machine; the record's "sizes" says what ran.
QUICK = Sizes(
    cases=2, ct_slices=60, batches=10, repeats=1, warmup=1, aniso_configurations=("3d_fullres",)
)
TINY = Sizes(
    cases=2, ct_slices=12, batches=2, repeats=1, warmup=1, aniso_configurations=("3d_fullres",)
)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.speed.realscale", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--peer", type=Path, help="upstream nnU-Net 2.8.1 venv (../shared/peer)")
    parser.add_argument("--out", type=Path, help="write the JSON record here (atomically)")
    parser.add_argument("--dataset", type=Path, help="a raw nnU-Net dataset folder to use instead")
    parser.add_argument(
        "--quick", action="store_true", help="2 cases per set, 1 run of 10 batches per loader"
    )
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # the test's run
    parser.add_argument("--skip-predict", action="store_true", help="leave out prediction stages")
    parser.add_argument("-np", "--num-processes", type=int, default=2, help="preprocess workers")
    parser.add_argument("--work", type=Path, help="keep data here and reuse it (default: temp)")
    args = parser.parse_args(argv)
    if args.peer is not None:
        for needed in ("bin/python", "bin/nnUNetv2_preprocess"):
            if not (args.peer / needed).is_file():
                parser.error(f"--peer {args.peer}: no {needed} (not an upstream nnU-Net venv)")
    if args.dataset is not None and not (args.dataset / "dataset.json").is_file():
        parser.error(f"--dataset {args.dataset}: no dataset.json (not an nnU-Net raw dataset)")
    if args.out is not None and args.out.is_dir():
        parser.error(f"--out {args.out}: is a folder, give a file name")
    if args.num_processes < 1:
        parser.error(f"-np must be at least 1, got {args.num_processes}")
    return args


def preprocess_stage(
    data: DataSet, peer: Path | None, processes: int, configurations: Sequence[str]
) -> dict[str, Any]:
    """Fingerprint + plan + preprocess with each side's command lines, ours first."""
    steps, env = pp.ours(data.work, list(configurations), processes)
    ours = pp.run_steps(steps, env)
    log(f"  ours     {ours}")
    peer_result: dict[str, float] = {}
    if peer is not None:
        steps, env = pp.upstream(data.work, peer, list(configurations), processes)
        peer_result = pp.run_steps(steps, env)
        log(f"  upstream {peer_result}")

    def parts(result: dict[str, float]) -> str:
        return " + ".join(f"{result[f'{s}_s']:.1f}" for s in ("fingerprint", "plan", "preprocess"))

    note = f"configurations {', '.join(configurations)} (those planned), -np {processes}; "
    note += f"fingerprint + plan + preprocess s: ours {parts(ours)}"
    if peer_result:
        note += f", upstream {parts(peer_result)}"
    note += f"; CPU s (all processes): ours {ours['cpu_s']:.0f}"
    if peer_result:
        note += f", upstream {peer_result['cpu_s']:.0f}"
    return stage_entry(
        ours["total_s"],
        peer_result.get("total_s"),
        ours["peak_rss_mb"],
        peer_result.get("peak_rss_mb"),
        note,
    )


def loader_stages(data: DataSet, peer: Path | None, sizes: Sizes, names: list[str]) -> dict:
    """``loader_<configuration><suffix>`` for each planned configuration named in ``names``."""
    planned = loader_configurations(data.ours_preprocessed() / "nnUNetPlans.json")
    stages = {}
    for configuration in names:
        name = f"loader_{configuration}{data.suffix}"
        if configuration not in planned:
            stages[name] = absent_stage(f"{configuration} is not planned for this dataset")
            continue
        log(f"{name}: {sizes.repeats} runs of {sizes.batches} batches per side")
        stages[name] = loader_stage(
            data.ours_preprocessed(), data.work, peer, configuration,
            sizes.batches, sizes.repeats, sizes.warmup, log,
        )  # fmt: skip
    return stages


def prediction_stages(raw: Path, work: Path, peer: Path | None, quick: bool) -> dict:
    """The prediction stages from predict.py, or each absent with the reason."""
    if importlib.util.find_spec(PREDICT_MODULE) is None:
        return {
            n: absent_stage(f"{PREDICT_MODULE} is not in this checkout") for n in PREDICT_STAGES
        }
    try:
        module = importlib.import_module(PREDICT_MODULE)
        return module.run_prediction_stages(raw, work, peer, quick, log)
    except (Exception, SystemExit) as exc:  # keep the stages measured so far; main exits 1
        log(traceback.format_exc())
        first = (str(exc).strip().splitlines() or [""])[0]
        return {n: absent_stage(f"failed: {type(exc).__name__}: {first}") for n in PREDICT_STAGES}


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    sizes = TINY if args.tiny else QUICK if args.quick else FULL
    started = time.perf_counter()
    commit = commit_description(REPO)  # the code this run starts with, not what HEAD is later
    stages: dict[str, dict[str, Any]] = {}
    if args.dataset is not None:
        data = user_set(work, args.dataset)
        log(f"preprocess: {data.description}")
        stages["preprocess"] = preprocess_stage(data, args.peer, args.num_processes, CONFIGURATIONS)
        names = loader_configurations(data.ours_preprocessed() / "nnUNetPlans.json")
        stages.update(loader_stages(data, args.peer, sizes, names))
        description, predict_raw = f"user's raw dataset {data.description}", data.raw
    else:
        log(f"synthesizing {sizes.cases} cases per set in {work} (once per work folder)")
        mr, ct = synthetic_sets(work, sizes.cases, sizes.ct_slices, tiny=args.tiny)
        for data, configurations in ((mr, CONFIGURATIONS), (ct, sizes.aniso_configurations)):
            log(f"preprocess{data.suffix}: {data.description}")
            stages[f"preprocess{data.suffix}"] = preprocess_stage(
                data, args.peer, args.num_processes, configurations
            )
        stages.update(loader_stages(mr, args.peer, sizes, ["3d_fullres", "3d_lowres", "2d"]))
        stages.update(loader_stages(ct, args.peer, sizes, ["3d_fullres"]))
        description = f"synthetic: {mr.description}; {ct.description}"
        predict_raw = ct.raw
    if args.skip_predict:
        stages.update({n: absent_stage("--skip-predict") for n in PREDICT_STAGES})
    else:
        log(f"prediction stages on {predict_raw}")
        quick = args.quick or args.tiny
        stages.update(prediction_stages(predict_raw, work / "predict", args.peer, quick))
    return make_record(
        machine_description(),
        commit,
        description,
        stages,
        command=shlex.join(["python", "-m", "benchmarks.speed.realscale", *sys.argv[1:]]),
        quick=bool(args.quick or args.tiny),
        peer=str(args.peer) if args.peer else None,
        sizes=asdict(sizes),
        wall_s=round(time.perf_counter() - started, 1),
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # Every child process (our CLI, our loader worker) imports this checkout's code.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
    )
    work = args.work or Path(tempfile.mkdtemp(prefix="realscale_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        record = run(args, work.resolve())
    except (RuntimeError, ValueError) as exc:
        sys.exit(f"realscale: {exc}")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(format_table(record), flush=True)
    print(f"\ntotal {record['wall_s']:.0f} s", flush=True)
    if args.out is not None:
        write_record(args.out, record)
        print(f"record: {args.out}", flush=True)
    failed = [
        n for n, e in record["stages"].items() if e.get("note", "").startswith("absent: failed")
    ]
    if failed:
        sys.exit(
            f"realscale: {', '.join(failed)} failed (see the log above and the record's notes)"
        )


if __name__ == "__main__":
    main()
