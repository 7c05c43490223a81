"""Installing and predicting with shared models through the real command line (issue 51 part 3).

- A killed install's staging folder (a real process killed inside ``staging_folder``) is removed
  by the next ``install-pretrained-model-from-zip``; the one of an install still running beside
  it (its lock held) stays, however old it is.
- The takeover probe: a two-member zip that would make an installed built-in model run its code
  is refused with exit 2 and the results tree byte for byte unchanged; the built-in model still
  predicts without running anything.
- A model carrying its trainer's code (a file whose module body writes a marker) installs with a
  line naming the file and its sha256; ``predict`` refuses it in one line without
  ``--trust-model-code`` (nothing runs, no ``-o``), and with it names the code and predicts.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from nnunet_core.model_sharing.install_staging import LOCK_NAME, STAGING_PREFIX
from tests.helpers.model_sharing import files_under
from tests.helpers.training import cli

DATASET = "Dataset900_Synth"
BUILTIN = "nnUNetTrainer__nnUNetPlans__3d_tiny"
USER = "MarkerTrainer__nnUNetPlans__3d_tiny"
INSTALL = "install-pretrained-model-from-zip"

# enters a real staging folder, writes into it, reports it, then waits for stdin or kills itself
HOLD_STAGING = """
import os, signal, sys
from pathlib import Path
from nnunet_core.model_sharing.install_staging import staging_folder
with staging_folder(Path(sys.argv[1])) as staging:
    (staging.tree / "Dataset1_A").mkdir()
    (staging.tree / "Dataset1_A" / "half.pth").write_bytes(b"x" * 100000)
    print(staging.folder, flush=True)
    if sys.argv[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.stdin.read()
"""


def env_for(results: Path) -> dict[str, str]:
    return {**os.environ, "nnUNet_results": str(results), "OMP_NUM_THREADS": "1"}


def one_line_error(result: subprocess.CompletedProcess, command: str) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"nnunet-core {command}: error: "), result.stderr
    return result.stderr


def small_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as handle:
        handle.writestr("Dataset2_B/M/plans.json", "{}")
    return path


# ------------------------------------------------------------------------------ staging
def test_a_killed_installs_staging_is_removed_by_the_next_install(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    held = subprocess.run(
        [sys.executable, "-c", HOLD_STAGING, str(results), "kill"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert held.returncode == -signal.SIGKILL, held.stderr
    stale = Path(held.stdout.strip())
    assert stale.parent == results and stale.name.startswith(STAGING_PREFIX)
    assert (stale / "tree" / "Dataset1_A" / "half.pth").is_file()
    result = cli(env_for(results), INSTALL, str(small_zip(tmp_path / "m.zip")))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"removed {stale}, left by an install that was stopped"
    assert sorted(p.name for p in results.iterdir()) == ["Dataset2_B"]


def test_a_running_installs_staging_is_never_removed(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_STAGING, str(results), "wait"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        live = Path(holder.stdout.readline().strip())
        old = time.time() - 3600  # far beyond the creation grace: only its lock protects it
        os.utime(live, (old, old))
        result = cli(env_for(results), INSTALL, str(small_zip(tmp_path / "m.zip")))
        assert result.returncode == 0, result.stderr
        assert "removed" not in result.stdout
        assert (live / LOCK_NAME).is_file() and (
            live / "tree" / "Dataset1_A" / "half.pth"
        ).is_file()
    finally:
        holder.communicate("", timeout=60)
    assert holder.returncode == 0
    assert sorted(p.name for p in results.iterdir()) == ["Dataset2_B"]  # it removed its own


def test_an_unlocked_staging_folder_of_a_live_process_waits_out_the_grace(tmp_path: Path) -> None:
    """The instant between creating a staging folder and locking it: a live process, a young
    folder without a lock, is left alone; once older than the grace it is a leftover."""
    import socket

    results = tmp_path / "results"
    host = "".join(c if c.isalnum() or c == "." else "_" for c in socket.gethostname())
    young = results / f"{STAGING_PREFIX}{host}-{os.getpid()}-abc123"
    young.mkdir(parents=True)
    archive = small_zip(tmp_path / "m.zip")
    result = cli(env_for(results), INSTALL, str(archive))
    assert result.returncode == 0 and young.is_dir(), result.stderr
    old = time.time() - 3600
    os.utime(young, (old, old))
    result = cli(env_for(results), INSTALL, str(archive))
    assert result.returncode == 0 and f"removed {young}" in result.stdout
    assert not young.exists()


# ------------------------------------------------------------------- code and consent
MARKER_TRAINER = """from pathlib import Path

from nnunet_core import Trainer

Path({marker!r}).write_text("trainer code ran")


class MarkerTrainer(Trainer):
    pass
"""


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, make_raw_dataset) -> dict:
    """A built-in model and a MarkerTrainer model (same weights) in ``source/``, zipped."""
    from tests.helpers.model_folder import make_model

    root = tmp_path_factory.mktemp("install_safety")
    raw = make_raw_dataset(root / "raw" / DATASET, num_training=1, num_test=1)
    dataset_json = json.loads((raw / "dataset.json").read_text())
    builtin = make_model(root / "source", dataset_json, "3d_tiny", [0])
    user = builtin.with_name(USER)
    shutil.copytree(builtin, user)
    marker = root / "marker.txt"
    code = MARKER_TRAINER.format(marker=str(marker)).encode()
    (user / "trainer_source").mkdir()
    (user / "trainer_source" / "marker_trainer.py").write_bytes(code)
    record = {
        "trainer": "/elsewhere/marker_trainer.py:MarkerTrainer",
        "class": "MarkerTrainer",
        "found_by": "file",
        "module": None,
        "original_file": "/elsewhere/marker_trainer.py",
        "source": "trainer_source/marker_trainer.py",
        "sha256": hashlib.sha256(code).hexdigest(),
    }
    (user / "trainer.json").write_text(json.dumps(record))
    archive = root / "user_model.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for path in sorted(user.rglob("*")):
            if path.is_file():
                handle.write(path, path.relative_to(root / "source").as_posix())
    return {
        "root": root,
        "images": raw / "imagesTs",
        "builtin": builtin,
        "archive": archive,
        "marker": marker,
        "sha256": record["sha256"],
    }


def predict(results: Path, images: Path, output: Path, *flags: str):
    args = ["-i", str(images), "-o", str(output), "-f", "0", "-device", "cpu", "-npp", "0"]
    return cli(env_for(results), "predict", *args, "-nps", "0", "--disable_progress_bar", *flags)


@pytest.mark.slow
def test_a_zip_cannot_take_over_an_installed_builtin_model(shared: dict, tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(shared["builtin"].parent, results / DATASET)
    (results / "decoy.txt").write_text("the user's file")
    takeover = tmp_path / "takeover.zip"
    marker = tmp_path / "takeover_ran"
    code = MARKER_TRAINER.format(marker=str(marker))
    with zipfile.ZipFile(takeover, "w") as handle:
        handle.writestr(f"{DATASET}/{BUILTIN}/trainer.json", json.dumps({"class": "MarkerTrainer"}))
        handle.writestr(f"{DATASET}/{BUILTIN}/trainer_source/marker_trainer.py", code)
    before = files_under(results)
    for flags in ((), ("--overwrite",)):
        err = one_line_error(cli(env_for(results), INSTALL, str(takeover), *flags), INSTALL)
        assert "brings trainer code into" in err and "built-in trainer nnUNetTrainer" in err
        assert files_under(results) == before
    result = predict(results, shared["images"], tmp_path / "out", "-d", "900", "-c", "3d_tiny")
    assert result.returncode == 0, result.stderr
    assert "trainer code" not in result.stderr and not marker.exists()


@pytest.mark.slow
def test_carried_code_runs_only_with_consent(shared: dict, tmp_path: Path) -> None:
    shared["marker"].unlink(missing_ok=True)
    results = tmp_path / "results"
    installed = cli(env_for(results), INSTALL, str(shared["archive"]))
    assert installed.returncode == 0, installed.stderr
    model = results / DATASET / USER
    source = model / "trainer_source" / "marker_trainer.py"
    described = f"{source} (sha256 {shared['sha256']})"
    assert installed.stdout.splitlines()[-1] == (
        f"model {model} carries trainer code {described}; predict runs it only with "
        "--trust-model-code"
    )
    named = ("-d", "900", "-c", "3d_tiny", "-tr", "MarkerTrainer")
    refused = predict(results, shared["images"], tmp_path / "refused", *named)
    err = one_line_error(refused, "predict")
    assert f"model {model} carries trainer code {described}" in err
    assert "pass --trust-model-code if you trust it" in err
    assert not shared["marker"].exists() and not (tmp_path / "refused").exists()
    output = tmp_path / "trusted"
    trusted = cli(env_for(results), "predict-from-modelfolder", "-m", str(model), "-i",
                  str(shared["images"]), "-o", str(output), "-f", "0", "-device", "cpu", "-npp",
                  "0", "-nps", "0", "--disable_progress_bar", "--trust-model-code")  # fmt: skip
    assert trusted.returncode == 0, trusted.stderr
    assert (
        f"running the trainer code carried by model {model}: {described} (--trust-model-code "
        "given)\n"
    ) in trusted.stderr
    assert shared["marker"].read_text() == "trainer code ran"
    assert len(list(output.glob("*.nii.gz"))) == 1
