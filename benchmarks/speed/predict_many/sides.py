"""How each side of ``benchmarks.speed.predict_many`` runs and is measured.

Ours: the workflow's prediction mode as a user types it, ``snakemake -s Snakefile --cores 2
--config predict="{model: M, input: I, output: O, cases_per_job: N, ...}" work_dir=W`` with
``cases_per_job`` >= the cases (one shard job). Upstream: ``nnUNetv2_predict_from_modelfolder -i I
-o O -m M -f F -device cpu`` with its defaults otherwise (-npp 3 -nps 3, step 0.5, mirroring
unless ``--disable_tta``); it sets torch to every core itself. Neither side inherits
``OMP_NUM_THREADS`` from this process (the workflow sets the shard job's to its threads).

Memory: the summed RSS of the command's whole process tree (every worker, spawned or forked),
sampled with psutil every ``INTERVAL_S``; RSS counts a page shared by forked workers once per
process, so the sum is an upper bound there. The summed PSS (shared pages split between their
processes) is sampled every ``PSS_EVERY``-th sample (reading smaps costs more). "After imports":
the RSS of one process of each side with everything its job imports and the model loaded
(``OURS_READY``, ``UPSTREAM_READY``); ``peak_above_imports_mb`` = peak total - that.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from benchmarks.common.peer.env import peer_environment
from nnunet_core.layout.results import CHECKPOINT_FINAL

REPO = Path(__file__).resolve().parents[3]
INTERVAL_S = 0.2
PSS_EVERY = 5
MB = 2**20
RSS_LINE = (
    "\nimport os\n"
    "print(int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE'))"
)
# A side ready for its first case: one process with everything its job imports, the model
# loaded (argv: model folder, folds "0,1", checkpoint name). Ours: the shard job's modules,
# those finish_case imports lazily included; upstream: its predictor initialised from the model
# folder as nnUNetv2_predict_from_modelfolder does (which imports its trainer modules).
FOLDS = "folds = [int(f) if f.isdigit() else f for f in sys.argv[2].split(',')]\n"
OURS_READY = (
    "import sys\nimport torch\nimport nnunet_core.new_scans.shard\n"
    "import nnunet_core.inference.predictor\nimport nnunet_core.evaluation.postprocessing\n"
    "import nnunet_core.new_scans.montage\nimport nnunet_core.new_scans.quality\n"
    "import nnunet_core.new_scans.training_volumes\n"
    "from nnunet_core.inference.model_folder import load_trained_model\n"
    + FOLDS
    + "model = load_trained_model(sys.argv[1], folds, sys.argv[3])"
)
UPSTREAM_READY = (
    "import sys\nimport torch\nfrom nnunetv2.inference.predict_from_raw_data import "
    "nnUNetPredictor\n" + FOLDS + "predictor = nnUNetPredictor(device=torch.device('cpu'))\n"
    "predictor.initialize_from_trained_model_folder(sys.argv[1], tuple(folds), sys.argv[3])"
)


@dataclass
class Measured:
    """One command's wall seconds and memory figures (MB)."""

    wall_s: float
    peak_rss_mb: float
    peak_pss_mb: float
    processes_at_peak: list[str] = field(default_factory=list)  # "what (pid): MB"
    max_processes: int = 0
    cpu_s: float = 0.0  # user + system of the tree's finished processes
    lifetimes: dict[int, list] = field(default_factory=dict)  # pid: [what, first, last seen]
    sampling_errors: list[str] = field(default_factory=list)  # samples lost, and why
    output_tail: str = ""

    def seconds_of(self, what: str) -> float | None:
        """From start to last sight of the processes labelled ``what`` (a job's wall)."""
        spans = [(first, last) for label, first, last in self.lifetimes.values() if label == what]
        return round(max(s[1] for s in spans) - min(s[0] for s in spans), 2) if spans else None


