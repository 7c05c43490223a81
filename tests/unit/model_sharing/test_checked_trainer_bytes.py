"""A carried trainer file runs only as the bytes whose sha256 was checked (no check-then-read
window): the digest is taken of the bytes that are executed."""

from __future__ import annotations

import hashlib

import pytest

from nnunet_core.errors import ConfigurationError
from nnunet_core.extension.trainer_code import TrainerCode, load_class


def _trainer_file(tmp_path, marker):
    source = tmp_path / "carried.py"
    source.write_text(
        "from pathlib import Path\n"
        f"Path({str(marker)!r}).write_text('ran')\n"
        "class Carried:\n    pass\n"
    )
    return source


def test_the_checked_bytes_run(tmp_path) -> None:
    marker = tmp_path / "ran"
    source = _trainer_file(tmp_path, marker)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    cls = load_class(TrainerCode("Carried", "Carried", "copy"), source, sha256=digest)
    assert cls.__name__ == "Carried"
    assert marker.read_text() == "ran"


def test_a_file_that_is_not_the_checked_one_does_not_run(tmp_path) -> None:
    marker = tmp_path / "ran"
    source = _trainer_file(tmp_path, marker)
    checked = hashlib.sha256(b"what the record was written for").hexdigest()
    with pytest.raises(ConfigurationError, match="not the checked") as caught:
        load_class(TrainerCode("Carried2", "Carried", "copy"), source, sha256=checked)
    assert "\n" not in str(caught.value)
    assert not marker.exists()
