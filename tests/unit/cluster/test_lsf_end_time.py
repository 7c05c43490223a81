"""An LSF job as the trainer sees it: the job's end time from ``bjobs`` (the deadline).

LSF cannot run here, so no real job is asked: ``bjobs`` is replaced by a function that returns
the output stored in tests/data/lsf/ (LSF's ``-o ... -json`` form, see its README), and the
checks are the command the trainer would run, the end time it reads from that output, and the
deadline a fold then stops by (``training.stop_margin`` before the end).
"""

from __future__ import annotations

import datetime as dt
import json
from types import SimpleNamespace

from nnunet_core.cluster.environment import job_end_time
from nnunet_core.cluster.lsf import LsfEnvironment, lsf_end_time_from_bjobs
from nnunet_core.training.stop_conditions import StopConditions
from tests.helpers.paths import TEST_DATA

RECORDED = TEST_DATA / "lsf" / "bjobs_running.json"
# when the recorded output was asked for, and when that job reaches its run limit
ASKED = dt.datetime(2025, 3, 4, 5, 0, 30).timestamp()
RUN_LIMIT_END = dt.datetime(2025, 3, 5, 1, 0, 0).timestamp()


def fake_bjobs(stdout: str, returncode: int = 0, calls: list | None = None):
    def run(command, **_kwargs):
        if calls is not None:
            calls.append(command)
        return SimpleNamespace(stdout=stdout, returncode=returncode)

    return run


def end_of(environ: dict, run, now: float = ASKED) -> float | None:
    """What the trainer would read as the LSF job's end, asked at ``now``."""
    return LsfEnvironment(environ, run=run, clock=lambda: now).end_time()


def record(**fields: str) -> str:
    return json.dumps({"COMMAND": "bjobs", "JOBS": 1, "RECORDS": [fields]})


def test_end_time_from_recorded_bjobs_output() -> None:
    calls: list = []
    run = fake_bjobs(RECORDED.read_text(), calls=calls)
    end = end_of({"LSB_JOBID": "4242"}, run)
    assert calls == [["bjobs", "-o", "time_left start_time runtimelimit", "-json", "4242"]]
    # 19:59 left (to the minute) ends 30 s before start + 1440 min: the earlier end wins
    assert end == ASKED + 19 * 3600 + 59 * 60 == RUN_LIMIT_END - 30


def test_each_field_alone_and_the_hms_format() -> None:
    start_only = record(TIME_LEFT="-", START_TIME="Mar  4 01:00", RUNTIMELIMIT="1440.0/hostA")
    assert lsf_end_time_from_bjobs(start_only, ASKED) == RUN_LIMIT_END
    hms = record(START_TIME="Mar  4 01:00", RUNTIMELIMIT="24:00:00", TIME_LEFT="19:59:15 L")
    assert lsf_end_time_from_bjobs(hms, ASKED) == RUN_LIMIT_END - 15
    with_year = record(START_TIME="Mar  4 01:00 2025", RUNTIMELIMIT="1440.0")
    assert lsf_end_time_from_bjobs(with_year, ASKED) == RUN_LIMIT_END


def test_start_stamp_without_year_is_the_latest_before_now() -> None:
    """A job started on 31 December and asked on 1 January started last year."""
    new_year = dt.datetime(2026, 1, 1, 3, 0).timestamp()
    output = record(START_TIME="Dec 31 23:00", RUNTIMELIMIT="600.0")
    expected = dt.datetime(2026, 1, 1, 9, 0).timestamp()
    assert lsf_end_time_from_bjobs(output, new_year) == expected


def test_no_deadline_without_a_run_limit_or_a_record() -> None:
    # an estimated run time (E) is not a limit LSF enforces, and "-" is no run limit at all
    estimate = record(TIME_LEFT="3:00 E", START_TIME="Mar  4 01:00", RUNTIMELIMIT="-")
    assert lsf_end_time_from_bjobs(estimate, ASKED) is None
    not_found = record(JOBID="4242", ERROR="Job <4242> is not found")
    assert lsf_end_time_from_bjobs(not_found, ASKED) is None
    assert lsf_end_time_from_bjobs("", ASKED) is None
    assert lsf_end_time_from_bjobs("Job <4242> is not found", ASKED) is None


def test_outside_lsf_and_when_bjobs_fails() -> None:
    assert end_of({}, fake_bjobs(RECORDED.read_text())) is None
    failed = fake_bjobs("", returncode=255)
    assert end_of({"LSB_JOBID": "4242"}, failed) is None


def test_job_array_element_is_asked_by_its_index() -> None:
    calls: list = []
    env = {"LSB_JOBID": "4242", "LSB_JOBINDEX": "3"}
    end_of(env, fake_bjobs(RECORDED.read_text(), calls=calls))
    assert calls[0][-1] == "4242[3]"


def test_job_end_time_asks_the_scheduler_the_job_runs_under() -> None:
    """SLURM's variables first (a SLURM job never has LSF's), then LSF's; the fold's deadline
    is that end, and it stops at the last epoch boundary that leaves stop_margin."""
    lsf = {"LSB_JOBID": "4242"}
    assert job_end_time(lsf, run=fake_bjobs("")) is None
    slurm = {"SLURM_JOB_ID": "7", "SLURM_JOB_END_TIME": "1741060000", "LSB_JOBID": "4242"}
    assert job_end_time(slurm, run=fake_bjobs(RECORDED.read_text())) == 1741060000.0
    end = end_of(lsf, fake_bjobs(RECORDED.read_text()))
    clock = SimpleNamespace(now=end - 300 - 2 * 601)
    stop = StopConditions(
        end, 300.0, clock=lambda: clock.now, reduce=lambda flag: flag, signal_flag=lambda: False
    )
    stop.start()
    clock.now += 601  # after an epoch of 601 s, one more still fits before end - margin...
    assert not stop(0)
    clock.now += 601  # ...the next one would not
    assert stop(1) and stop.reason == "deadline"


def test_active_only_with_a_job_id_and_without_rank_variables_of_its_own() -> None:
    assert LsfEnvironment({"LSB_JOBID": "4242"}).is_active()
    assert not LsfEnvironment({"LSB_JOBID": ""}).is_active()
    assert not LsfEnvironment({"SLURM_JOB_ID": "7"}).is_active()
    assert LsfEnvironment({"LSB_JOBID": "4242", "LSB_JOBINDEX": "0"}).job_id() == "4242"
    lsf = LsfEnvironment({"LSB_JOBID": "4242", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "RANK": "2"})
    answers = (lsf.global_rank(), lsf.local_rank(), lsf.world_size())
    assert answers == (None, None, None)
    assert (lsf.local_world_size(), lsf.node()) == (None, None)
