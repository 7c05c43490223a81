"""What a probe is: a name, a kind, the outcome it expects, and a setup that builds its hostile
value or file in a sandbox and returns the real command to run (with what the refusal must name
and what a correct run must write)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.security.outcome import REFUSAL, RUN, Outcome
from benchmarks.security.prepared import Prepared
from benchmarks.security.sandbox import Sandbox

__all__ = ["REFUSAL", "RUN", "Command", "Context", "Probe"]


@dataclass
class Context:
    """What a setup works with: its sandbox, the shared files, the environment for commands."""

    sandbox: Sandbox
    prepared: Prepared
    env: dict[str, str]

    @property
    def root(self) -> Path:
        return self.sandbox.root

    @property
    def marker(self) -> Path:
        return self.sandbox.marker


@dataclass
class Command:
    """The real command of a probe. ``names``: what its refusal line must name (any one);
    ``expected``: the file a correct run writes (a path, or a folder and a glob pattern that must
    match); ``after``: further checks once the checks of the command passed (more commands,
    e.g. a plain predict after a refused install), returning problems."""

    run: Callable[[], Outcome]
    names: tuple[str, ...] = ()
    expected: Path | tuple[Path, str] | None = None
    after: Callable[[Outcome], list[str]] | None = field(default=None)


@dataclass(frozen=True)
class Probe:
    name: str
    kind: str
    expect: str  # REFUSAL or RUN
    what: str  # one line: the hostile value or file
    setup: Callable[[Context], Command]
    fast: bool = False  # CLI only, a few seconds, no shared files needed (the test suite's)
