"""``case i/N`` progress: lines in a log file, a tqdm bar in a terminal, throttled for big jobs.

The log-file tests run ``map_cases`` in a subprocess whose stdout and stderr go to one file, as
under Snakemake (``> {log} 2>&1``); the terminal test gives the subprocess a pseudo-terminal as
stderr.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import textwrap
from pathlib import Path

import pytest

from nnunet_core.runtime import case_progress
from nnunet_core.runtime.case_progress import (
    EVERY_CASE_LIMIT,
    CaseProgress,
    case_line,
    format_duration,
    should_log,
    wants_bar,
)

SCRIPT = textwrap.dedent(
    """
    import operator, sys
    from nnunet_core.runtime.parallel import map_cases
    tasks = [(f"case_{i:03d}", (i, 1)) for i in range(int(sys.argv[1]))]
    result = map_cases(operator.add, tasks, int(sys.argv[2]), "preprocess 3d_fullres")
    print("results", list(result.values()))
    """
)


class FakeClock:
    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        value = self.now
        self.now += self.step
        return value


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run_script(tmp_path: Path, cases: int, processes: int, stderr=None) -> str:
    """Run ``SCRIPT``; stdout into a log file, stderr into the same file unless given."""
    log = tmp_path / "job.log"
    with open(log, "w") as out:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(cases), str(processes)],
            stdout=out,
            stderr=subprocess.STDOUT if stderr is None else stderr,
            timeout=120,
        )
    assert done.returncode == 0, log.read_text()
    return log.read_text()


def test_format_duration() -> None:
    assert format_duration(0) == "0:00:00"
    assert format_duration(3725.4) == "1:02:05"
    assert format_duration(90000) == "25:00:00"
    assert format_duration(-3) == "0:00:00"


def test_case_line_has_i_of_n_the_case_its_time_and_an_eta() -> None:
    line = case_line("preprocess 3d_fullres", 3, 10, "synth_004", 0.84, elapsed=6.0)
    assert line == "preprocess 3d_fullres: case 3/10 (synth_004) 0.8 s; ETA 0:00:14"
    last = case_line("predict", 10, 10, "synth_009", 1.0, elapsed=20.0)
    assert last == "predict: case 10/10 (synth_009) 1.0 s; 10 cases in 0:00:20"
    assert case_line("verify", 1, 1, "a", None, 0.0) == "verify: case 1/1 (a); 1 case in 0:00:00"


def test_should_log_every_case_of_a_small_job_and_every_percent_of_a_big_one() -> None:
    assert all(should_log(i, EVERY_CASE_LIMIT, i - 1, 0.0) for i in range(1, 201))
    assert not should_log(5, 1000, 4, 0.0)  # 1 % of 1000 is 10 cases
    assert should_log(10, 1000, 9, 0.0)
    assert should_log(5, 1000, 4, case_progress.INTERVAL_S)  # or after INTERVAL_S seconds
    assert should_log(1000, 1000, 999, 0.0)  # always the last case


def test_a_big_fast_job_logs_about_a_hundred_lines(capsys: pytest.CaptureFixture[str]) -> None:
    with CaseProgress(1000, "fingerprint", bar=False, clock=FakeClock(0.01)) as progress:
        for i in range(1000):
            progress.done(f"c{i}", 0.01)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 100
    assert lines[0].startswith("fingerprint: case 10/1000 (c9)")
    assert lines[-1].startswith("fingerprint: case 1000/1000 (c999)")


def test_a_big_slow_job_logs_at_least_every_interval(capsys: pytest.CaptureFixture[str]) -> None:
    step = case_progress.INTERVAL_S + 1  # each case takes longer than the interval
    with CaseProgress(1000, "predict", bar=False, clock=FakeClock(step)) as progress:
        for i in range(25):
            progress.done(f"c{i}")
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in lines] == [f"{i}/1000" for i in range(1, 26)]


def test_the_bar_only_in_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    assert wants_bar(None, Terminal()) and not wants_bar(None, io.StringIO())
    assert wants_bar(True, io.StringIO()) and not wants_bar(False, Terminal())
    terminal, out = Terminal(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal)
    with CaseProgress(3, "verify", out=out) as progress:
        for i in range(3):
            progress.done(f"c{i}", 0.1)
    assert out.getvalue() == ""  # no lines when the bar runs
    assert "3/3" in terminal.getvalue() and "\r" in terminal.getvalue()


@pytest.mark.parametrize("processes", [1, 2])
def test_map_cases_into_a_log_file_writes_case_lines_and_no_bar(
    tmp_path: Path, processes: int
) -> None:
    text = run_script(tmp_path, 5, processes)
    assert "\r" not in text and "it/s" not in text and "%|" not in text
    lines = [line for line in text.splitlines() if "case " in line]
    counts = [
        re.match(r"preprocess 3d_fullres: case (\d+)/5 \(case_\d{3}\) \d+\.\d s", x) for x in lines
    ]
    assert all(counts), lines
    assert [int(m.group(1)) for m in counts] == [1, 2, 3, 4, 5]
    assert sorted(line.split()[4] for line in lines) == [f"(case_{i:03d})" for i in range(5)]
    assert "; 5 cases in " in lines[-1] and all("; ETA " in x for x in lines[:-1])
    assert "results [1, 2, 3, 4, 5]" in text


def test_map_cases_in_a_terminal_shows_the_bar_and_no_lines(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 0 cols: no bar
    try:
        text = run_script(tmp_path, 4, 1, stderr=follower)
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
        bar = b"".join(chunks).decode(errors="replace")
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert "case " not in text and "results [1, 2, 3, 4]" in text
    assert "preprocess 3d_fullres" in bar and "4/4" in bar
