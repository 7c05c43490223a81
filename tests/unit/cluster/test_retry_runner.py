"""The retry runner (``python -m nnunet_core.cluster.retry``) with real processes and signals.

The commands are small Python scripts that count their attempts in a file and exit with chosen
statuses; the signals are sent with ``os.kill`` to the runner, as a user's ``kill`` or the
scheduler would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nnunet_core.cluster import no_retry
from nnunet_core.cluster.exit_codes import EXIT_STOPPED, EXIT_USER_CODE
from nnunet_core.cluster.retry import command_prefix
from nnunet_core.layout.results import NO_RETRY_MARKER, fold_dir, trained_model_dir

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals")

RUNNER = [sys.executable, "-m", "nnunet_core.cluster.retry"]

# exits with the status listed for its attempt (attempts counted in a file), after an optional
# error line; `wait` makes it record signals and wait for a stop
COMMAND = """
import os, signal, sys, time
from pathlib import Path
count_file, statuses = Path(sys.argv[1]), [int(s) for s in sys.argv[2].split(",")]
attempt = int(count_file.read_text()) + 1 if count_file.exists() else 1
count_file.write_text(str(attempt))
Path(str(count_file) + f".{attempt}").write_text(
    f"{os.getpid()} {os.getpgid(0)} {signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN}"
)
status = statuses[min(attempt, len(statuses)) - 1]
if len(sys.argv) > 3 and sys.argv[3] == "wait":
    def note(signum, frame):
        with open(str(count_file) + ".signals", "a") as handle:
            handle.write(f"{attempt} {signal.Signals(signum).name}\\n")
        if signum != signal.SIGUSR1:
            sys.exit(status)
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
        signal.signal(number, note)
    Path(str(count_file) + ".ready").write_text("")
    deadline = time.time() + 60
    while time.time() < deadline:
        time.sleep(0.05)
        if Path(str(count_file) + ".finish").exists():
            break
if status:
    print(f"nnunet-core train: error: attempt {attempt} failed", file=sys.stderr, flush=True)
