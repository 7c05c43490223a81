"""Misleading or leaky errors (issue 14's corpus), through the real CLI (``python -m
nnunet_core``): each malformed input exits 2 with one line naming the file, flag or key, no
traceback, and leaves nothing behind (no new file or folder, no verify.json, no
``predict_from_raw_data_args.json``).

The model folder is built without training: the peer plans file, the raw dataset.json and a
checkpoint file per case. Every broken checkpoint is refused before a network is built."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.helpers.paths import TEST_DATA

DATASET = "Dataset900_Synth"
CONFIG = "3d_fullres"
MODEL = f"nnUNetTrainer__nnUNetPlans__{CONFIG}"
PLANS = TEST_DATA / "plans" / "synth3d_peer900" / "nnUNetPlans.json"
ARGS_JSON = "predict_from_raw_data_args.json"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory, make_raw_dataset) -> Path:
    """raw/, preprocessed/ (empty dataset folder) and results/ with a model folder whose
    fold_0 holds no checkpoint yet (each case writes the one it needs)."""
    root = tmp_path_factory.mktemp("bad_inputs")
    raw = make_raw_dataset(root / "raw" / DATASET, num_training=2, num_test=1, shape=(8, 16, 16))
    (root / "preprocessed" / DATASET).mkdir(parents=True)
    model = root / "results" / DATASET / MODEL
    (model / "fold_0").mkdir(parents=True)
    shutil.copyfile(PLANS, model / "plans.json")
    shutil.copyfile(raw / "dataset.json", model / "dataset.json")
    return root


def run_cli(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    outside = ("nnUNet_raw", "nnUNet_preprocessed", "nnUNet_results")  # only what a case sets
    environment = {k: v for k, v in os.environ.items() if k not in outside}
    environment.update({"OMP_NUM_THREADS": "1", **(env or {})})
    done = subprocess.run(
        [sys.executable, "-m", "nnunet_core", *args],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stderr


def snapshot(root: Path) -> dict[str, int]:
    """Every path under ``root`` with its size (a rewritten file would change it)."""
    return {
        str(p.relative_to(root)): (p.lstat().st_size if not p.is_dir() else -1)
        for p in sorted(root.rglob("*"))
    }


def assert_one_line(code: int, err: str, command: str, *needles: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith(f"nnunet-core {command}: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def roots(root: Path, **override: str) -> list[str]:
    given = {
        "raw": str(root / "raw"),
        "preprocessed": str(root / "preprocessed"),
        "results": str(root / "results"),
        **override,
    }
    return [flag for kind, path in given.items() if path for flag in (f"--{kind}", path)]


# ---------------------------------------------------------------- roots that must exist

MISSING = "missing_root/does/not/exist"

# id -> (command line without roots, the root that is missing, given as a flag or as the env var)
MISSING_ROOTS: dict[str, tuple[list[str], str, bool]] = {
    "verify_raw_flag": (["verify", "-d", DATASET, "-np", "1"], "raw", True),
    "verify_raw_env": (["verify", "-d", DATASET, "-np", "1"], "raw", False),
    "fingerprint_raw_flag": (["fingerprint", "-d", DATASET, "-np", "1"], "raw", True),
    "plan_preprocessed_flag": (["plan", "-d", DATASET], "preprocessed", True),
    "preprocess_preprocessed_flag": (
        ["preprocess", "-d", DATASET, "-c", CONFIG, "-np", "1"],
        "preprocessed",
        True,
    ),
    "train_preprocessed_flag": (["train", DATASET, CONFIG, "0"], "preprocessed", True),
    "train_preprocessed_env": (["train", DATASET, CONFIG, "0"], "preprocessed", False),
    "predict_results_flag": (
        f"predict -i raw/{DATASET}/imagesTs -o out -d {DATASET} -c {CONFIG}".split(),
        "results",
        True,
    ),
    "report_results_flag": (["report", "-d", DATASET], "results", True),
}


@pytest.mark.parametrize("case", list(MISSING_ROOTS), ids=list(MISSING_ROOTS))
def test_a_missing_input_root_is_named_and_not_created(root: Path, case: str) -> None:
    args, kind, as_flag = MISSING_ROOTS[case]
    missing = root / MISSING / kind
    before = snapshot(root)
    if as_flag:
        code, err = run_cli(root, *args, *roots(root, **{kind: str(missing)}))
        given_as = f"--{kind} {missing}"
    else:
        env = {"raw": "nnUNet_raw", "preprocessed": "nnUNet_preprocessed"}[kind]
        code, err = run_cli(root, *args, *roots(root, **{kind: ""}), env={env: str(missing)})
        given_as = f"{env}={missing}"
    assert_one_line(code, err, args[0], given_as, "no such folder", f"{kind} root")
    assert not (root / MISSING).exists()
    assert snapshot(root) == before


def test_an_output_root_is_still_created(root: Path, tmp_path: Path) -> None:
    """verify writes to the preprocessed root: a new one is created, as upstream does."""
    target = tmp_path / "new_preprocessed"
    args = f"verify -d {DATASET} -np 1 --raw {root / 'raw'} --preprocessed {target}"
    code, err = run_cli(root, *args.split())
    assert code == 0, err
    assert (target / DATASET / "verify.json").is_file()


# ---------------------------------------------------------------- predict: -o and -chk


def _write(content: bytes) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(content)


def _truncated(path: Path) -> None:
    torch.save({"network_weights": {"w": torch.zeros(2000)}}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _foreign_object(path: Path) -> None:
    torch.save({"network_weights": {}, "payload": Path("/etc")}, path)  # not allow-listed


def _plain_pickle(path: Path) -> None:
    path.write_bytes(pickle.dumps({"network_weights": {}}, protocol=4))


def _no_weights(path: Path) -> None:
    torch.save({"current_epoch": 3}, path)


class _RunsACommand:
    """Unpickling this calls os.system: a hostile checkpoint (it would create the marker file
    under the test root, which the snapshot would show)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _hostile(path: Path) -> None:
    payload = _RunsACommand(path.parent / "PWNED")
    torch.save({"network_weights": {}, "init_args": payload}, path)


