"""Where a fold job is after its last epoch: final validation (case i/N, with npz when the fold
writes probabilities, an ETA from the cases done so far), the validation metrics, and whether its
training was reused from an earlier attempt.

Read from the lines the trainer already writes to its job log (``nnunet_core.training``: the
timestamped ``training finished after N epochs`` or ``training already finished (N epochs)``,
then one ``validation: case i/N (<case>) ...`` line per exported case, then
``Mean Validation Dice: ...``) and from the fold's ``provenance.json`` attempts (each attempt's
``argv``, ``start_weights``, ``start_epoch``/``end_epoch`` and ``end``). The npz export happens
per case inside the validation (each case's probabilities are written with its segmentation), so
it is no phase of its own: ``validation case i/N (with npz)``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from nnunet_core.layout.results import CHECKPOINT_FINAL
from nnunet_core.runtime.case_progress import format_duration

NPZ_FLAG = "--npz"  # the train command's flag that writes validation probabilities

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d): ")
_VALIDATION_START = re.compile(
    r": training finished after \d+ epochs$|: training already finished \(\d+ epochs\)$"
    r"|: validating checkpoint_best"
)
_REUSED = re.compile(r": training already finished \(\d+ epochs\)$")
_VALIDATION_CASE = re.compile(r": validation: case (\d+)/(\d+) \(")
_PREDICTED = re.compile(r": validation: case \d+/\d+ \([^)]*\) \d+(\.\d+)? s")  # not kept
_VALIDATION_CASES = re.compile(r": \d+ training / (\d+) validation cases$")


def _stamp(line: str) -> datetime | None:
    match = _STAMP.match(line)
    return datetime.fromisoformat(match.group(1)) if match else None


def validation_phase(lines: Sequence[str], npz: bool) -> tuple[str, str] | None:
    """``(progress, eta)`` of an attempt (its log lines, oldest first) that is in its final
    validation, else None (still training, or validation never started).

    The ETA is the remaining cases times the wall time per case since validation began (the
    exports overlap the next case's prediction, so the per-case seconds in the lines undercount).
    Cases a retry kept from the attempt before (``kept from the last attempt``) count as done
    but not in the rate. Past the last case the metrics are computed: no ETA (that step is
    short).
    """
    start = max((i for i, line in enumerate(lines) if _VALIDATION_START.search(line)), default=-1)
    cases = [
        (line, match)
        for line in lines[start + 1 :]
        if (match := _VALIDATION_CASE.search(line)) is not None
    ]
    if start < 0 and not cases:
        return None
    with_npz = " (with npz)" if npz else ""
    if not cases:
        total = next((m.group(1) for line in lines if (m := _VALIDATION_CASES.search(line))), "?")
        return f"validation case 0/{total}{with_npz}", ""
    last_line, last = cases[-1]
    done, total = int(last.group(1)), int(last.group(2))
    if done >= total:
        return f"validation {total}/{total} cases done, computing the metrics", ""
    predicted = [line for line, _ in cases if _PREDICTED.search(line)]
    begun = lines[start] if start >= 0 else None
    return f"validation case {done}/{total}{with_npz}", _eta(begun, predicted, total - done)


def _eta(start_line: str | None, predicted: list[str], remaining: int) -> str:
    """``h:mm:ss (about YYYY-MM-DD HH:MM)``, as the training's ETA, from the cases this attempt
    predicted (a retry's cases kept from the attempt before take no time); "" without them."""
    begun = _stamp(start_line) if start_line is not None else None
    last = _stamp(predicted[-1]) if predicted else None
    if begun is None or last is None:
        return ""
    seconds = (last - begun).total_seconds() / len(predicted) * remaining
    finish = last + timedelta(seconds=seconds)
    return f"{format_duration(seconds)} (about {finish:%Y-%m-%d %H:%M})"


def writes_npz(record: dict[str, Any]) -> bool:
    """Whether the fold's latest attempt exports validation probabilities: its command's
    arguments in ``provenance.json`` (``config.arguments.npz``), else its command line."""
    config = record.get("config")
    arguments = config.get("arguments") if isinstance(config, dict) else None
    if isinstance(arguments, dict) and "npz" in arguments:
        return arguments["npz"] is True
    attempts = record.get("attempts")
    argv = attempts[-1].get("argv") if isinstance(attempts, list) and attempts else None
    return isinstance(argv, list) and NPZ_FLAG in argv


def _trained_nothing_from_final(attempt: dict[str, Any]) -> bool:
    start = attempt.get("start_weights")
    path = start.get("path") if isinstance(start, dict) else None
    return (
        isinstance(path, str)
        and path.endswith(CHECKPOINT_FINAL)
        and attempt.get("end_epoch") in (None, attempt.get("start_epoch"))
    )


def _minute(iso: object) -> str:
    """``YYYY-MM-DD HH:MM`` of a provenance time (ISO 8601), "" when it is none."""
    try:
        return f"{datetime.fromisoformat(str(iso)):%Y-%m-%d %H:%M}"
    except ValueError:
        return ""


def reused_detail(lines: Sequence[str], attempts: Sequence[dict[str, Any]]) -> str:
    """``training reused from an earlier attempt, <when it was trained>`` when this attempt
    (its log lines) trained nothing and went on from the fold's ``checkpoint_final.pth``; "".

    Its log says ``training already finished``; once closed, its provenance attempt too (it
    started from checkpoint_final and ended at the epoch it started from). The time is the end of
    the latest attempt that trained epochs.
    """
    from_log = any(_REUSED.search(line) for line in lines)
    if not from_log and not (attempts and _trained_nothing_from_final(attempts[-1])):
        return ""
    trained = [
        a
        for a in attempts
        if isinstance(a.get("end_epoch"), int)
        and isinstance(a.get("start_epoch"), int)
        and a["end_epoch"] > a["start_epoch"]
    ]
    when = _minute(trained[-1].get("end")) if trained else ""
    return "training reused from an earlier attempt" + (f", {when}" if when else "")
