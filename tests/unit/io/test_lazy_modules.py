"""The image libraries are imported at the first image read, not by importing the readers: every
Snakemake start imports the readers, and most commands read no image."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from nnunet_core.io.lazy_modules import lazy_module

REPO = Path(__file__).resolve().parents[3]


def _imported_after(code: str) -> set[str]:
    """Which of the two libraries a fresh interpreter has imported after running ``code``."""
    probe = code + "\nimport sys; print(sorted({'SimpleITK', 'nibabel'} & set(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    return set(eval(result.stdout.strip().splitlines()[-1]))  # noqa: S307 - our own print


def test_importing_the_readers_and_the_integrity_check_imports_neither_library() -> None:
    code = "import nnunet_core.io.readers, nnunet_core.workflow.dataset_check"
    assert _imported_after(code) == set()


def test_the_first_read_imports_its_library_and_reads_the_image(tmp_path) -> None:
    import SimpleITK as sitk

    path = tmp_path / "a.nii.gz"
    image = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    sitk.WriteImage(sitk.GetImageFromArray(image), str(path))
    code = (
        "import sys\n"
        "from nnunet_core.io.readers.nibabel_io import NibabelIO\n"
        "assert 'nibabel' not in sys.modules\n"
        f"data, _ = NibabelIO().read_images([{str(path)!r}])\n"
        f"assert data.tolist() == [{image.tolist()}], data"
    )
    assert _imported_after(code) == {"nibabel"}


def test_threads_touching_a_stand_in_first_at_once_all_get_the_module() -> None:
    stand_in = lazy_module("json")
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(stand_in.dumps)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    import json

    assert results == [json.dumps] * 8


def test_a_library_that_is_not_installed_fails_at_once() -> None:
    with pytest.raises(ImportError, match="no_such_library_here"):
        lazy_module("no_such_library_here")
