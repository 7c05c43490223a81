"""Everything the package does differently under LSF: the job's end time and the bsub options.

- the job (``LsfEnvironment``): ``$LSB_JOBID`` (with ``$LSB_JOBINDEX`` in a job array) names
  it; LSF exports no end time, so ``bjobs -o "time_left start_time runtimelimit" -json`` is
  asked (``-json``: no columns to split on blanks). LSF prints the time left and the start time
  to the minute: both are read and the earlier end wins, so the deadline is at most a minute
  early (``training.stop_margin`` covers that), never late. LSF itself sets no per-process rank
  variables (its MPI launchers do: ``nnunet_core.cluster.mpi``), so every topology answer is
  None.
- submission (``bsub_extra``, ``rule_lsf_extra``): snakemake-executor-plugin-lsf maps no ``gpu``
  resource: a job gets GPUs only through the ``lsf_extra`` resource, which the plugin appends to
  ``bsub`` as written. A profile cannot read the workflow's config, so a hard-coded
  ``-gpu num=1`` there silently starts ``-num_gpus 4`` on one GPU when
  ``training.gpus_per_job`` is 4. The train and predict rules therefore build their
  ``lsf_extra`` from the config here, and only for jobs the LSF executor submits: under any other
  executor (SLURM, local, a dry run) the rules have no such resource, so their jobs show no LSF
  key (``bsub_extra_for_executor``). Sites that need more bsub options replace the whole value
  in their profile (``set-resources`` replaces a rule's resource, it does not append):
  profiles/lsf/profile.yaml shows the string.
- the stop signal: LSF's warning action (``bsub -wa SIG -wt M``) sends the configured stop
  signal ``WARNING_MINUTES`` before the run limit to a job that can resume (train).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from typing import Any, ClassVar

from nnunet_core.cluster import stop_signal as stop_signals
from nnunet_core.cluster.job_environment import JobEnvironment, command_output

# ------------------------------------------------------------------------------ the job
LSF_FIELDS = "time_left start_time runtimelimit"
_LSF_CLOCK = re.compile(r"^(\d+):(\d{2})(?::(\d{2}))?$")  # h:mm, or hh:mm:ss under -hms
_LSF_STAMPS = ("%b %d %H:%M", "%b %d %H:%M:%S", "%b %d %H:%M %Y", "%b %d %H:%M:%S %Y")


def lsf_duration(text: str) -> float | None:
    """Seconds of ``h:mm``/``hh:mm:ss``, or of minutes (``1440.0``, ``1440.0/host``)."""
    value = text.strip().partition("/")[0].strip()
    clock = _LSF_CLOCK.match(value)
    if clock:
        hours, minutes, seconds = (int(part or 0) for part in clock.groups())
        return hours * 3600.0 + minutes * 60.0 + seconds
    try:
        return float(value) * 60.0
    except ValueError:
        return None  # "-" (no run limit), "" or anything else


def lsf_time_left(text: str) -> float | None:
    """``time_left`` counts to the run limit only with the status ``L`` (``E``/``X``: to an
    estimated run time, which LSF does not enforce)."""
    value, _, status = text.strip().rpartition(" ")
    return lsf_duration(value) if status == "L" else None


def lsf_stamp(text: str, now: float) -> float | None:
    """A bjobs time stamp (``Mar  4 01:00``, year only with LSB_DISPLAY_YEAR) as Unix time; a
    stamp without a year is the latest such moment not after now."""
    value = " ".join(text.split())
    year = dt.datetime.fromtimestamp(now).year
    for layout in _LSF_STAMPS:
        # a year is always parsed (strptime's default 1900 has no Feb 29)
        guesses = [value] if "%Y" in layout else [f"{value} {year}", f"{value} {year - 1}"]
        for guess in guesses:
            try:
                moment = dt.datetime.strptime(guess, layout.removesuffix(" %Y") + " %Y")
            except ValueError:
                continue
            if moment.timestamp() <= now or guess is guesses[-1]:
                return moment.timestamp()
    return None


def lsf_end_time_from_bjobs(output: str, now: float) -> float | None:
    """The job end from ``bjobs -o LSF_FIELDS -json``: the earlier of now + time left and start +
    run limit; None without a run limit or for output that is not one job's record."""
    try:
        record = json.loads(output)["RECORDS"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    ends = []
    left = lsf_time_left(str(record.get("TIME_LEFT", "")))
    if left is not None:
        ends.append(now + left)
    start = lsf_stamp(str(record.get("START_TIME", "")), now)
    limit = lsf_duration(str(record.get("RUNTIMELIMIT", "")))
    if start is not None and limit is not None:
        ends.append(start + limit)
    return min(ends) if ends else None


class LsfEnvironment(JobEnvironment):
    """Active when ``$LSB_JOBID`` is set (and not empty)."""

    name: ClassVar[str] = "lsf"

    def is_active(self) -> bool:
        return bool(self.environ.get("LSB_JOBID"))

    def job_id(self) -> str | None:
        """The id ``bjobs`` knows: ``4242``, or ``4242[3]`` for an element of a job array."""
        job = self.environ.get("LSB_JOBID")
        if not job:
            return None
        index = self.environ.get("LSB_JOBINDEX", "0")
        return job if index in ("", "0") else f"{job}[{index}]"

    def end_time(self) -> float | None:
        """None outside LSF, without a run limit, or when ``bjobs`` fails."""
        job = self.job_id()
        if job is None:
            return None
        output = command_output(["bjobs", "-o", LSF_FIELDS, "-json", job], self.run)
        return lsf_end_time_from_bjobs(output or "", self.clock())


# --------------------------------------------------------------------------- submission
# Minutes before the run limit at which LSF sends the stop signal (bsub -wt), as the SLURM
# profile's --signal=...@600: one epoch and a checkpoint must fit in them.
WARNING_MINUTES = 10


# The LSF executor plugin's name (``snakemake --executor lsf``, profiles/lsf).
LSF_EXECUTOR = "lsf"


def bsub_extra_for_executor(
    executor: str | None, gpus: int, stop_signal: str | None = None
) -> str | None:
    """``bsub_extra`` for a job that ``executor`` (the Snakemake executor plugin's name, None
    before one is chosen) submits under LSF; None under any other, which Snakemake takes as no
    resource at all."""
    if executor != LSF_EXECUTOR:
        return None
    return bsub_extra(gpus, stop_signal)


def bsub_extra(
    gpus: int, stop_signal: str | None = None, warning_minutes: int = WARNING_MINUTES
) -> str:
    """``-gpu num=N`` (none for a CPU job, gpus 0), then ``-wa SIG -wt M`` when the job resumes.

    ``stop_signal``: the configured signal name (``USR1``; nnunet_core.cluster.stop_signal), which
    LSF's warning action sends ``warning_minutes`` before the run limit so that the trainer
    checkpoints and the retry continues; None for jobs that cannot resume (prediction).
    """
    options = []
    if gpus > 0:
        options.append(f"-gpu num={int(gpus)}")
    if stop_signal is not None:
        options.append(f"-wa {stop_signal} -wt {int(warning_minutes)}")
    return " ".join(options)


def rule_lsf_extra(workflow: Any, gpus: int, *, resumable: bool) -> Callable[[Any], str | None]:
    """A GPU rule's ``lsf_extra`` resource: evaluated per job, once Snakemake has chosen the
    executor (``workflow.executor_plugin``, unknown while the Snakefile is parsed), so that only
    LSF jobs carry bsub options. ``resumable`` (train) adds the warning action with the configured
    stop signal, read when the rule is built."""
    signal_name = stop_signals.configured_name() if resumable else None

    def lsf_extra(_wildcards: Any) -> str | None:
        executor = getattr(workflow.executor_plugin, "name", None)
        return bsub_extra_for_executor(executor, gpus, signal_name)

    return lsf_extra