sys.exit(status)
"""


def script(tmp_path: Path) -> list[str]:
    path = tmp_path / "command.py"
    path.write_text(COMMAND)
    return [sys.executable, str(path), str(tmp_path / "count")]


def attempts(tmp_path: Path) -> int:
    count = tmp_path / "count"
    return int(count.read_text()) if count.exists() else 0


def run(tmp_path: Path, *runner_args: str, statuses: str, log: Path | None = None):
    command = [*RUNNER, *runner_args, "--", *script(tmp_path), statuses]
    if log is None:
        return subprocess.run(command, capture_output=True, text=True, timeout=60)
    with open(log, "a") as handle:  # as the train rule's shell: both streams appended to a file
        return subprocess.run(command, stdout=handle, stderr=handle, timeout=60)


def wait_for(path: Path, timeout: float = 30) -> None:
    end = time.time() + timeout
    while not path.exists():
        assert time.time() < end, f"{path} never appeared"
        time.sleep(0.02)


def test_a_stop_before_the_walltime_is_retried_with_one_line_per_attempt(tmp_path: Path) -> None:
    result = run(tmp_path, "--retries", "3", statuses=f"{EXIT_STOPPED},{EXIT_STOPPED},0")
    assert result.returncode == 0, result.stderr
    assert attempts(tmp_path) == 3
    lines = [line for line in result.stderr.splitlines() if line.startswith("retry: ")]
    assert lines == [
        "retry: attempt 2 of 4: stopped before the walltime or its deadline; continuing with --c",
        "retry: attempt 3 of 4: stopped before the walltime or its deadline; continuing with --c",
    ]


@pytest.mark.parametrize("status", [1, 76, 137])
def test_a_crash_out_of_memory_and_a_kill_are_retried(tmp_path: Path, status: int) -> None:
    result = run(tmp_path, "--retries", "1", statuses=f"{status},0")
    assert result.returncode == 0 and attempts(tmp_path) == 2, result.stderr


def test_the_retries_run_out_with_the_last_status(tmp_path: Path) -> None:
    result = run(tmp_path, "--retries", "2", statuses=str(EXIT_STOPPED))
    assert result.returncode == EXIT_STOPPED and attempts(tmp_path) == 3
    assert result.stderr.strip().splitlines()[-1] == (
        "retry: exit 75 (stopped before the walltime or its deadline): no retries left (2)"
    )


@pytest.mark.parametrize("status", [2, EXIT_USER_CODE, 4])
def test_the_users_config_data_or_code_and_a_full_disk_are_not_retried(
    tmp_path: Path, status: int
) -> None:
    result = run(tmp_path, "--retries", "3", statuses=f"{status},0")
    assert result.returncode == status and attempts(tmp_path) == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1].endswith("a retry cannot help, not retried")


def test_a_killed_command_reports_the_shells_status() -> None:
    command = [*RUNNER, "--retries", "0", "--", sys.executable, "-c"]
    result = subprocess.run([*command, "import os; os.kill(os.getpid(), 9)"], timeout=60)
    assert result.returncode == 128 + 9


def test_the_command_runs_in_its_own_group_with_the_stop_signal_ignored(tmp_path: Path) -> None:
    result = run(tmp_path, "--retries", "0", statuses="0")
    assert result.returncode == 0, result.stderr
    pid, group, ignored = (tmp_path / "count.1").read_text().split()
    assert pid == group  # a group of its own: the runner signals all of it
    assert ignored == "True"  # a warning before the trainer's handler is not fatal


def start_waiting(tmp_path: Path, statuses: str, retries: int = 3) -> subprocess.Popen:
    command = [*RUNNER, "--retries", str(retries), "--", *script(tmp_path), statuses, "wait"]
    runner = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    wait_for(tmp_path / "count.ready")
    return runner


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_users_stop_is_forwarded_and_never_retried(tmp_path: Path, stop: int) -> None:
    # the command exits 143 when stopped: a kill from outside, which alone would be retried
    runner = start_waiting(tmp_path, statuses="143,0")
    os.kill(runner.pid, stop)
    _, stderr = runner.communicate(timeout=30)
    assert runner.returncode == 143, stderr
    assert attempts(tmp_path) == 1, stderr  # no second attempt after the user's stop
    assert (tmp_path / "count.signals").read_text() == f"1 {signal.Signals(stop).name}\n"
    assert "attempt 2" not in stderr


def test_the_stop_signal_reaches_the_command_and_the_runner_survives_it(tmp_path: Path) -> None:
    """SIGUSR1 (the walltime warning) is forwarded; the command exits 75 and is retried."""
    runner = start_waiting(tmp_path, statuses=f"{EXIT_STOPPED},0")
    os.kill(runner.pid, signal.SIGUSR1)
    wait_for(tmp_path / "count.signals")
    (tmp_path / "count.finish").write_text("")  # the trainer's checkpoint, then its exit 75
    _, stderr = runner.communicate(timeout=30)
    assert runner.returncode == 0, stderr
    assert attempts(tmp_path) == 2, stderr
    assert (tmp_path / "count.signals").read_text() == "1 SIGUSR1\n"
    assert "retry: attempt 2 of 4: stopped before the walltime" in stderr


def test_the_signals_reach_the_commands_whole_group(tmp_path: Path) -> None:
    """A grandchild (a DDP rank, a data worker) in the command's group gets the signal too."""
    grandchild = (
        "import signal, sys, time, pathlib\n"
        "signal.signal(signal.SIGTERM, lambda *a: (pathlib.Path(sys.argv[1]).write_text('got'),"
        " sys.exit(0)))\n"
        "pathlib.Path(sys.argv[1] + '.ready').write_text('')\n"
        "time.sleep(60)\n"
    )
    parent = (
        "import subprocess, sys\n"
        f"child = subprocess.Popen([sys.executable, '-c', {grandchild!r}, sys.argv[1]])\n"
        "import signal; signal.signal(signal.SIGTERM, lambda *a: None)\n"
        "sys.exit(child.wait())\n"
    )
    mark = tmp_path / "grandchild"
    command = [*RUNNER, "--retries", "2", "--", sys.executable, "-c", parent, str(mark)]
    runner = subprocess.Popen(command)
    wait_for(Path(f"{mark}.ready"))
    os.kill(runner.pid, signal.SIGTERM)
    assert runner.wait(timeout=30) == 0
    assert mark.read_text() == "got"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent death signal")
def test_nothing_outlives_a_killed_runner(tmp_path: Path) -> None:
    runner = start_waiting(tmp_path, statuses="0")
    pid = int((tmp_path / "count.1").read_text().split()[0])
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(timeout=30)
    end = time.time() + 10
    while Path(f"/proc/{pid}").exists() and time.time() < end:
        try:  # reaped by init; a zombie until then reads as gone
            if Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z":
                break
        except OSError:
            break
        time.sleep(0.05)
    state = Path(f"/proc/{pid}/stat")
    assert not state.exists() or state.read_text().split(")")[1].split()[0] == "Z"


