"""Progress over many cases: a tqdm bar in a terminal, plain ``case i/N`` lines in a log file.

Under Snakemake stdout and stderr go to a log file. A tqdm bar there is carriage-return garbage
(one redrawn line per update, unreadable with ``less`` or ``grep``), so the bar is shown only when
stderr is a terminal; otherwise each finished case is one line on stdout::

    preprocess 3d_fullres: case 3/10 (synth_004) 0.8 s; ETA 0:00:06
    preprocess 3d_fullres: case 10/10 (synth_009) 0.7 s; 10 cases in 0:00:08

stdout, not stderr: stderr holds only errors (a failing command prints one line there).
Not flooding big jobs: up to ``EVERY_CASE_LIMIT`` (200) cases every case gets a line; beyond,
a line each time another ``PERCENT_STEP`` (1 %) of the cases is done or ``INTERVAL_S`` (30 s)
passed since the last line, and always for the last case: about 100 lines plus one per 30 s.
The ETA is the remaining cases times the mean wall time per finished case so far (so it reflects
how many workers run in parallel).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import TextIO

from tqdm import tqdm

EVERY_CASE_LIMIT = 200
PERCENT_STEP = 0.01
INTERVAL_S = 30.0


def format_duration(seconds: float) -> str:
    """``h:mm:ss`` (hours grow past 24: an ETA is read, not parsed)."""
    total = max(0, int(round(seconds)))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def wants_bar(requested: bool | None, stream: TextIO | None = None) -> bool:
    """``requested`` when given, else whether ``stream`` (stderr) is a terminal."""
    if requested is not None:
        return requested
    stream = sys.stderr if stream is None else stream
    return bool(getattr(stream, "isatty", lambda: False)())


def should_log(done: int, total: int, last_logged: int, seconds_since_line: float) -> bool:
    """Whether case ``done`` of ``total`` gets a line (``last_logged``: cases at the last line)."""
    if done >= total or total <= EVERY_CASE_LIMIT:
        return True
    step = max(1, math.ceil(total * PERCENT_STEP))
    return done // step > last_logged // step or seconds_since_line >= INTERVAL_S


def case_line(
    label: str, done: int, total: int, case_id: str, seconds: float | None, elapsed: float
) -> str:
    """One line: label, ``case i/N``, the case and its time, then the ETA (or the total time)."""
    line = f"{label}: case {done}/{total} ({case_id})"
    if seconds is not None:
        line += f" {seconds:.1f} s"
    if done >= total:
        return f"{line}; {total} case{'s' if total != 1 else ''} in {format_duration(elapsed)}"
    eta = elapsed / max(done, 1) * (total - done)
    return f"{line}; ETA {format_duration(eta)}"


class CaseProgress:
    """Count finished cases: update a bar (``bar=True``) or print throttled lines.

    ``bar=None`` decides by whether stderr is a terminal. Use as a context manager.
    """

    def __init__(
        self,
        total: int,
        label: str,
        bar: bool | None = None,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.label = label
        self.out = out
        self.clock = clock
        self.done_count = 0
        self._start = clock()
        self._last_line_at = self._start
        self._last_logged = 0
        show = wants_bar(bar)
        self._bar = tqdm(total=total, desc=label, unit="case", disable=not show, file=sys.stderr)
        self.shows_bar = show

    def __enter__(self) -> CaseProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._bar.close()

    def done(self, case_id: str, seconds: float | None = None) -> None:
        """Case ``case_id`` finished (in ``seconds``, when known)."""
        self.done_count += 1
        if self.shows_bar:
            self._bar.update()
            return
        now = self.clock()
        if not should_log(self.done_count, self.total, self._last_logged, now - self._last_line_at):
            return
        line = case_line(
            self.label, self.done_count, self.total, case_id, seconds, now - self._start
        )
        print(line, file=self.out or sys.stdout, flush=True)
        self._last_line_at = now
        self._last_logged = self.done_count
