"""splits_final.json: upstream's KFold permutation and fold sizes, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nnunet_core.errors import ConfigurationError
from nnunet_core.planning.splits import check_splits, kfold_splits

# Produced by upstream's sklearn KFold(5, shuffle=True, random_state=12345) over case_000..case_011,
# i.e. what nnU-Net's generate_crossval_split writes for these ids.
UPSTREAM_VAL_12 = [
    ["case_000", "case_003", "case_008"],
    ["case_007", "case_010", "case_011"],
    ["case_006", "case_009"],
    ["case_001", "case_004"],
    ["case_002", "case_005"],
]


def test_matches_upstream_kfold_for_twelve_cases() -> None:
    ids = [f"case_{i:03d}" for i in range(12)]
    splits = kfold_splits(list(reversed(ids)))
    assert [s["val"] for s in splits] == UPSTREAM_VAL_12
    for split in splits:
        assert split["train"] == sorted(set(ids) - set(split["val"]))


def test_every_case_validated_exactly_once() -> None:
    ids = [f"c{i}" for i in range(23)]
    splits = kfold_splits(ids, num_folds=5, seed=7)
    validated = [case for s in splits for case in s["val"]]
    assert sorted(validated) == sorted(ids)
    assert [len(s["val"]) for s in splits] == [5, 5, 5, 4, 4]


def test_too_few_cases_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match="3 training cases cannot be split into 5 folds"):
        kfold_splits(["a", "b", "c"])


def test_user_splits_with_unknown_case_rejected() -> None:
    with pytest.raises(ConfigurationError, match="fold 0 names unknown case"):
        check_splits([{"train": ["a"], "val": ["zz"]}], ["a", "b"], "splits_final.json")


def test_cli_writes_splits_and_takes_a_user_file(tmp_path, make_raw_dataset) -> None:
    raw_dir = make_raw_dataset(tmp_path / "raw" / "Dataset123_Tiny", num_training=6)
    pre = tmp_path / "pre"
    command = [sys.executable, "-m", "nnunet_core", "splits", "-d", "123"]
    command += ["--raw", str(tmp_path / "raw"), "--preprocessed", str(pre)]
    subprocess.run(command, check=True, capture_output=True)
    written = json.loads((pre / "Dataset123_Tiny" / "splits_final.json").read_text())
    assert len(written) == 5
    assert sorted(c for s in written for c in s["val"]) == sorted(
        p.name.removesuffix(".nii.gz") for p in (raw_dir / "labelsTr").iterdir()
    )
    custom = [{"train": written[0]["train"], "val": written[0]["val"]}]
    (raw_dir / "splits_final.json").write_text(json.dumps(custom))
    subprocess.run(command, check=True, capture_output=True)
    assert json.loads((pre / "Dataset123_Tiny" / "splits_final.json").read_text()) == custom
