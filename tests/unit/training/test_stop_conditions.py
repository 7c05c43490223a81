"""When a training stops: ``--deadline`` and the combined check (the batch job's end time is
tested with the scheduler environments in tests/unit/cluster/)."""

from __future__ import annotations

import datetime as dt

import pytest

from nnunet_core.errors import ConfigurationError
from nnunet_core.training import stop_conditions


def test_parse_deadline_forms() -> None:
    now = dt.datetime(2025, 3, 1, 10, 0, 0).timestamp()
    assert stop_conditions.parse_deadline("3600", now) == now + 3600
    assert stop_conditions.parse_deadline("90.5", now) == now + 90.5
    assert (
        stop_conditions.parse_deadline("12:30", now) == dt.datetime(2025, 3, 1, 12, 30).timestamp()
    )
    assert (
        stop_conditions.parse_deadline("09:00:30", now)
        == dt.datetime(2025, 3, 2, 9, 0, 30).timestamp()
    )
    iso = "2025-03-04T05:06:07"
    assert stop_conditions.parse_deadline(iso, now) == dt.datetime.fromisoformat(iso).timestamp()
    for bad in ("soon", "-5", "0"):
        with pytest.raises(ConfigurationError, match="--deadline"):
            stop_conditions.parse_deadline(bad, now)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_deadline_stops_when_the_next_epoch_would_not_fit() -> None:
    clock = FakeClock()
    # epochs take 10 s, the margin is 5 s: after 2 epochs (t=20) a third would end at 30 + 5
    stop = stop_conditions.StopConditions(1032.0, 5.0, clock=clock, signal_flag=lambda: False)
    stop.start()
    answers = []
    for epoch in range(4):
        clock.now += 10
        answers.append(stop(epoch))
        if answers[-1]:
            break
    assert answers == [False, True] and stop.reason == "deadline"
    assert stop.estimated_epoch_seconds() == 10


def test_signal_flag_and_other_ranks() -> None:
    clock = FakeClock()
    flag = stop_conditions.StopConditions(clock=clock, signal_flag=lambda: True)
    assert flag(0) and flag.reason == "SIGUSR1"
    other = stop_conditions.StopConditions(
        clock=clock, signal_flag=lambda: False, reduce=lambda _flag: True
    )
    assert other(0) and "another rank" in other.reason
    quiet = stop_conditions.StopConditions(clock=clock, signal_flag=lambda: False)
    assert not quiet(0) and quiet.reason is None
    assert stop_conditions.reduce_flag(True) and not stop_conditions.reduce_flag(
        False
    )  # no process group
