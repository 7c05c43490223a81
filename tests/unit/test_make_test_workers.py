"""`make test` spreads the suite over pytest-xdist workers; the end-to-end files rely on each file
staying on one worker, in its order: their module fixtures are whole workflow runs (minutes each)
and some tests read what an earlier test of their file left. pytest 9.2 with xdist 3.8 silently
stopped honouring `--dist loadgroup` markers, so tests of one file ran on several workers and each
rebuilt the file's workflow run (the paper-mode run three times). This runs the Makefile's own
worker options on a small suite and checks that a file's module fixture is built once and its
tests run in order on one worker."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SHARED_FILE = """
import os
import pytest

LOG = os.environ["WORKER_LOG"]

@pytest.fixture(scope="module")
def workflow_run():
    with open(LOG, "a") as log:
        log.write("built\\n")
    return 1

@pytest.mark.parametrize("step", range(6))
def test_step(workflow_run, step):
    with open(LOG, "a") as log:
        log.write(f"step {step} {os.environ['PYTEST_XDIST_WORKER']}\\n")
"""


def _make_test_worker_options() -> list[str]:
    """The `-n` and `--dist` options of the Makefile's `test` recipe, `$(TEST_JOBS)` resolved."""
    makefile = (ROOT / "Makefile").read_text()
    jobs = re.search(r"^TEST_JOBS \?= (\d+)$", makefile, re.M).group(1)
    recipe = re.search(r"^test: .*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    workers = re.search(r"^.*-n \$\(TEST_JOBS\).*$", recipe, re.M).group(0)
    dist = re.search(r"--dist (\S+)", workers).group(1)
    keep_order = ["--no-loadscope-reorder"] if "--no-loadscope-reorder" in workers else []
    return ["-n", jobs, "--dist", dist, *keep_order]


def _repository_addopts() -> str:
    """pyproject's pytest ``addopts`` (the import mode among them), so that the small suite is
    collected as the real one is."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    return re.search(r'^addopts = "(.+)"$', pyproject, re.M).group(1)


def test_a_files_module_fixture_is_built_once_and_its_tests_run_in_order_on_one_worker(
    tmp_path: Path,
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text(f"[pytest]\naddopts = {_repository_addopts()}\n")
    (suite / "test_shared.py").write_text(SHARED_FILE)
    for name in ("a", "b", "c", "d"):
        (suite / f"test_other_{name}.py").write_text("def test_quick():\n    pass\n")
    log = tmp_path / "log.txt"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         *_make_test_worker_options(), str(suite)],
        cwd=suite, env={"WORKER_LOG": str(log), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = log.read_text().splitlines()
    assert lines.count("built") == 1, lines
    steps = [line.split() for line in lines if line.startswith("step")]
    assert [int(step) for _, step, _ in steps] == list(range(6))
    assert len({worker for _, _, worker in steps}) == 1, steps


ORDERING_CONFTEST = """
def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.path.name != "test_long.py")  # as tests/conftest.py does
"""


def test_files_start_in_collection_order_not_by_their_number_of_tests(tmp_path: Path) -> None:
    """tests/conftest.py puts the longest files first so that they start at once; xdist's
    loadfile would instead hand out the files with the most tests first (its default reorder),
    and the suite's longest test, a file of one test, started last."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text(f"[pytest]\naddopts = {_repository_addopts()}\n")
    (suite / "conftest.py").write_text(ORDERING_CONFTEST)
    log = tmp_path / "log.txt"
    body = (
        "import os\n\ndef test_{i}():\n    open(os.environ['WORKER_LOG'], 'a').write('{name}\\n')\n"
    )
    (suite / "test_long.py").write_text(body.format(i=0, name="long"))
    (suite / "test_many.py").write_text(
        "\n\n".join(body.format(i=i, name="many") for i in range(8))
    )
    options = _make_test_worker_options()
    options[1] = "1"  # one worker: it runs the files in the order they are handed out
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options, str(suite)],
        cwd=suite, env={"WORKER_LOG": str(log), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert log.read_text().splitlines()[0] == "long"