# id -> (how to break the checkpoint, what the line says about it)
BROKEN_CHECKPOINTS: dict[str, tuple[Callable[[Path], None], str]] = {
    "empty_file": (_write(b""), "empty or truncated file"),
    "text_file": (_write(b"not a checkpoint at all"), "corrupted or not a checkpoint"),
    "truncated_archive": (_truncated, "not a torch checkpoint archive"),
    "foreign_object": (_foreign_object, "pathlib.PosixPath"),
    "plain_pickle": (_plain_pickle, "corrupted or not a checkpoint"),
    "no_network_weights": (_no_weights, "no 'network_weights' entry"),
    "hostile_os_system": (_hostile, "needs posix.system, which no nnU-Net checkpoint holds"),
}


def predict_args(root: Path, output: Path, *extra: str) -> list[str]:
    images = root / "raw" / DATASET / "imagesTs"
    args = ["predict", "-i", str(images), "-o", str(output), "-d", DATASET, "-c", CONFIG]
    return [*args, "-f", "0", "-device", "cpu", "-npp", "0", "-nps", "0", *extra, *roots(root)]


@pytest.mark.parametrize("case", list(BROKEN_CHECKPOINTS), ids=list(BROKEN_CHECKPOINTS))
def test_a_broken_checkpoint_is_exit_2_and_writes_nothing(root: Path, case: str) -> None:
    breaker, needle = BROKEN_CHECKPOINTS[case]
    name = f"checkpoint_{case}.pth"
    path = root / "results" / DATASET / MODEL / "fold_0" / name
    breaker(path)
    output = root / f"pred_{case}"
    before = snapshot(root)
    code, err = run_cli(root, *predict_args(root, output, "-chk", name))
    line = assert_one_line(code, err, "predict", f"{path}:", needle, "-chk")
    assert "weights_only" not in err and "trusted source" not in err, line
    assert not output.exists()  # no folder, hence no predict_from_raw_data_args.json
    assert snapshot(root) == before


def test_a_broken_checkpoint_keeps_an_existing_output_folder_as_it_was(root: Path) -> None:
    path = root / "results" / DATASET / MODEL / "fold_0" / "checkpoint_kept.pth"
    path.write_bytes(b"garbage")
    output = root / "pred_existing"
    output.mkdir()
    (output / "earlier.nii.gz").write_bytes(b"x")
    code, err = run_cli(root, *predict_args(root, output, "-chk", path.name))
    assert_one_line(code, err, "predict", f"{path}:")
    assert sorted(p.name for p in output.iterdir()) == ["earlier.nii.gz"]
    assert not (output / ARGS_JSON).exists()


