"""The stop-signal policy: the setting, and each role with real signals to real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from nnunet_core.cluster import stop_signal
from nnunet_core.errors import ConfigurationError

needs_usr = pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="no SIGUSR1/2 here")


@pytest.fixture
def restore_signals(monkeypatch: pytest.MonkeyPatch):
    """Each test starts with the default setting and leaves the handlers and flag as they were."""
    monkeypatch.delenv(stop_signal.ENV_VAR, raising=False)
    if not hasattr(signal, "SIGUSR1"):
        yield
        return
    before = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGUSR2)}
    stop_signal.reset_stop_request()
    yield
    for number, handler in before.items():
        signal.signal(number, handler)
    stop_signal.reset_stop_request()


def test_the_setting_defaults_to_usr1_and_takes_usr2_in_both_spellings() -> None:
    assert stop_signal.configured_name({}) == "USR1"
    assert stop_signal.label({}) == "SIGUSR1"
    assert stop_signal.configured_name({stop_signal.ENV_VAR: "USR2"}) == "USR2"
    assert stop_signal.configured_name({stop_signal.ENV_VAR: "SIGUSR2"}) == "USR2"


def test_an_unknown_setting_is_a_one_line_error_naming_the_variable() -> None:
    with pytest.raises(ConfigurationError) as info:
        stop_signal.configured_name({stop_signal.ENV_VAR: "TERM"})
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("NNUNET_STOP_SIGNAL='TERM'") and "USR1, USR2" in message


@needs_usr
@pytest.mark.usefixtures("restore_signals")
def test_the_trainer_role_only_sets_the_flag() -> None:
    assert stop_signal.for_trainer()
    assert not stop_signal.stop_requested()
    os.kill(os.getpid(), signal.SIGUSR1)
    assert stop_signal.stop_requested()  # and the process is alive


@needs_usr
@pytest.mark.usefixtures("restore_signals")
def test_the_workflow_role_is_inherited_through_exec() -> None:
    script = "kill -USR1 $$; echo alive"
    assert stop_signal.for_workflow_process() == "USR1"
    assert os.environ[stop_signal.ENV_VAR] == "USR1"  # exported: every job reads the same
    survived = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert survived.returncode == 0 and survived.stdout.strip() == "alive"
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    died = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert died.returncode == -signal.SIGUSR1  # what the rule's shell would do by default


@needs_usr
@pytest.mark.usefixtures("restore_signals")
def test_the_forwarding_role_signals_the_targets_and_restores_the_handler() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], stdout=subprocess.DEVNULL
    )
    try:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        restore = stop_signal.forward(lambda: [child.pid])
        os.kill(os.getpid(), signal.SIGUSR1)
        assert child.wait(timeout=20) == -signal.SIGUSR1
        restore()
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN
    finally:
        child.kill()
        child.wait()


@needs_usr
@pytest.mark.usefixtures("restore_signals")
def test_usr2_as_the_setting_moves_every_role_to_usr2(monkeypatch: pytest.MonkeyPatch) -> None:
    """A site that reserves USR1: the trainer reacts to USR2, Snakemake and shells ignore it."""
    monkeypatch.setenv(stop_signal.ENV_VAR, "USR2")
    assert stop_signal.for_workflow_process() == "USR2"
    assert signal.getsignal(signal.SIGUSR2) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGUSR1) != signal.SIG_IGN  # USR1 is left to the site
    survived = subprocess.run(["bash", "-c", "kill -USR2 $$; echo alive"], capture_output=True)
    assert survived.returncode == 0
    assert stop_signal.for_trainer()
    os.kill(os.getpid(), signal.SIGUSR2)
    assert stop_signal.stop_requested()


@needs_usr
@pytest.mark.usefixtures("restore_signals")
def test_a_data_worker_ignores_the_configured_signal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(stop_signal.ENV_VAR, "USR2")
    assert stop_signal.for_data_worker()
    assert signal.getsignal(signal.SIGUSR2) == signal.SIG_IGN
