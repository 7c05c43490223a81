"""The reproduce archive carries every user trainer's code: a reader's rerun finds the trainers
on a machine that never had the author's files (issue 35, item 4).

Real ``pack`` and ``unpack`` on a config alone (no runs: the tables' files are another test's);
the trainer files are real ``nnunet_core.Trainer`` subclasses, loaded by the real lookup.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from nnunet_core.errors import ConfigurationError
from nnunet_core.workflow.reproduce import check, pack, unpack

TRAINER_SOURCE = '''"""A user's trainer, outside the repository."""
import dataclasses

from nnunet_core import Trainer


class {name}(Trainer):
    """One epoch."""

    def adjust_schedule(self, settings):
        return dataclasses.replace(settings, num_epochs=1)
'''


def write_trainer(folder: Path, file: str, class_name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file
    path.write_text(TRAINER_SOURCE.format(name=class_name))
    return path


def methods_config(*trainers: str) -> dict[str, Any]:
    methods = [{"name": "nnunet", "trainer": "nnUNetTrainer", "baseline": True}]
    methods += [{"name": f"m{i}", "trainer": t} for i, t in enumerate(trainers)]
    return {"training": {"trainer": "nnUNetTrainer"}, "methods": methods, "deterministic": True}


def pack_config(config: dict[str, Any], tmp_path: Path) -> Path:
    return pack(config, tmp_path / "work", [], {}, tmp_path / "reproduce.tar.gz")


def test_a_methods_trainer_file_is_packed_and_unpacked_where_the_original_is_gone(
    tmp_path: Path,
) -> None:
    from nnunet_core.training.trainer.lookup import resolve_trainer

    original = write_trainer(tmp_path / "outside", "focal_trainer.py", "FocalTrainer")
    source = original.read_bytes()
    archive = pack_config(methods_config(f"{original}:FocalTrainer"), tmp_path)
    shutil.rmtree(original.parent)
    into = tmp_path / "rerun"
    config = yaml.safe_load(unpack(archive, into, trusted=True).read_text())
    unpacked = (into / "trainers" / "focal_trainer.py").resolve()
    assert config["methods"][1]["trainer"] == f"{unpacked}:FocalTrainer"
    assert unpacked.read_bytes() == source
    assert config["methods"][0]["trainer"] == "nnUNetTrainer"  # built in: as it was
    assert config["training"]["trainer"] == "nnUNetTrainer"
    cls, code = resolve_trainer(config["methods"][1]["trainer"])
    assert cls.__name__ == "FocalTrainer" and code is not None and code.file == unpacked
    assert Path(inspect.getsourcefile(cls) or "") == unpacked
    assert check(archive, into / "work") == []  # check still reads the archive


def test_module_and_ext_folder_trainers_are_packed_as_files_with_unique_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "mypkg"
    module = write_trainer(package, "trainer.py", "ModuleTrainer")
    # packing must find the module's file without running the package's code
    (package / "__init__.py").write_text('raise RuntimeError("the pack imported user code")\n')
    monkeypatch.syspath_prepend(str(package.parent))
    ext = write_trainer(tmp_path / "ext", "trainer.py", "ExtTrainer")
    monkeypatch.setenv("nnUNet_extTrainer", str(ext.parent))
    config = methods_config("mypkg.trainer:ModuleTrainer", "ExtTrainer")
    config["training"]["trainer"] = "ExtTrainer"
    sources = [module.read_bytes(), ext.read_bytes()]
    archive = pack_config(config, tmp_path)
    with tarfile.open(archive) as opened:
        packed = yaml.safe_load(opened.extractfile("config.yaml").read())  # type: ignore[union-attr]
        names = sorted(n for n in opened.getnames() if n.startswith("trainers/"))
    assert names == ["trainers/trainer.py", "trainers/trainer_2.py"]
    assert packed["training"]["trainer"] == packed["methods"][2]["trainer"]
    assert packed["methods"][2]["trainer"].endswith(".py:ExtTrainer")
    monkeypatch.delenv("nnUNet_extTrainer")
    shutil.rmtree(tmp_path / "site")
    shutil.rmtree(tmp_path / "ext")
    into = tmp_path / "rerun"
    config = yaml.safe_load(unpack(archive, into, trusted=True).read_text())
    for method, source in ((config["methods"][1], sources[0]), (config["methods"][2], sources[1])):
        file = Path(method["trainer"].rsplit(":", 1)[0])
        assert file.parent == (into / "trainers").resolve() and file.read_bytes() == source
    assert config["training"]["trainer"] == config["methods"][2]["trainer"]


def test_a_trainer_whose_module_is_not_found_stops_the_pack_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"trainer 'nosuchpkg\.t:Mine': no \.py file"):
        pack_config(methods_config("nosuchpkg.t:Mine"), tmp_path)
    assert not (tmp_path / "reproduce.tar.gz").exists()


def _archive_with_trainer(tmp_path: Path) -> tuple[Path, bytes]:
    original = write_trainer(tmp_path / "outside", "focal_trainer.py", "FocalTrainer")
    return pack_config(methods_config(f"{original}:FocalTrainer"), tmp_path), original.read_bytes()


def test_an_archive_carrying_trainer_code_is_unpacked_only_with_consent(tmp_path: Path) -> None:
    archive, source = _archive_with_trainer(tmp_path)
    into = tmp_path / "rerun"
    digest = hashlib.sha256(source).hexdigest()
    with pytest.raises(ConfigurationError, match="--trust-model-code") as caught:
        unpack(archive, into)
    assert digest in str(caught.value) and "trainers/focal_trainer.py" in str(caught.value)
    assert "\n" not in str(caught.value)
    assert not (into / "trainers").exists() and not (into / "config.yaml").exists()


def test_a_trainer_file_changed_inside_the_archive_is_refused(tmp_path: Path) -> None:
    archive, _ = _archive_with_trainer(tmp_path)
    members = {}
    with tarfile.open(archive, "r:gz") as handle:
        for info in handle.getmembers():
            members[info.name] = handle.extractfile(info).read()
    members["trainers/focal_trainer.py"] += b"\nimport os  # added after packing\n"
    with tarfile.open(archive, "w:gz") as handle:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            handle.addfile(info, io.BytesIO(data))
    into = tmp_path / "rerun"
    with pytest.raises(ConfigurationError, match="but the manifest records"):
        unpack(archive, into, trusted=True)
    assert not (into / "trainers").exists()