def test_a_failure_no_retry_helps_leaves_a_marker_and_the_next_attempt_ends_at_once(
    tmp_path: Path,
) -> None:
    marker, log = tmp_path / "fold_0" / NO_RETRY_MARKER, tmp_path / "train.log"
    first = run(tmp_path, "--marker", str(marker), statuses=f"{EXIT_USER_CODE}", log=log)
    assert first.returncode == EXIT_USER_CODE
    record = json.loads(marker.read_text())
    assert record["exit_status"] == EXIT_USER_CODE
    assert record["line"] == "nnunet-core train: error: attempt 1 failed"  # from the job's log
    second = run(tmp_path, "--marker", str(marker), statuses="0", log=log)
    assert second.returncode == EXIT_USER_CODE
    assert attempts(tmp_path) == 1  # the command never ran again
    last = log.read_text().strip().splitlines()[-1]
    assert last.startswith("retry: not run: an earlier attempt failed in a way a retry cannot help")
    assert "(exit 3): nnunet-core train: error: attempt 1 failed" in last


@pytest.mark.parametrize("status", [0, EXIT_STOPPED, 130])
def test_no_marker_where_a_retry_helps_or_the_user_stopped(tmp_path: Path, status: int) -> None:
    marker = tmp_path / NO_RETRY_MARKER
    result = run(tmp_path, "--marker", str(marker), statuses=str(status))
    assert result.returncode == status
    assert not marker.exists()


def test_a_new_run_removes_the_markers_of_its_trainer_and_plans(tmp_path: Path) -> None:
    results = tmp_path / "results" / "Dataset900_Synth"
    ours = fold_dir(trained_model_dir(results, "3d_fullres", "nnUNetPlans", "MyTrainer"), 0)
    other = fold_dir(trained_model_dir(results, "3d_fullres", "nnUNetPlans", "Other"), 0)
    for fold in (ours, other):
        no_retry.write_marker(fold / NO_RETRY_MARKER, EXIT_USER_CODE, "x")
    assert no_retry.clear_markers(results, "MyTrainer", "nnUNetPlans") == [ours]
    assert not (ours / NO_RETRY_MARKER).exists() and (other / NO_RETRY_MARKER).exists()
    assert no_retry.read_marker(ours / NO_RETRY_MARKER) is None
    (other / NO_RETRY_MARKER).write_text("{not json")
    assert no_retry.read_marker(other / NO_RETRY_MARKER).exit_status == 1  # still no GPU spent


def test_the_rules_prefix_is_one_quoted_command() -> None:
    assert command_prefix(3) == "python -m nnunet_core.cluster.retry --retries 3 -- "
    marker = "/a b/fold_0/no_retry.json"  # quoted: one word in the rule's shell
    runner = "python -m nnunet_core.cluster.retry --retries 0"
    assert command_prefix(0, marker) == f"{runner} --marker '{marker}' -- "


def test_bad_arguments_are_one_line() -> None:
    result = subprocess.run([*RUNNER, "--retries", "2"], capture_output=True, text=True)
    assert result.returncode == 2 and "no command given after --" in result.stderr
    missing = subprocess.run(
        [*RUNNER, "--", "no-such-command-anywhere"], capture_output=True, text=True
    )
    assert missing.returncode == 127
    assert missing.stderr.strip() == "retry: command not found: no-such-command-anywhere"


def test_a_local_run_retries_in_the_runner_a_cluster_run_leaves_a_marker() -> None:
    from nnunet_core.workflow.flags import fold_retry_prefix

    marker = "/r/fold_0/no_retry.json"
    assert fold_retry_prefix(3, cluster=False, marker=marker) == command_prefix(3)
    assert fold_retry_prefix(3, cluster=True, marker=marker) == command_prefix(0, marker)


def test_an_unknown_stop_signal_setting_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "NNUNET_STOP_SIGNAL": "HUP"}
    result = subprocess.run(
        [*RUNNER, "--", *script(tmp_path), "0"], capture_output=True, text=True, env=env
    )
    assert result.returncode == 2 and attempts(tmp_path) == 0
    assert result.stderr.strip() == (
        "retry: error: NNUNET_STOP_SIGNAL='HUP': the stop signal must be one of USR1, USR2"
    )
