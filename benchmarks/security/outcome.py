"""How a probe's command ended, judged: a one-line refusal (non-zero exit, no traceback, the
error line names the offending file or value) or a correct run (exit 0, the expected file there).

The real commands report errors in one line: ``nnunet-core <command>: error: <what>`` (the CLI)
or, from Snakemake, an error report (``WorkflowError:``, ``Error in rule X:``) one of whose
lines names the value (a failed job's log tail), or the one line of an error found while the
Snakefile is parsed (config checks). A Python traceback anywhere is a failure whatever the exit
status."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

TRACEBACK = "Traceback (most recent call last)"
REFUSAL = "refusal"
RUN = "run"
# where Snakemake's error report starts: "ConfigurationError in file ...", "WorkflowError:",
# "Error in rule plan:", "RuleException:" (the lines after it say why)
_SNAKEMAKE_ERROR = re.compile(r"^\w*(Error|Exception)\b")
_CLI_ERROR = re.compile(r"^nnunet-core(?: [\w-]+)?: error: ")


@dataclass
class Outcome:
    """A finished command: what it printed, its exit status, how long it ran."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    cli: bool  # an nnunet-core command (one error line on stderr) rather than Snakemake

    @classmethod
    def of(cls, result: subprocess.CompletedProcess, seconds: float, *, cli: bool) -> Outcome:
        return cls(
            [str(a) for a in result.args], result.returncode, result.stdout, result.stderr,
            seconds, cli,
        )  # fmt: skip

    @property
    def text(self) -> str:
        return f"{self.stdout}\n{self.stderr}"

    def refusal_line(self) -> str:
        """The line that says why (the CLI's error line, else Snakemake's last error line)."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        if self.cli:
            return lines[-1] if lines else ""
        block = self.snakemake_errors()
        return block[1] if len(block) > 1 else (block[0] if block else (lines[-1] if lines else ""))

    def snakemake_errors(self) -> list[str]:
        """Snakemake's error report: its lines from the first ``...Error`` header on."""
        lines = [line.strip() for line in self.text.splitlines() if line.strip()]
        start = next((i for i, line in enumerate(lines) if _SNAKEMAKE_ERROR.match(line)), None)
        if start is None:  # a user's error found while parsing: its one line, last on stderr
            # (nnunet_core.workflow.parse_errors), no header
            errs = [line.strip() for line in self.stderr.splitlines() if line.strip()]
            return errs[-1:] if self.returncode != 0 else []
        return lines[start:]


def _named(text: str, names: tuple[str, ...]) -> bool:
    return any(name and (name in text or repr(name)[1:-1] in text) for name in names)


def refusal_problem(outcome: Outcome, names: tuple[str, ...]) -> str | None:
    """None when ``outcome`` is a one-line refusal naming one of ``names``; else why not."""
    if outcome.returncode == 0:
        return "exit 0 where a refusal was expected"
    if TRACEBACK in outcome.text:
        return f"a Python traceback (exit {outcome.returncode})"
    if outcome.cli:
        errors = [line for line in outcome.stderr.splitlines() if _CLI_ERROR.match(line)]
        if len(errors) != 1:
            return f"{len(errors)} 'nnunet-core ...: error:' lines on stderr, not one"
        if not _named(errors[0], names):
            return f"the error line names none of {list(names)}: {errors[0][:300]}"
        return None
    if not any(_named(line, names) for line in outcome.snakemake_errors()):
        said = outcome.refusal_line()[:300] or "no error report"
        return f"Snakemake's error report names none of {list(names)} ({said})"
    return None


def run_problem(outcome: Outcome, expected: Path | None) -> str | None:
    """None when ``outcome`` is a correct run that wrote ``expected``; else why not."""
    if outcome.returncode != 0:
        return f"exit {outcome.returncode} where a run was expected: {outcome.refusal_line()[:300]}"
    if TRACEBACK in outcome.text:
        return "a Python traceback in a run that exited 0"
    if expected is not None and not expected.exists():
        return f"exit 0 but {expected} was not written"
    return None


def judge(
    outcome: Outcome, expect: str, names: tuple[str, ...], expected: Path | None
) -> str | None:
    """The outcome against what the probe expects (REFUSAL or RUN); None when as expected."""
    if expect == REFUSAL:
        return refusal_problem(outcome, names)
    return run_problem(outcome, expected)
