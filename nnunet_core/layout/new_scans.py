"""The prediction mode's trees (config ``predict:``; no upstream equivalent).

In the user's output folder (what a reader looks at):

    <output>/<case><file_ending>            one segmentation per input case (written aside, renamed)
    <output>/<case>.npz, <case>.json         probabilities (``save_probabilities: true`` only)
    <output>/summary.tsv                     one row per predicted case: shape, spacing, seconds,
                                             volume per label in ml, flags
    <output>/failed.tsv                      the cases that failed and why (only when some did)
    <output>/qc/<case>.png                   an overlay slice through the largest foreground
    <output>/qc/montage.png                  every case's overlay in one picture
    <output>/.nnunet-core/cases/<case>.json  its key (model + settings) and its figures
    <output>/.nnunet-core/failed/<case>.json why it failed (removed when it succeeds)

In the workflow's ``work_dir`` (what the workflow needs to rerun exactly):

    work_dir/new_scans/models/<sha>/         a zip or a download installed aside (never into the
                                             user's nnUNet_results)
    work_dir/new_scans/downloads/<sha>.zip   a model downloaded from predict.model's URL
    work_dir/new_scans/runs/<key>/           one model + settings: its spec, staging, shard markers
"""

from __future__ import annotations

from pathlib import Path

SUMMARY_TSV = "summary.tsv"
FAILED_TSV = "failed.tsv"
QC_FOLDER = "qc"
MONTAGE_PNG = "montage.png"
RECORDS_FOLDER = ".nnunet-core"
CASE_RECORDS = "cases"
FAILURE_RECORDS = "failed"

NEW_SCANS_FOLDER = "new_scans"
MODELS_FOLDER = "models"
DOWNLOADS_FOLDER = "downloads"
RUNS_FOLDER = "runs"
SPEC_JSON = "spec.json"
STAGING_FOLDER = "staging"
SHARDS_FOLDER = "shards"
SHARD_NO_RETRY = ".no_retry.json"  # a shard whose failure no retry fixes
SUMMARIES_FOLDER = "summaries"


def case_record_path(output: Path, case: str) -> Path:
    return output / RECORDS_FOLDER / CASE_RECORDS / f"{case}.json"


def failure_record_path(output: Path, case: str) -> Path:
    return output / RECORDS_FOLDER / FAILURE_RECORDS / f"{case}.json"


def qc_png_path(output: Path, case: str) -> Path:
    return output / QC_FOLDER / f"{case}.png"


def new_scans_dir(work_dir: Path) -> Path:
    return work_dir / NEW_SCANS_FOLDER


def installed_model_dir(work_dir: Path, sha256: str) -> Path:
    """Where a zip with this sha256 is installed (a results root of its own)."""
    return new_scans_dir(work_dir) / MODELS_FOLDER / sha256[:16]


def downloads_dir(work_dir: Path) -> Path:
    """The workflow's download cache (``cached_download(url, downloads_dir(work_dir))``)."""
    return new_scans_dir(work_dir) / DOWNLOADS_FOLDER


def download_path(work_dir: Path, url_sha256: str) -> Path:
    return cached_download_path(downloads_dir(work_dir), url_sha256)


def cached_download_path(cache: Path, url_sha256: str) -> Path:
    """A URL's zip in a download cache folder (``model_sharing.download.cached_download``)."""
    return cache / f"{url_sha256[:16]}.zip"


def download_lock_path(cache: Path, url_sha256: str) -> Path:
    """The lock held while that URL is downloaded into ``cache`` (one process at a time)."""
    return cache / f".{url_sha256[:16]}.lock"


def run_dir(work_dir: Path, key: str) -> Path:
    return new_scans_dir(work_dir) / RUNS_FOLDER / key[:16]
