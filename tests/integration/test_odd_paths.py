"""Paths a shell would misread, through one real tiny workflow run (issue 51).

The work_dir, the raw root (a dataset ``nnunet-core synthesize`` wrote there first), the user
trainer's file and ``training.gpu_lock_dir``, and so every log and prediction folder, hold spaces,
single and double quotes, ``$(touch ...)``, backticks, ``;``, ``|``, unicode and a component
starting with ``-``. The run (3d_fullres, fold 0, 1 epoch of 2 iterations) must end with the final
predictions, the test summary and the report; no command in a path may run (no marker file
anywhere), and the files named like a path's first word (``<tmp>/odd`` beside
``<tmp>/odd wd ...``), which an unquoted ``> {log}`` or ``rm -rf`` would hit, stay as they were.
A relative work_dir starting with ``-`` is refused in one line (nnunet_core.workflow.path_values).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nnunet_core.layout.predictions import FINAL_PREDICTIONS_FOLDER, TEST_SUMMARY_JSON
from nnunet_core.layout.results import REPORT_PAGE_MD
from nnunet_core.workflow import flags
from tests.helpers.paths import REPO
from tests.helpers.workflow import DATASET, snakemake, tiny_config

pytestmark = pytest.mark.slow

# Each $(...) and `...` would create its marker (relative: in the job's folder, the run's root).
WORK_NAME = "odd wd 'q' \"dq\" $(touch INJ_WD) `touch INJ_WD_BT` ;x |y ünï ✓"
RAW_NAME = "raw r'q' \"dq\" $(touch INJ_RAW) `touch INJ_RAW_BT` ;x |y ünï"
LOCK_NAME = "locks l'q' \"dq\" $(touch INJ_LOCK) `touch INJ_LOCK_BT` ;x |y ünï"
TRAINER_DIR = "tr 'q' \"dq\" $(touch 'INJ_TR') `touch 'INJ_TR_BT'`; x|y -ünï"
MARKERS = {
    "INJ_WD",
    "INJ_WD_BT",
    "INJ_RAW",
    "INJ_RAW_BT",
    "INJ_LOCK",
    "INJ_LOCK_BT",
    "INJ_TR",
    "INJ_TR_BT",
}
# Files named like the first word of each odd folder.
DECOYS = ("odd", "raw", "locks")
TRAINER_SOURCE = '''"""The built-in trainer under a user's name, from a file at an odd path."""

from nnunet_core import Trainer


class OddTrainer(Trainer):
    """Nothing overridden: the point is where the file is."""
'''


def synthesize(raw_root: Path, synthetic: dict) -> None:
    """The demo's raw dataset, written by the real CLI (an argument list) into ``raw_root``."""
    command = [
        str(Path(sys.executable).parent / "nnunet-core"),
        "synthesize",
        "--output",
        str(raw_root / DATASET),
        *shlex.split(flags.synthetic_options(synthetic)),
    ]
    subprocess.run(command, check=True, capture_output=True, text=True)


def found_markers(root: Path) -> list[str]:
    """Every marker file under ``root``, and in the folders a relative ``touch`` could reach."""
    found = [
        os.path.join(folder, name)
        for folder, _, files in os.walk(root)
        for name in files
        if name in MARKERS
    ]
    for folder in {Path.cwd(), REPO, Path.home()}:
        found += [str(folder / name) for name in MARKERS if (folder / name).exists()]
    return found


@pytest.fixture(scope="module")
def odd_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("odd_paths")
    decoys = {}
    for name in DECOYS:
        (root / name).write_text(f"the user's own file {name}\n")
        decoys[name] = ((root / name).read_bytes(), (root / name).stat().st_mtime_ns)
    work = root / WORK_NAME / "-lead"
    raw_root = root / RAW_NAME / "-r"
    config = tiny_config(work, raw_root=str(raw_root))
    synthesize(raw_root, config["dataset"]["synthetic"])
    config["dataset"]["synthetic"]["enabled"] = False
    trainer_file = root / TRAINER_DIR / "-t" / "odd_trainer.py"
    trainer_file.parent.mkdir(parents=True)
    trainer_file.write_text(TRAINER_SOURCE)
    config["planning"]["configurations"] = ["3d_fullres"]
    config["training"].update(
        trainer=f"{trainer_file}:OddTrainer",
        gpu_lock_dir=str(root / LOCK_NAME / "-l"),
        folds=[0],
        epochs=1,
        iterations_per_epoch=2,
        val_iterations_per_epoch=1,
        retries=0,
    )
    started = time.monotonic()
    result = snakemake(root, config)
    seconds = time.monotonic() - started
    print(f"odd-paths workflow run: {seconds:.0f} s")
    return {
        "root": root,
        "work": work,
        "config": config,
        "decoys": decoys,
        "output": result.stdout + result.stderr,
    }


def test_the_run_ends_with_predictions_test_summary_and_report(odd_run: dict) -> None:
    work = odd_run["work"]
    predictions = work / "predictions" / DATASET
    final = sorted((predictions / FINAL_PREDICTIONS_FOLDER).glob("*.nii.gz"))
    assert len(final) == 2, odd_run["output"]  # the demo's 2 test cases
    assert (predictions / TEST_SUMMARY_JSON).is_file()
    assert (work / "results" / DATASET / "report" / REPORT_PAGE_MD).is_file()
    model = work / "results" / DATASET / "OddTrainer__nnUNetPlans__3d_fullres"
    assert (model / "fold_0" / "checkpoint_final.pth").is_file()
    assert not list(predictions.glob("*.partial")), "a staging folder was left behind"
    logs = {p.name for p in (work / "logs" / DATASET).iterdir()}
    assert {"train_3d_fullres_fold0.log", "postprocess.log"} <= logs, logs


def test_no_command_in_a_path_ran(odd_run: dict) -> None:
    assert found_markers(odd_run["root"]) == []


def test_files_named_like_a_paths_first_word_are_untouched(odd_run: dict) -> None:
    for name, (content, mtime) in odd_run["decoys"].items():
        path = odd_run["root"] / name
        assert (path.read_bytes(), path.stat().st_mtime_ns) == (content, mtime), name


def test_the_train_command_passed_each_odd_value_as_one_argument(odd_run: dict) -> None:
    commands = [
        shlex.split(line.removeprefix("Shell command: "))
        for line in odd_run["output"].splitlines()
        if line.startswith("Shell command: ") and "nnunet-core train " in line
    ]
    assert commands, odd_run["output"]
    training = odd_run["config"]["training"]
    for words in commands:
        assert words[words.index("-tr") + 1] == training["trainer"]
        assert words[words.index("--gpu-lock-dir") + 1] == training["gpu_lock_dir"]
        assert words[words.index("--raw") + 1] == odd_run["config"]["dataset"]["raw_root"]


def test_a_relative_work_dir_starting_with_a_dash_is_refused_in_one_line(tmp_path: Path) -> None:
    result = snakemake(tmp_path, tiny_config(Path("-wd")), "-n", check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    line = "config work_dir: '-wd' starts with '-', which a command reads as an option: "
    assert f"{line}give an absolute path" in output.splitlines(), output
    assert not (tmp_path / "-wd").exists()
