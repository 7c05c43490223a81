"""`snakemake --lint` without its one deliberate remark; used by `make lint` and the lint test.

Every rule runs the same installed package, so the "Specify a conda environment or container" lint
is expected (docs/development.md, "Lint and tests"). Anything else, or a workflow that does not
parse, fails. (`snakemake --lint json` prints text in Snakemake 9, so the text is parsed.) The
workflow is linted with the tests' base scenario, `.test/demo/config.yaml`, in a temporary working
directory, so nothing is written into the repository.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / ".test" / "demo" / "config.yaml"
DELIBERATE = "* Specify a conda environment or container"


def unexpected_lints(output: str) -> list[str]:
    """Lint lines ("* ...") other than the deliberate one, each after its "Lints for" header."""
    found, header = [], ""
    for line in output.splitlines():
        stripped = line.strip()
        if stripped.startswith("Lints for"):
            header = stripped
        elif stripped.startswith("* ") and not stripped.startswith(DELIBERATE):
            found.append(f"{header} {stripped}".strip())
    return found


def main() -> int:
    snakemake = Path(sys.executable).parent / "snakemake"
    with tempfile.TemporaryDirectory(prefix="lint_workflow_") as workdir:
        command = [
            str(snakemake),
            "--lint",
            "--snakefile",
            str(REPO / "Snakefile"),
            "--directory",
            workdir,
            "--configfile",
            str(SCENARIO),
        ]
        result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    output = result.stdout + result.stderr
    deliberate = sum(1 for line in output.splitlines() if line.strip().startswith(DELIBERATE))
    if result.returncode != 0 and deliberate == 0:
        print(output, file=sys.stderr)
        print("snakemake --lint: the workflow did not load (see above)", file=sys.stderr)
        return 1
    unexpected = unexpected_lints(output)
    if unexpected:
        print("\n".join(unexpected), file=sys.stderr)
        print(f"snakemake --lint: {len(unexpected)} lint(s) to fix", file=sys.stderr)
        return 1
    print(f"snakemake --lint: clean ({deliberate} rules without conda/container, deliberate)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
