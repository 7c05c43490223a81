"""A model folder's carried trainer code runs only with consent and only as recorded (issue 51).

``load_recorded_class`` on a real record and source file whose module body writes a marker
file: without consent the refusal names the folder, the file, its sha256 and the flag, and the
marker never appears; with it one stderr line names the file and sha256 first; a copy changed
after training (or a record without a sha256) is refused either way. ``consent_flag_for_trainer``
is what the workflow's predict rule passes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from nnunet_core.errors import ConfigurationError
from nnunet_core.extension.consent import (
    TRUST_CONFIG_KEY,
    TRUST_FLAG,
    require_consent,
    verified_code,
)
from nnunet_core.extension.trainer_record import load_recorded_class
from nnunet_core.training.trainer.lookup import consent_flag_for_trainer


def model_with_code(folder: Path, marker: Path, *, recorded_sha: str | None = "auto") -> Path:
    """A model folder whose recorded trainer file creates ``marker`` when it runs."""
    source = (
        f"from pathlib import Path\nPath({str(marker)!r}).touch()\n\n\nclass Mine:\n    x = 1\n"
    )
    (folder / "trainer_source").mkdir(parents=True)
    (folder / "trainer_source" / "mine.py").write_text(source)
    entry = {"trainer": "/u/mine.py:Mine", "class": "Mine", "source": "trainer_source/mine.py"}
    if recorded_sha is not None:
        digest = hashlib.sha256(source.encode()).hexdigest()
        entry["sha256"] = digest if recorded_sha == "auto" else recorded_sha
    (folder / "trainer.json").write_text(json.dumps(entry))
    return folder


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return model_with_code(tmp_path / "Mine__nnUNetPlans__3d_fullres", tmp_path / "ran")


def digest(model: Path) -> str:
    return hashlib.sha256((model / "trainer_source" / "mine.py").read_bytes()).hexdigest()


def test_without_consent_nothing_runs_and_the_refusal_names_file_and_sha(model, tmp_path) -> None:
    with pytest.raises(ConfigurationError) as error:
        load_recorded_class(model)
    message = str(error.value)
    source = model / "trainer_source" / "mine.py"
    assert message == (
        f"model {model} carries trainer code {source} (sha256 {digest(model)}), which predicting "
        f"runs: pass {TRUST_FLAG} if you trust it"
    )
    assert not (tmp_path / "ran").exists()


def test_with_consent_it_says_what_runs_then_runs_it(model, tmp_path, capsys) -> None:
    cls = load_recorded_class(model, trusted=True)
    assert cls is not None and cls.__name__ == "Mine" and cls.x == 1
    assert (tmp_path / "ran").exists()
    err = capsys.readouterr().err
    source = model / "trainer_source" / "mine.py"
    assert err == (
        f"running the trainer code carried by model {model}: {source} (sha256 {digest(model)}) "
        f"({TRUST_FLAG} given)\n"
    )


def test_a_changed_copy_is_refused_even_with_consent(model, tmp_path) -> None:
    source = model / "trainer_source" / "mine.py"
    recorded = digest(model)
    source.write_text(source.read_text() + "import os  # added later\n")
    with pytest.raises(ConfigurationError, match="changed after training") as error:
        load_recorded_class(model, trusted=True)
    assert f"has sha256 {digest(model)} but its record says {recorded}" in str(error.value)
    assert not (tmp_path / "ran").exists()


def test_a_record_without_sha256_is_refused(tmp_path) -> None:
    model = model_with_code(tmp_path / "M__P__C", tmp_path / "ran", recorded_sha=None)
    with pytest.raises(ConfigurationError, match="records no sha256"):
        load_recorded_class(model, trusted=True)
    assert not (tmp_path / "ran").exists()


def test_the_record_never_points_outside_trainer_source(tmp_path) -> None:
    model = model_with_code(tmp_path / "M__P__C", tmp_path / "ran")
    outside = tmp_path / "evil.py"
    outside.write_text("raise SystemExit('ran')\n")
    entry = json.loads((model / "trainer.json").read_text())
    entry["source"] = "../../evil.py"
    entry["sha256"] = hashlib.sha256(outside.read_bytes()).hexdigest()
    (model / "trainer.json").write_text(json.dumps(entry))
    with pytest.raises(ConfigurationError, match="evil.py, which is missing"):
        verified_code(model, entry)


def test_the_consent_is_named_as_the_caller_asks(model) -> None:
    code = verified_code(model, json.loads((model / "trainer.json").read_text()))
    with pytest.raises(ConfigurationError, match=f"pass {TRUST_CONFIG_KEY}: true in the config"):
        require_consent(code, False, f"{TRUST_CONFIG_KEY}: true in the config")


def test_a_built_in_model_has_no_code_to_consent_to(tmp_path) -> None:
    assert load_recorded_class(tmp_path) is None


@pytest.mark.parametrize(
    ("trainer", "flag"),
    [
        ("nnUNetTrainer", ""),
        ("nnUNetTrainer_5epochs", ""),
        ("nnUNetTrainerNoMirroring", ""),
        ("/home/u/my trainer.py:MyTrainer", TRUST_FLAG),
        ("my_pkg.trainers:MyTrainer", TRUST_FLAG),
        ("/home/u/t.py:nnUNetTrainer", TRUST_FLAG),
        ("MyExternalTrainer", TRUST_FLAG),  # found in nnUNet_extTrainer's folders
    ],
)
def test_the_workflow_consents_for_the_trainer_the_user_named(trainer, flag) -> None:
    assert consent_flag_for_trainer(trainer) == flag