def clean_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) without the thread settings of whoever started us."""
    env = dict(os.environ if env is None else env)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY"):
        env.pop(name, None)
    return env


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return [root]


def _label(process: psutil.Process) -> str:
    """What a process is: ``-m`` module, command name, a worker of its parent, spawned worker."""
    try:
        command = process.cmdline()
        parent = process.parent()
        if parent is not None and parent.cmdline() == command:
            return "forked worker"
    except psutil.Error:
        return "?"
    if not command:  # a process between fork and exec, or a zombie
        return "?"
    python = len(command) > 2 and "python" in Path(command[0]).name
    for index, flag in enumerate(command[1:-1] if python else [], 1):
        if flag == "-m":  # after the interpreter's own flags (-B, -s)
            return command[index + 1]
        if flag == "-c":
            return "spawned worker" if "spawn_main" in command[index + 1] else "-c"
        if not flag.startswith("-"):
            return Path(flag).name
    return Path(command[0]).name


def measure(command: list[str], env: dict[str, str], cwd: Path) -> Measured:
    """Run ``command``; its wall seconds and its process tree's peak summed RSS and PSS."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)  # fmt: skip
    root = psutil.Process(process.pid)
    done = threading.Event()
    result = Measured(0.0, 0.0, 0.0)
    labels: dict[int, str] = {}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)

    def sample_once(count: int) -> None:
        tree, rss, now = _tree(root), {}, time.time()
        for member in tree:
            try:
                rss[member] = member.memory_info().rss
                if member.pid not in result.lifetimes:
                    labels[member.pid] = _label(member)
                    first = member.create_time()
                    result.lifetimes[member.pid] = [labels[member.pid], first, now]
                result.lifetimes[member.pid][2] = now
            except psutil.Error:
                pass
        total = sum(rss.values()) / MB
        result.max_processes = max(result.max_processes, len(rss))
        if total > result.peak_rss_mb:
            result.peak_rss_mb = total
            result.processes_at_peak = [
                f"{labels.get(p.pid, '?')} ({p.pid}): {v / MB:.0f}"
                for p, v in sorted(rss.items(), key=lambda kv: -kv[1])
            ]
        if count % PSS_EVERY == 0:
            pss = 0
            for member in tree:
                try:
                    pss += member.memory_full_info().pss
                except (psutil.Error, AttributeError):
                    pass
            result.peak_pss_mb = max(result.peak_pss_mb, pss / MB)

    def sample() -> None:
        count = 0
        while not done.is_set():
            try:
                sample_once(count)
            except Exception as exc:  # a lost sample is counted, never the end of sampling
                result.sampling_errors.append(repr(exc)[:200])
            count += 1
            done.wait(INTERVAL_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = process.communicate()
    result.wall_s = time.perf_counter() - started
    done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result.cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result.output_tail = output.decode(errors="replace")[-4000:]
    if process.returncode != 0:
        sys.exit(f"failed ({process.returncode}): {' '.join(command)}\n{result.output_tail}")
    return result


def ready_mb(python: str, code: str, model: Path, folds: list[str], env: dict[str, str]) -> float:
    """RSS (MB) of one ``python`` process after ``code`` (``OURS_READY``, ``UPSTREAM_READY``)."""
    argv = [str(model), ",".join(folds), CHECKPOINT_FINAL]
    done = subprocess.run([python, "-c", code + RSS_LINE, *argv], env=env, capture_output=True,
                          text=True)  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"{python}: getting ready failed:\n{done.stderr[-2000:]}")
    return int(done.stdout.split()[-1]) / MB


def our_command(
    model: Path, images: Path, output: Path, work_dir: Path, settings: dict
) -> list[str]:
    """The workflow's prediction mode, as ``tests/integration/test_new_scans.py`` drives it."""
    folds = "[" + ", ".join(settings["folds"]) + "]"
    predict = {
        "model": model,
        "input": images,
        "output": output,
        "cases_per_job": settings["cases_per_job"],
        "use_mirroring": str(settings["mirroring"]).lower(),
        "step_size": settings["step_size"],
        "low_memory": str(settings.get("low_memory", False)).lower(),
        "device": "cpu",
        "folds": folds,
    }
    value = "{" + ", ".join(f"{k}: {v}" for k, v in predict.items()) + "}"
    snakemake = str(Path(sys.executable).parent / "snakemake")
    return [snakemake, "-s", str(REPO / "Snakefile"), "--cores", str(settings["cores"]),
            "--config", f"predict={value}", f"work_dir={work_dir}"]  # fmt: skip


def upstream_command(
    peer: Path, model: Path, images: Path, output: Path, settings: dict
) -> list[str]:
    command = [str(peer / "bin" / "nnUNetv2_predict_from_modelfolder"), "-i", str(images), "-o",
               str(output), "-m", str(model), "-f", *settings["folds"], "-device", "cpu",
               "-step_size", str(settings["step_size"])]  # fmt: skip
    return command + ([] if settings["mirroring"] else ["--disable_tta"])


def upstream_env(peer: Path, work: Path) -> dict[str, str]:
    roots = [work / "upstream_roots" / name for name in ("raw", "pre", "results")]
    for root in roots:
        root.mkdir(parents=True, exist_ok=True)
    return clean_env(peer_environment(peer, *roots))


def agreement(ours: Path, upstream: Path, cases: tuple[str, ...], ending: str) -> dict:
    """Fraction of equal voxels per case and over all cases (both sides' segmentations)."""
    import numpy as np
    import SimpleITK as sitk

    per_case, equal, total = {}, 0, 0
    for case in cases:
        a = sitk.GetArrayFromImage(sitk.ReadImage(str(ours / f"{case}{ending}")))
        b = sitk.GetArrayFromImage(sitk.ReadImage(str(upstream / f"{case}{ending}")))
        if a.shape != b.shape:
            per_case[case] = None
            total += a.size
            continue
        same = int(np.count_nonzero(a == b))
        per_case[case] = round(same / a.size, 6)
        equal, total = equal + same, total + a.size
    return {
        "equal_voxels": round(equal / total, 6) if total else None,
        "lowest_case": min((v for v in per_case.values() if v is not None), default=None),
        "per_case": per_case,
    }
