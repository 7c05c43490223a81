"""Running probes and checking them: a fresh sandbox per probe, the decoy tree before and after,
the markers, the outcome against the probe's expectation; the record (JSON and a text table)."""

from __future__ import annotations

import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.security.commands import probe_env
from benchmarks.security.outcome import TRACEBACK, Outcome, judge
from benchmarks.security.prepared import Prepared
from benchmarks.security.probe import Command, Context, Probe
from benchmarks.security.sandbox import (
    decoy_changes,
    make_sandbox,
    markers_found,
    markers_in,
    snapshot,
)
from benchmarks.security.scenario import REPO


@dataclass
class ProbeResult:
    name: str
    kind: str
    expect: str
    outcome: str  # refusal / run / traceback / setup failed
    ok: bool
    seconds: float
    what: str
    refusal_line: str = ""
    problems: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)

    def row(self) -> tuple[str, ...]:
        verdict = "ok" if self.ok else f"FAIL ({len(self.problems)})"
        return (self.name, self.kind, self.expect, self.outcome, f"{self.seconds:.1f}", verdict)


def outcome_word(outcome: Outcome) -> str:
    if TRACEBACK in outcome.text:
        return f"traceback (exit {outcome.returncode})"
    return "run" if outcome.returncode == 0 else f"refusal (exit {outcome.returncode})"


def expected_problem(expected: Path | tuple[Path, str] | None) -> str | None:
    if isinstance(expected, tuple):
        folder, pattern = expected
        return None if any(folder.glob(pattern)) else f"nothing matches {pattern} in {folder}"
    return None


def check(probe: Probe, command: Command, outcome: Outcome, sandbox, before) -> list[str]:
    """Every check of one probe's run; an empty list when it held."""
    problems = []
    base = sandbox.root.parents[1]
    for marker in markers_found(sandbox.root, base / "tmp") + markers_in(REPO, base):
        problems.append(f"marker created (hostile code ran): {marker}")
    after = snapshot(sandbox.root)
    problems += decoy_changes(sandbox.root, before, after, sandbox.allowed)
    expected = command.expected if isinstance(command.expected, Path) else None
    verdict = judge(outcome, probe.expect, command.names, expected)
    if verdict is None and outcome.returncode == 0:
        verdict = expected_problem(command.expected)
    if verdict:
        problems.append(verdict)
    if not problems and command.after is not None:
        problems += command.after(outcome)
        problems += [f"marker created (hostile code ran): {m}" for m in markers_found(sandbox.root)]
    return problems


def run_probe(probe: Probe, prepared: Prepared, base: Path) -> ProbeResult:
    """One probe in a fresh sandbox ``base/probes/<name>``."""
    start = time.monotonic()
    sandbox = make_sandbox(base / "probes" / probe.name, prepared.raw)
    env = probe_env(base)
    try:
        command = probe.setup(Context(sandbox, prepared, env))
    except Exception:  # a setup that cannot build its hostile file is the campaign's bug
        return ProbeResult(
            probe.name, probe.kind, probe.expect, "setup failed", False,
            time.monotonic() - start, probe.what, problems=[traceback.format_exc(limit=3)],
        )  # fmt: skip
    before = snapshot(sandbox.root)
    outcome = command.run()
    problems = check(probe, command, outcome, sandbox, before)
    return ProbeResult(
        probe.name, probe.kind, probe.expect, outcome_word(outcome), not problems,
        time.monotonic() - start, probe.what, outcome.refusal_line()[:400], problems,
        outcome.argv,
    )  # fmt: skip


def table(results: list[ProbeResult]) -> str:
    """The text record: one row per probe, then each failure's problems."""
    header = ("probe", "kind", "expected", "outcome", "seconds", "result")
    rows = [r.row() for r in results]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, tuple("-" * w for w in widths), *rows]
    ]
    for r in results:
        for problem in r.problems:
            lines.append(f"  {r.name}: {problem.strip()[:600]}")
    passed = sum(r.ok for r in results)
    lines.append(f"{passed} of {len(results)} probes passed")
    return "\n".join(lines) + "\n"


def record(results: list[ProbeResult], **context: object) -> dict:
    return {
        **context,
        "probes": len(results),
        "passed": sum(r.ok for r in results),
        "failed": [r.name for r in results if not r.ok],
        "results": [asdict(r) for r in results],
    }
