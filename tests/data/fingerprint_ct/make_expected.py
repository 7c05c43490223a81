"""Upstream's fingerprint of the CT-like dataset (tests/helpers/ct_like.py), stored here as
expected.json for tests/unit/planning/test_fingerprint_ct.py.

Run with the peer venv's python (nnunetv2 2.8.1) from the repository root:
    ~/.cache/nnunet-peer/venv/bin/python tests/data/fingerprint_ct/make_expected.py
It generates the dataset in a temporary folder and runs upstream's DatasetFingerprintExtractor.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.helpers import ct_like  # noqa: E402 - after the path is set


def main() -> None:
    """Generate, fingerprint with upstream, write expected.json."""
    with tempfile.TemporaryDirectory() as work:
        os.environ["nnUNet_raw"] = f"{work}/raw"
        os.environ["nnUNet_preprocessed"] = f"{work}/pre"
        os.environ["nnUNet_results"] = f"{work}/results"
        ct_like.write_dataset(Path(work) / "raw")
        from nnunetv2.experiment_planning.dataset_fingerprint.fingerprint_extractor import (
            DatasetFingerprintExtractor,
        )

        fingerprint = DatasetFingerprintExtractor(ct_like.NAME, num_processes=1).run()
        fingerprint = json.loads(json.dumps(fingerprint))  # numbers as upstream writes them
        (HERE / "expected.json").write_text(json.dumps(fingerprint, indent=2) + "\n")
        print(json.dumps(fingerprint["foreground_intensity_properties_per_channel"], indent=2))


if __name__ == "__main__":  # upstream's workers are spawned: they import this file
    main()
