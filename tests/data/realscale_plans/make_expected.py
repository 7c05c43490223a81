"""Upstream's fingerprint and plans of the real-size CT-like dataset of
tests/parity/test_realscale_plans_parity.py, stored here as upstream wrote them
(dataset_fingerprint.json, nnUNetPlans.json).

Run from the repository root with this repository's venv; upstream's own commands come from the
peer venv (nnunetv2 2.8.1, ~/.cache/nnunet-peer/venv, as tests/helpers/peer.py finds it):
    .venv/bin/python tests/data/realscale_plans/make_expected.py
It makes the dataset in a temporary folder with ``synthesize_realscale`` (seeded, as the test
makes it) and runs ``nnUNetv2_extract_fingerprint`` and ``nnUNetv2_plan_experiment`` there.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.helpers.peer import HAS_PEER, upstream  # noqa: E402 - after the path is set
from tests.helpers.realscale_plans import DATASET, make_dataset  # noqa: E402
from tests.helpers.training import roots_env  # noqa: E402

FILES = ("dataset_fingerprint.json", "nnUNetPlans.json")


def main() -> None:
    """Make the data, fingerprint and plan it with upstream, copy the two files here."""
    if not HAS_PEER:
        sys.exit("no peer venv with nnunetv2: see .ci/install_peer.sh")
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        dataset_id = make_dataset(root / "raw")
        env = roots_env(root)
        upstream(env, "nnUNetv2_extract_fingerprint", "-d", dataset_id, "-np", "2")
        upstream(env, "nnUNetv2_plan_experiment", "-d", dataset_id)
        for name in FILES:
            shutil.copyfile(root / "preprocessed" / DATASET / name, HERE / name)
            print(f"wrote {HERE / name}")


if __name__ == "__main__":
    main()
