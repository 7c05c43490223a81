"""Earlier attempts' job logs are kept as <log>.1, .2, ... (workflow.log_rotation), also through
Snakemake's own step that deletes a job's logs before each attempt."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from nnunet_core.workflow import log_rotation


def test_each_attempt_is_kept_in_order_and_the_current_name_is_free(tmp_path: Path):
    log = tmp_path / "train_3d_fullres_fold0.log"
    for attempt in ("first\n", "second\n", "third\n"):
        log.write_text(attempt)
        log_rotation.keep_aside(log)
        assert not log.exists()
    kept = log_rotation.earlier_attempts(log)
    assert [p.name for p in kept] == [f"{log.name}.{n}" for n in (1, 2, 3)]
    assert [p.read_text() for p in kept] == ["first\n", "second\n", "third\n"]


def test_an_empty_log_is_removed_not_kept_and_a_missing_one_is_nothing(tmp_path: Path):
    log = tmp_path / "report.log"
    log.write_text("")
    assert log_rotation.keep_aside(log) is None
    assert not log.exists() and log_rotation.earlier_attempts(log) == []
    assert log_rotation.keep_aside(tmp_path / "never.log") is None


def test_numbers_continue_after_the_highest_and_never_overwrite(tmp_path: Path):
    log = tmp_path / "a.log"
    (tmp_path / "a.log.7").write_text("old")
    (tmp_path / "a.log.x").write_text("not an attempt")
    log.write_text("new")
    assert log_rotation.keep_aside(log) == tmp_path / "a.log.8"
    assert (tmp_path / "a.log.7").read_text() == "old"


def test_snakemakes_removal_step_keeps_the_log_aside_first(tmp_path: Path):
    from snakemake.io import IOFile
    from snakemake.jobs import Job

    assert log_rotation.install()
    assert log_rotation.install()  # once per process, however often the Snakefile is parsed
    log = tmp_path / "x.log"
    log.write_text("earlier attempt\n")
    job = SimpleNamespace(log=[IOFile(str(log))], output=[], rule=SimpleNamespace(output=[]))
    asyncio.run(Job.remove_existing_output(job))
    assert not log.exists()
    assert (tmp_path / "x.log.1").read_text() == "earlier attempt\n"
