"""A user trainer's class and Trainer base, checked from the file's syntax tree (nothing runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nnunet_core.errors import ConfigurationError, UserCodeError
from nnunet_core.extension.trainer_code import FOUND_BY_FILE, TrainerCode, parse_trainer_code
from nnunet_core.extension.trainer_syntax import check_trainer_source
from nnunet_core.workflow.config import Execution, check_config

# every file also writes a file when it runs: the check must never run it
SIDE_EFFECT = "import pathlib\npathlib.Path(__file__).with_suffix('.ran').write_text('ran')\n"


def write(folder: Path, text: str, name: str = "mine.py") -> Path:
    path = folder / name
    path.write_text(SIDE_EFFECT + text)
    return path


def check(path: Path, class_name: str) -> None:
    check_trainer_source(parse_trainer_code(f"{path}:{class_name}"))
    assert not path.with_suffix(".ran").exists()  # read, never run


@pytest.mark.parametrize(
    "text",
    [
        "from nnunet_core import Trainer\nclass MyTrainer(Trainer):\n    pass\n",
        "from nnunet_core import Trainer as Base\nclass MyTrainer(Base):\n    pass\n",
        "import nnunet_core\nclass MyTrainer(nnunet_core.Trainer):\n    pass\n",
        "import nnunet_core.training.trainer as t\nclass MyTrainer(t.Trainer):\n    pass\n",
        "from nnunet_core.training.trainer import Trainer\nclass MyTrainer(Trainer): ...\n",
        "from nnunet_core import *\nclass MyTrainer(Trainer): ...\n",
        # through another class of the same file, defined under a condition
        "import sys\nfrom nnunet_core import Trainer\nif sys.version_info >= (3,):\n"
        "    class Base(Trainer): ...\nclass MyTrainer(Base):\n    deep_supervision = False\n",
        # a mixin first: one base that reaches Trainer is enough
        "from nnunet_core import Trainer\nclass Mixin: ...\nclass MyTrainer(Mixin, Trainer): ...\n",
    ],
)
def test_a_trainer_subclass_passes(tmp_path: Path, text: str) -> None:
    check(write(tmp_path, text), "MyTrainer")


@pytest.mark.parametrize(
    "text",
    [
        # a base from another package: resolving it would need running code
        "from lab.trainers import LabTrainer\nclass MyTrainer(LabTrainer): ...\n",
        "from . import base\nclass MyTrainer(base.Base): ...\n",
        "import lab\nclass MyTrainer(lab.make_base()): ...\n",
        # the name is rebound or re-exported
        "from nnunet_core import Trainer\nclass MyTrainer: ...\n"
        "MyTrainer = type('X', (Trainer,), {})\n",
        "from lab.trainers import MyTrainer\n",
        "MyTrainer = __import__('lab').Trainer\n",
    ],
)
def test_what_needs_running_code_to_decide_is_accepted(tmp_path: Path, text: str) -> None:
    check(write(tmp_path, text), "MyTrainer")


def test_a_wrong_class_name_is_one_line_with_close_matches(tmp_path: Path) -> None:
    path = write(tmp_path, "from nnunet_core import Trainer\nclass MyTrainer(Trainer): ...\n")
    with pytest.raises(UserCodeError) as raised:
        check(path, "MyTrainr")
    message = str(raised.value)
    assert message == (
        f"trainer '{path}:MyTrainr': {path}:1: defines no class MyTrainr "
        "(did you mean MyTrainer?; its classes: MyTrainer at line 4)"
    )


def test_a_file_without_classes_says_so(tmp_path: Path) -> None:
    path = write(tmp_path, "x = 1\n")
    with pytest.raises(UserCodeError, match=r"defines no class MyTrainer \(its classes: none\)$"):
        check(path, "MyTrainer")


@pytest.mark.parametrize(
    ("text", "bases"),
    [
        ("class MyTrainer:\n    pass\n", "none"),
        ("class MyTrainer(object): ...\n", "object"),
        ("class Base: ...\nclass MyTrainer(Base): ...\n", "Base"),
        ("import torch\nclass Base: ...\nclass MyTrainer(Base, dict): ...\n", "Base, dict"),
        # a class of our package that is no Trainer, resolved by reading our own file
        (
            "from nnunet_core.errors import ConfigurationError\n"
            "class MyTrainer(ConfigurationError): ...\n",
            "ConfigurationError",
        ),
    ],
)
def test_a_class_that_is_no_trainer_is_one_line(tmp_path: Path, text: str, bases: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UserCodeError) as raised:
        check(path, "MyTrainer")
    message = str(raised.value)
    assert message.startswith(f"trainer '{path}:MyTrainer': {path}:"), message
    assert f"class MyTrainer is no nnunet_core.Trainer (its bases: {bases}); derive" in message
    assert "\n" not in message


def test_the_line_named_is_the_class_definition(tmp_path: Path) -> None:
    path = write(tmp_path, "\n\nclass MyTrainer:\n    pass\n")
    with pytest.raises(UserCodeError, match=rf"{path}:5: class MyTrainer is no"):
        check(path, "MyTrainer")


def test_a_syntax_error_is_one_line_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "from nnunet_core import Trainer\nclass MyTrainer(Trainer)\n")
    with pytest.raises(UserCodeError) as raised:
        check(path, "MyTrainer")
    assert str(raised.value) == f"trainer '{path}:MyTrainer': {path}:4: SyntaxError: expected ':'"


def test_a_module_trainer_is_read_from_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "lab_methods"
    package.mkdir()
    write(package, "", name="__init__.py")
    write(package, "class NotATrainer: ...\n", name="losses.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UserCodeError, match=r"losses\.py:3: class NotATrainer is no nnunet_core"):
        check_trainer_source(parse_trainer_code("lab_methods.losses:NotATrainer"))
    assert not (package / "losses.ran").exists() and not (package / "__init__.ran").exists()
    # a module the import system cannot find without running code: left to the job's import
    check_trainer_source(parse_trainer_code("no_such_package_anywhere.mod:Mine"))


def test_a_bare_name_from_the_ext_trainer_folders_is_checked_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "class Lonely:\n    pass\n")
    monkeypatch.setenv("nnUNet_extTrainer", str(tmp_path))
    with pytest.raises(UserCodeError, match="class Lonely is no nnunet_core.Trainer"):
        check_trainer_source(parse_trainer_code("Lonely"))


def test_an_unreadable_file_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "folder.py"
    path.mkdir()  # a name that exists, but no file to read
    with pytest.raises(ConfigurationError, match=r"folder\.py: cannot be read"):
        check_trainer_source(TrainerCode(f"{path}:X", "X", FOUND_BY_FILE, file=path))


def test_the_workflows_config_check_refuses_a_wrong_class_before_any_job(tmp_path: Path) -> None:
    path = write(tmp_path, "from nnunet_core import Trainer\nclass MyTrainer(Trainer): ...\n")
    config = {
        "work_dir": str(tmp_path / "work"),
        "dataset": {"id": 900, "name": "Synth", "synthetic": {"enabled": True}},
        "planning": {"configurations": None, "overrides": {}},
        "training": {"trainer": f"{path}:MyTrainr", "folds": [0], "nodes": 1},
        "splits": {"num_folds": 5},
    }
    with pytest.raises(ConfigurationError) as raised:
        check_config(config, Execution())
    message = str(raised.value)
    assert message.startswith(f"config training.trainer: trainer '{path}:MyTrainr': ")
    assert "did you mean MyTrainer?" in message and "\n" not in message
    config["training"]["trainer"] = f"{path}:MyTrainer"
    check_config(config, Execution())
    assert not path.with_suffix(".ran").exists()
