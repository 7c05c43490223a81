"""The campaign: a reference run, then fault moments (independent or chained), and the totals.

How it works and what counts as identical: README.md beside this file. The command line is
``python -m benchmarks.faults.run``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks.faults.epochs import POST_TRAINING, fold_of_job, repeated_epochs
from benchmarks.faults.outputs import (
    compare_manifests,
    empty_files,
    half_written,
    manifest,
    stale_markers,
)
from benchmarks.faults.scenario import REPO
from benchmarks.faults.snakemake_run import (
    LOCKED,
    RunResult,
    campaign_config,
    failed_job_lines,
    has_stale_lock,
    run_workflow,
    snakemake_command,
)
from benchmarks.faults.stages import STAGE_ORDER, Job, Moment, Window, redraw, stage_windows


@dataclass
class Reference:
    seconds: float
    windows: list[Window]
    manifest: dict[str, str]
    empty: set[str]
    jobs: list[Job]
    output: str  # Snakemake's console


@dataclass
class MomentResult:
    moment: Moment
    killed: bool
    killed_at: float | None
    stages_hit: list[str]
    jobs_hit: list[str]
    fault_returncode: int
    rerun_returncode: int | None  # None: the rerun was itself killed at the chain's next moment
    rerun_ok: bool
    unlocked: bool
    half_written: list[str]
    differences: list[str]
    escaped: list[str]
    seconds: float
    chain: int | None = None  # chained mode: the chain whose end state was checked
    attempts: int = 1  # runs it took to hit the moment's stage (``run_moment_in_stage``)
    stale_markers: list[str] = field(default_factory=list)  # Snakemake's, see the docstring
    retrained: list[str] = field(default_factory=list)  # epochs trained again (epochs.py)

    @property
    def identical(self) -> bool:
        return self.rerun_ok and not self.differences

    @property
    def ok(self) -> bool:
        clean = not self.half_written and not self.retrained
        return self.killed and self.rerun_ok and clean and self.identical

    def row(self) -> dict[str, Any]:
        return {
            "moment": self.moment.index,
            "target stage": self.moment.stage,
            "target": self.moment.what,
            "offset s": round(self.moment.offset, 2),
            "stage hit": ", ".join(self.stages_hit) if self.killed else "(not killed)",
            "rerun ok": self.rerun_ok,
            "unlocked": self.unlocked,
            "clean": not self.half_written,
            "identical": self.identical,
            "no epoch again": not self.retrained,
            "attempts": self.attempts,
        }


class Campaign:
    """Reference run and fault moments in ``base/run`` (one path: the outputs name it).

    ``run_moment``: a fresh run killed at the moment, rerun to the end, checked. ``run_chain``
    (cheaper, for the test suite): one run killed at each moment in turn (in the order of the
    reference run), each rerun killed at the next moment, the last rerun going to the end; the end
    state is checked once for the whole chain. A rerun counts as ok there when it ran without a
    failed job until the next kill (and the last one exited 0). The workflow's config is
    ``campaign_config`` with ``changes`` (``write_config``); ``repo`` and ``env`` give the code
    that runs it.
    """

    def __init__(
        self,
        base: Path,
        *,
        repo: Path = REPO,
        env: dict[str, str] | None = None,
        changes: dict | None = None,
        log=print,
    ) -> None:
        self.base = Path(base)
        self.rundir = self.base / "run"
        self.repo = Path(repo)
        self.env = env
        self.changes = changes
        self.log = log
        self.reference: Reference | None = None
        self.timeout = 1800.0
        # what puts config.yaml into a fresh run folder (a test replaces it after the reference:
        # unpacking a `reproduce` archive, a reader's rerun of the same run)
        self.write_config: Callable[[Path], object] = self.write_campaign_config

    def write_campaign_config(self, rundir: Path) -> None:
        config = campaign_config(rundir / "work", self.changes)
        (rundir / "config.yaml").write_text(yaml.safe_dump(config))

    def fresh_rundir(self) -> Path:
        if self.rundir.exists():
            shutil.rmtree(self.rundir)
        self.rundir.mkdir(parents=True)
        self.write_config(self.rundir)
        return self.rundir

    def command(self, *extra: str) -> list[str]:
        return snakemake_command(self.rundir, self.repo, *extra)

    def _run(self, kill: Moment | None = None, *extra: str) -> RunResult:
        return run_workflow(
            self.rundir,
            self.command(*extra),
            env=self.env,
            kill=None if kill is None else (kill.anchor, kill.offset),
            timeout=self.timeout,
        )

    def run_reference(self) -> Reference:
        self.fresh_rundir()
        result = self._run()
        if result.returncode != 0:
            raise RuntimeError(f"reference run failed ({result.returncode}):\n{result.output}")
        problems = half_written(self.rundir)
        if problems:
            raise RuntimeError("reference run left half-written files:\n" + "\n".join(problems))
        self.reference = Reference(
            seconds=result.seconds,
            windows=stage_windows(result.jobs, result.seconds),
            manifest=manifest(self.rundir),
            empty=empty_files(self.rundir),
            jobs=result.jobs,
            output=result.output,
        )
        self.timeout = max(600.0, 8 * result.seconds)
        self.log(
            f"reference: {result.seconds:.1f} s, {len(result.jobs)} jobs, "
            f"{len(self.reference.manifest)} files compared"
        )
        return self.reference

    def rerun(self, kill: Moment | None = None) -> tuple[RunResult, bool]:
        """The same command again, first the user's ``--unlock`` (the same command with it) where
        the kill left a lock (``has_stale_lock``), instead of a whole start that only says
        "Directory cannot be locked"; after that message anyway, ``--unlock`` and once more."""
        unlocked = has_stale_lock(self.rundir) and self._run(None, "--unlock").returncode == 0
        result = self._run(kill)
        if result.returncode != 0 and result.killed_at is None and LOCKED in result.output:
            unlocked = self._run(None, "--unlock").returncode == 0
            result = self._run(kill)
        return result, unlocked

    def _check(self) -> tuple[list[str], list[str], list[str]]:
        assert self.reference is not None
        problems = half_written(self.rundir, self.reference.empty)
        differences = compare_manifests(self.reference.manifest, manifest(self.rundir))
        return problems, differences, stale_markers(self.rundir)

    def _keep(self, name: str, outputs: dict[str, str]) -> None:
        """Keep a failed moment's tree and Snakemake outputs under ``base/name``."""
        keep = self.base / name
        if keep.exists():
            shutil.rmtree(keep)
        shutil.copytree(self.rundir, keep, symlinks=True)
        for file_name, text in outputs.items():
            (keep / file_name).write_text(text)

    def _log_result(self, result: MomentResult) -> None:
        moment = result.moment
        if result.rerun_returncode is None:
            rerun = "rerun ran on" if result.rerun_ok else "rerun failed"
        else:
            rerun = "rerun ok" if result.rerun_ok else f"rerun exit {result.rerun_returncode}"
        self.log(
            f"moment {moment.index}: {moment.stage} ({moment.what} +{moment.offset:.2f} s) "
            f"hit {result.row()['stage hit']}; {rerun}"
            f"{' after --unlock' if result.unlocked else ''}; "
            f"{'clean' if not result.half_written else f'{len(result.half_written)} half-written'}"
            f"; {'identical' if result.identical else f'{len(result.differences)} differences'}"
            f" ({result.seconds:.0f} s)"
        )

    def run_moment(self, moment: Moment) -> MomentResult:
        """A fresh run killed at ``moment``, the same command rerun, the end state checked."""
        started = time.monotonic()
        self.fresh_rundir()
        fault = self._run(moment)
        rerun, unlocked = self.rerun()
        problems, differences, markers = self._check()
        result = MomentResult(
            moment=moment,
            killed=fault.killed_at is not None,
            killed_at=fault.killed_at,
            stages_hit=fault.stages_hit,
            jobs_hit=fault.jobs_hit,
            fault_returncode=fault.returncode,
            rerun_returncode=rerun.returncode,
            rerun_ok=rerun.returncode == 0,
            unlocked=unlocked,
            half_written=problems,
            differences=differences,
            escaped=fault.escaped,
            seconds=time.monotonic() - started,
            stale_markers=markers,
            retrained=repeated_epochs(self.rundir, fold_of_job(moment.what))
            if moment.stage in POST_TRAINING
            else [],
        )
        if not result.ok:
            self._keep(
                f"failed_moment_{moment.index}",
                {"fault_output.txt": fault.output, "rerun_output.txt": rerun.output},
            )
        self._log_result(result)
        return result

    def run_moment_in_stage(self, moment: Moment, seed: int, retries: int) -> MomentResult:
        """``run_moment``, and while the kill missed the moment's stage (it came when no job of
        that stage ran) up to ``retries`` more tries at other points of that stage (``redraw``):
        the short jobs (preprocess, ensembles, report) finish a little sooner in one run than in
        another, and a campaign must hit every stage to say anything about it."""
        assert self.reference is not None
        result = self.run_moment(moment)
        attempt = 0
        while attempt < retries and not hit_its_stage(result):
            attempt += 1
            retry = redraw(moment, self.reference.windows, seed, attempt)
            self.log(f"moment {moment.index}: missed {moment.stage}; try {attempt + 1}")
            result = self.run_moment(retry)
        result.attempts = attempt + 1
        return result

    def run_chain(self, moments: list[Moment]) -> list[MomentResult]:
        """One run killed at every moment in turn (see the class docstring). A moment whose anchor
        does not come before the run ends starts a new chain from a fresh run."""
        pending = sorted(moments, key=lambda m: m.at)
        results: list[MomentResult] = []
        chain = 0
        while pending:
            chain += 1
            self.fresh_rundir()
            started = time.monotonic()
            run = self._run(pending[0])
            unlocked = False
            members: list[tuple[Moment, RunResult, bool]] = []
            outputs = {}
            while True:
                moment = pending.pop(0)
                outputs[f"moment_{moment.index}_fault.txt"] = run.output
                killed = run.killed_at is not None
                if not killed:
                    # The anchor never came: this run ended by itself; the moment goes last.
                    members.append((moment, run, unlocked))
                    final = run
                    break
                next_moment = pending[0] if pending else None
                rerun, rerun_unlocked = self.rerun(next_moment)
                members.append((moment, run, unlocked))
                run, unlocked = rerun, rerun_unlocked
                if next_moment is None or rerun.killed_at is None:
                    final = rerun
                    outputs["final_rerun.txt"] = rerun.output
                    break
            problems, differences, markers = self._check()
            final_ok = final.returncode == 0
            for position, (moment, fault, _) in enumerate(members):
                killed = fault.killed_at is not None
                last = position == len(members) - 1
                if last:
                    rerun_code: int | None = final.returncode
                    rerun_ok = final_ok and killed
                    rerun_unlocked = unlocked if killed else False
                else:
                    after = members[position + 1][1]
                    rerun_code = None
                    rerun_ok = not failed_job_lines(after.output) and after.killed_at is not None
                    rerun_unlocked = members[position + 1][2]
                result = MomentResult(
                    moment=moment,
                    killed=killed,
                    killed_at=fault.killed_at,
                    stages_hit=fault.stages_hit,
                    jobs_hit=fault.jobs_hit,
                    fault_returncode=fault.returncode,
                    rerun_returncode=rerun_code,
                    rerun_ok=rerun_ok,
                    unlocked=rerun_unlocked,
                    half_written=problems,
                    differences=differences if final_ok else ["the chain's last run failed"],
                    escaped=fault.escaped,
                    seconds=(time.monotonic() - started) / len(members),
                    chain=chain,
                    stale_markers=markers,
                )
                results.append(result)
                self._log_result(result)
            if not all(r.ok for r in results[-len(members) :]):
                self._keep(f"failed_chain_{chain}", outputs)
        return sorted(results, key=lambda r: r.moment.index)


