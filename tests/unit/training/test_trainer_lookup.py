"""Naming a user's trainer (module:Class, file.py:Class, nnUNet_extTrainer) and the one-line
errors when its code cannot be found or imported: real files, real imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nnunet_core import Trainer
from nnunet_core.errors import ConfigurationError
from nnunet_core.training.trainer.lookup import check_trainer_name, resolve_trainer

GOOD = "from nnunet_core import Trainer\n\n\nclass MyTrainer(Trainer):\n    pass\n"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_a_file_path_names_the_class_and_the_results_folder(tmp_path: Path) -> None:
    from nnunet_core.layout.results import TrainedModel

    path = write(tmp_path, "mine.py", GOOD)
    cls, code = resolve_trainer(f"{path}:MyTrainer")
    assert issubclass(cls, Trainer) and cls.__name__ == "MyTrainer"
    assert code is not None and (code.found_by, code.file) == ("file", path)
    model = TrainedModel("3d_fullres", "nnUNetPlans", f"{path}:MyTrainer")
    assert model.identifier == "MyTrainer__nnUNetPlans__3d_fullres"  # upstream's naming


def test_a_module_name_is_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "lab_trainers"
    package.mkdir()
    write(package, "__init__.py", "")
    write(package, "losses.py", GOOD)
    monkeypatch.syspath_prepend(str(tmp_path))
    cls, code = resolve_trainer("lab_trainers.losses:MyTrainer")
    assert cls.__name__ == "MyTrainer" and code is not None and code.found_by == "module"


def test_a_bare_name_is_found_in_the_ext_trainer_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    (second / "deep").mkdir(parents=True)
    first.mkdir()
    write(first, "unrelated.py", "raise RuntimeError('never imported')\n")
    path = write(second / "deep", "mine.py", GOOD)
    monkeypatch.setenv("nnUNet_extTrainer", f"{first}:{second}")
    cls, code = resolve_trainer("MyTrainer")
    assert cls.__name__ == "MyTrainer" and code is not None
    assert (code.found_by, code.file) == ("nnUNet_extTrainer", path)
    assert resolve_trainer("nnUNetTrainer_5epochs") == (Trainer, None)  # built-ins first


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        pytest.param(
            "from nnunet_core import Trainer\n\nclass MyTrainer(Trainer)\n    pass\n",
            "MyTrainer",
            "bad.py:3: SyntaxError: expected ':'",
            id="syntax-error",
        ),
        pytest.param(
            GOOD,
            "Missing",
            "bad.py:1: defines no class Missing (its classes: MyTrainer at line 4)",
            id="no-class",
        ),
        pytest.param(
            "import os\nimport not_a_package_anywhere\n",
            "MyTrainer",
            "bad.py:2: ModuleNotFoundError: No module named 'not_a_package_anywhere'",
            id="failing-import",
        ),
        pytest.param(
            "class MyTrainer:\n    pass\n",
            "MyTrainer",
            "bad.py:1: MyTrainer is no nnunet_core.Trainer",
            id="not-a-trainer",
        ),
    ],
)
def test_broken_code_is_one_line_with_trainer_file_and_line(
    tmp_path: Path, text: str, name: str, expected: str
) -> None:
    path = write(tmp_path, "bad.py", text)
    with pytest.raises(ConfigurationError) as raised:
        resolve_trainer(f"{path}:{name}")
    message = str(raised.value)
    assert message.startswith(f"trainer '{path}:{name}': {tmp_path}"), message
    assert expected in message and "\n" not in message, message


def test_unknown_names_are_refused_without_importing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigurationError, match=r"missing\.py: file not found$"):
        check_trainer_name(f"{tmp_path / 'missing.py'}:MyTrainer")
    assert check_trainer_name("pkg.mod:Fine") is not None  # a module is only imported later
    with pytest.raises(ConfigurationError, match=r"or your own: package\.module:Class, "):
        check_trainer_name("nnUNetTrainerBogus")  # no nnUNet_extTrainer: the built-in error
    monkeypatch.setenv("nnUNet_extTrainer", str(tmp_path))
    with pytest.raises(ConfigurationError, match="no file defines class Nowhere"):
        check_trainer_name("Nowhere")


def test_the_train_command_exits_3_with_the_one_line(tmp_path: Path) -> None:
    """Before any dataset or rank: the trainer's code is loaded first."""
    path = write(tmp_path, "bad.py", "from nnunet_core import Trainer\nclass X(Trainer)\n")
    command = [sys.executable, "-m", "nnunet_core", "train", "900", "3d_fullres", "0"]
    result = subprocess.run(
        [*command, "-tr", f"{path}:X", "--results", str(tmp_path / "results")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 3, result.stderr  # UserCodeError: never retried
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"trainer '{path}:X': {path}:2: SyntaxError" in lines[0], lines


@pytest.mark.parametrize("class_name", ["nnUNetTrainer", "nnUNetTrainer_5epochs"])
def test_a_user_class_named_like_a_built_in_trainer_is_refused(
    tmp_path: Path, class_name: str
) -> None:
    # its trainer.json and source would land in the built-in trainer's model folder
    path = write(tmp_path, "mine.py", GOOD.replace("MyTrainer", class_name))
    with pytest.raises(ConfigurationError, match="name of a built-in trainer") as caught:
        check_trainer_name(f"{path}:{class_name}")
    assert "\n" not in str(caught.value)
