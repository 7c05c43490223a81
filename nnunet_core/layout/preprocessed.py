"""The preprocessed tree (upstream's): what fingerprint, plan, splits and preprocessing write.

<nnUNet_preprocessed>/DatasetXXX_Name/
    dataset.json, dataset_fingerprint.json, <plans>.json, splits_final.json, verify.json
    gt_segmentations/<case><ending>          copy of labelsTr, every evaluation's reference
    <data identifier>/<case>.b2nd, <case>_seg.b2nd, <case>.json, preprocess_summary.json
"""

from __future__ import annotations

from pathlib import Path

from nnunet_core.layout.raw import DATASET_JSON

FINGERPRINT_JSON = "dataset_fingerprint.json"
SPLITS_JSON = "splits_final.json"
VERIFY_JSON = "verify.json"
GT_FOLDER = "gt_segmentations"  # copy of labelsTr, the reference of every evaluation
# Written last into <preprocessed>/D/<data_identifier>/: the folder's data is complete.
PREPROCESS_SUMMARY_JSON = "preprocess_summary.json"
DEFAULT_PLANS_NAME = "nnUNetPlans"
PLANS_SUFFIX = ".json"
# One preprocessed case: image data, segmentation, properties (io.blosc2_store writes them).
CASE_DATA_SUFFIX = ".b2nd"
CASE_SEG_SUFFIX = "_seg.b2nd"
CASE_PROPERTIES_SUFFIX = ".json"

__all__ = [
    "CASE_DATA_SUFFIX",
    "CASE_PROPERTIES_SUFFIX",
    "CASE_SEG_SUFFIX",
    "DATASET_JSON",
    "DEFAULT_PLANS_NAME",
    "FINGERPRINT_JSON",
    "GT_FOLDER",
    "PLANS_SUFFIX",
    "PREPROCESS_SUMMARY_JSON",
    "SPLITS_JSON",
    "VERIFY_JSON",
    "plans_file",
    "plans_file_name",
    "preprocess_summary_file",
]


def plans_file_name(plans_name: str = DEFAULT_PLANS_NAME) -> str:
    """``nnUNetPlans`` -> ``nnUNetPlans.json``."""
    return f"{plans_name}{PLANS_SUFFIX}"


def plans_file(preprocessed_dir: Path, plans_name: str = DEFAULT_PLANS_NAME) -> Path:
    return preprocessed_dir / plans_file_name(plans_name)


def preprocess_summary_file(preprocessed_dir: Path, data_identifier: str) -> Path:
    """The summary a finished preprocessing of one data identifier writes last."""
    return preprocessed_dir / data_identifier / PREPROCESS_SUMMARY_JSON
