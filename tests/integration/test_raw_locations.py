"""Where the raw data is, said before any job (issue 36), through the real Snakemake CLI.

A wrong dataset id and an empty ``raw_root`` (the README's own-data line with ``$nnUNet_raw``
unset) stop the workflow while the Snakefile is parsed, with one line naming the key and the
value (a wrong id: the datasets that are there), no MissingInputException, nothing under
work_dir, and no fallback to work_dir/raw. A test set without images is said once at the start,
and the report job is told why. Dry runs only, a few seconds each; every other case of these
checks (a raw root that does not exist, a missing imagesTs) is in
tests/unit/workflow/test_check_config.py and test_workflow_runs.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import REPO
from tests.helpers.workflow import job_counts, snakemake, tiny_config

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
HIPPOCAMPUS = "Dataset004_Hippocampus"
# The README's own-data line (README.md, "Your own data"), as a dry run.
OWN_DATA = (
    f"{SNAKEMAKE} -n --snakefile {REPO / 'Snakefile'} --cores 2 --config "
    'dataset="{id: 4, name: Hippocampus, raw_root: $nnUNet_raw}"'
)


def _assert_one_clear_line(output: str, message: str) -> None:
    """The one line, without Snakemake's `ConfigurationError in file ...` header or frames."""
    assert "ConfigurationError" not in output and 'File "' not in output, output
    assert message in output.splitlines(), output
    for text in ("MissingInputException", "InputFunctionException", "Traceback"):
        assert text not in output, output


def test_the_own_data_line_with_nnunet_raw_unset_names_the_key(tmp_path: Path) -> None:
    """`raw_root: $nnUNet_raw` with the variable unset reads as `raw_root: null`; it once ran on
    work/raw, a folder the user never chose."""
    (tmp_path / "work" / "raw" / HIPPOCAMPUS).mkdir(parents=True)  # the old fallback's folder
    env = {k: v for k, v in os.environ.items() if k != "nnUNet_raw"}
    result = subprocess.run(
        ["bash", "-c", OWN_DATA], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    _assert_one_clear_line(
        output,
        f"config dataset.raw_root: null is empty: set it to the folder that "
        f"holds {HIPPOCAMPUS}/ (your nnUNet_raw; an unset $nnUNet_raw on the command line leaves "
        "it empty)",
    )
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["raw"]


def _real_dataset(work: Path, raw_root: Path, dataset_id: int = 900) -> dict:
    config = tiny_config(work, id=dataset_id, raw_root=str(raw_root))
    config["dataset"]["synthetic"]["enabled"] = False
    return config


def test_a_wrong_dataset_id_lists_the_datasets_under_raw_root(tmp_path: Path) -> None:
    raw = tmp_path / "nnUNet_raw"
    for name in (HIPPOCAMPUS, "Dataset900_Synth"):
        (raw / name).mkdir(parents=True)
    result = snakemake(tmp_path, _real_dataset(tmp_path / "work", raw, 5), "-n", check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    _assert_one_clear_line(
        result.stdout + result.stderr,
        f"config dataset: Dataset005_Synth is not in raw_root {raw} "
        f"(datasets there: {HIPPOCAMPUS}, Dataset900_Synth)",
    )
    assert not (tmp_path / "work").exists()


def test_no_test_images_is_said_once_and_given_to_the_report(
    tmp_path: Path, make_raw_dataset
) -> None:
    raw = tmp_path / "raw"
    folder = make_raw_dataset(raw / "Dataset900_Synth", num_test=0)
    shutil.rmtree(folder / "imagesTs", ignore_errors=True)
    shutil.rmtree(folder / "labelsTs", ignore_errors=True)
    (folder / "imagesTs").mkdir()  # empty: once taken for a test set
    result = snakemake(tmp_path, _real_dataset(tmp_path / "work", raw), "-n")
    output = result.stdout + result.stderr
    why = f"{folder / 'imagesTs'} is empty"
    notice = f"no test images: test prediction and evaluation skipped ({why})"
    assert output.splitlines().count(notice) == 1, output
    counts = job_counts(output)
    assert counts.get("report") == 1 and "postprocess" not in counts, counts
    report = re.search(r"nnunet-core report .*$", output, re.M).group(0)
    assert f"--test-set-note '{notice}'" in report, report