# id -> (what -o is, made under root, and what the line says)
BAD_OUTPUTS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "output_is_a_file": (
        lambda root: _file(root / "pred_is_a_file.nii.gz"),
        "exists and is not a folder",
    ),
    "output_below_a_file": (
        lambda root: _file(root / "plain_file") / "predictions",
        "is a file, not a folder",
    ),
}


def _file(path: Path) -> Path:
    path.write_bytes(b"keep me")
    return path


@pytest.mark.parametrize("case", list(BAD_OUTPUTS), ids=list(BAD_OUTPUTS))
def test_an_output_that_cannot_be_a_folder_is_one_line(root: Path, case: str) -> None:
    make, needle = BAD_OUTPUTS[case]
    output = make(root)
    before = snapshot(root)
    code, err = run_cli(root, *predict_args(root, output))
    assert_one_line(code, err, "predict", f"-o {output}", needle)
    assert snapshot(root) == before


def test_a_model_folder_dataset_json_with_a_non_integer_label_is_refused(root: Path) -> None:
    model = root / "results" / DATASET / MODEL
    copy = root / "results" / "bad_labels_model"
    shutil.copytree(model, copy)
    content = json.loads((copy / "dataset.json").read_text())
    content["labels"] = {**content["labels"], "lesion": 1.5}
    (copy / "dataset.json").write_text(json.dumps(content))
    (copy / "fold_0" / "checkpoint_final.pth").write_bytes(b"never read")
    output = root / "pred_bad_labels"
    images = root / "raw" / DATASET / "imagesTs"
    before = snapshot(root)
    args = f"predict -i {images} -o {output} -m {copy} -f 0 -device cpu"
    code, err = run_cli(root, *args.split())
    assert_one_line(code, err, "predict", f"{copy / 'dataset.json'}:", "labels['lesion']", "1.5")
    assert snapshot(root) == before


# ---------------------------------------------------------------- symbolic links among raw files


def _dangling(path: Path) -> str:
    path.unlink()
    path.symlink_to("/nonexistent/elsewhere.nii.gz")
    return "is a dangling symbolic link -> /nonexistent/elsewhere.nii.gz"


def _loop(path: Path) -> str:
    path.unlink()
    partner = path.with_name(f"loop_partner_{path.name}")
    partner.symlink_to(path.name)
    path.symlink_to(partner.name)
    return "is a symbolic link loop"


def _self_loop(path: Path) -> str:
    path.unlink()
    path.symlink_to(path.name)
    return "is a symbolic link loop"


def _folder(path: Path) -> str:
    path.unlink()
    path.mkdir()
    return "is a folder, not a file"


# id -> (file below the dataset, how it is broken)
BAD_LINKS: dict[str, tuple[str, Callable[[Path], str]]] = {
    "image_dangling_link": ("imagesTr/synth_000_0000.nii.gz", _dangling),
    "label_dangling_link": ("labelsTr/synth_001.nii.gz", _dangling),
    "label_link_loop": ("labelsTr/synth_000.nii.gz", _loop),
    "image_link_to_itself": ("imagesTr/synth_001_0000.nii.gz", _self_loop),
    "label_is_a_folder": ("labelsTr/synth_001.nii.gz", _folder),
}


@pytest.mark.parametrize("case", list(BAD_LINKS), ids=list(BAD_LINKS))
def test_a_broken_link_says_what_is_wrong(tmp_path: Path, make_raw_dataset, case: str) -> None:
    relative, breaker = BAD_LINKS[case]
    dataset = make_raw_dataset(
        tmp_path / "raw" / DATASET, num_training=2, num_test=0, shape=(8, 16, 16)
    )
    needle = breaker(dataset / relative)
    before = snapshot(tmp_path)
    code, err = run_cli(tmp_path, "verify", "-d", DATASET, "-np", "1", *roots(tmp_path))
    lines = err.strip().splitlines()
    assert code == 2, err
    assert "Traceback" not in err and "missing" not in err, err
    naming = [line for line in lines if relative in line]
    assert len(naming) == 1, err
    problem = naming[0]
    assert problem.startswith("nnunet-core verify: error: case synth_00"), err
    assert f"{relative} {needle}" in problem, problem
    assert snapshot(tmp_path) == before  # no preprocessed root, no verify.json