def hit_its_stage(result: MomentResult) -> bool:
    return result.killed and result.moment.stage in result.stages_hit


def stages_of(windows: list[Window]) -> list[str]:
    """The stages a reference run has, in the workflow's order."""
    return [s for s in STAGE_ORDER if any(w.stage == s for w in windows)]


def totals(results: list[MomentResult], stages: list[str] | None = None) -> dict[str, Any]:
    """Counts over the moments; with ``stages`` (those the campaign aimed at) also the ones no
    kill hit, so that a gap in the coverage is in the summary, not only in the table."""
    hit = sorted(
        {s for r in results if r.killed for s in r.stages_hit},
        key=lambda s: STAGE_ORDER.index(s) if s in STAGE_ORDER else 99,
    )
    missed = {"stages not hit": [s for s in stages if s not in hit]} if stages else {}
    return {
        "moments tried": len(results),
        "moments killed": sum(r.killed for r in results),
        "stages covered": len(hit),
        "stages": hit,
        "reruns completed": sum(r.rerun_ok for r in results),
        "reruns needing --unlock": sum(r.unlocked for r in results),
        "no half-written file": sum(not r.half_written for r in results),
        "outputs identical": sum(r.identical for r in results),
        "stale Snakemake incomplete markers": sum(bool(r.stale_markers) for r in results),
        "no epoch trained again": sum(not r.retrained for r in results),
        **missed,
    }


def report_json(
    reference: Reference,
    results: list[MomentResult],
    seed: int,
    stages: list[str] | None = None,
) -> dict[str, Any]:
    return {
        "seed": seed,
        "reference_seconds": round(reference.seconds, 2),
        "reference_windows": [asdict(w) for w in reference.windows],
        "totals": totals(results, stages),
        "moments": [
            {
                **r.row(),
                "moment detail": asdict(r.moment),
                "jobs hit": r.jobs_hit,
                "killed at s": r.killed_at,
                "fault exit": r.fault_returncode,
                "rerun exit": r.rerun_returncode,
                "chain": r.chain,
                "half written": r.half_written,
                "differences": r.differences,
                "escaped the process group": r.escaped,
                "stale incomplete markers": r.stale_markers,
                "epochs trained again": r.retrained,
                "seconds": round(r.seconds, 1),
            }
            for r in results
        ],
    }
