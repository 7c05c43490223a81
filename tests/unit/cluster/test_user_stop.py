"""Inside a workflow's job SIGINT asks the fold to stop after its epoch (cluster.user_stop), with
a real signal; outside one Ctrl-C is unchanged."""

from __future__ import annotations

import os
import signal

import pytest

from nnunet_core.cluster import stop_signal, user_stop
from nnunet_core.cluster.exit_codes import EXIT_INTERRUPTED, is_retryable
from nnunet_core.cluster.stop_signal import EXIT_STOPPED

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="no SIGUSR1")


@pytest.fixture
def clean_handlers():
    saved = {n: signal.getsignal(n) for n in (signal.SIGINT, signal.SIGUSR1)}
    stop_signal.reset_stop_request()
    user_stop.reset()
    # Ctrl-C's default, as in a terminal: a test run started in the background (`cmd &` from a
    # script) inherits SIGINT ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    for number, handler in saved.items():
        signal.signal(number, handler)
    stop_signal.reset_stop_request()
    user_stop.reset()


@pytest.mark.usefixtures("clean_handlers")
def test_outside_a_workflow_sigint_stays_keyboard_interrupt(monkeypatch):
    monkeypatch.delenv(user_stop.ENV_VAR, raising=False)
    stop_signal.for_trainer()
    assert not user_stop.for_trainer()
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        signal.sigtimedwait([], 0.1)  # let the handler run
    assert not user_stop.requested()
    assert user_stop.exit_status(EXIT_STOPPED) == EXIT_STOPPED


@pytest.mark.usefixtures("clean_handlers")
def test_in_a_workflow_sigint_sets_the_stop_flag_and_the_exit_is_not_retried(monkeypatch, capsys):
    monkeypatch.setenv(user_stop.ENV_VAR, "1")
    stop_signal.for_trainer()
    assert user_stop.for_trainer()
    os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGINT)  # a second one (a forwarding runner's) changes nothing
    assert stop_signal.stop_requested() and user_stop.requested()
    assert user_stop.reason() == "the user (SIGINT)"
    code = user_stop.exit_status(EXIT_STOPPED)
    assert code == EXIT_INTERRUPTED and not is_retryable(code)
    assert "stopped by the user" in capsys.readouterr().err
    assert user_stop.exit_status(0) == 0 and user_stop.exit_status(3) == 3
