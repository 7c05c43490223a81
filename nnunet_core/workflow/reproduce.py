"""A reader's rerun: pack what a run used into one archive, rerun from it, check the tables.

``pack`` writes ``reproduce.tar.gz`` with:

- ``config.yaml``: the run's config with every default filled in (Snakemake's, after the
  schema; a run of several datasets or seeds: as given), ``work_dir`` made relative (``work``);
- ``manifest.json``: package versions, the git commit of the code (and whether it had local
  changes), the SHA-256 of every raw file, the Snakemake command;
- ``commands.sh``: the commands that rerun it (check out the commit, install, unpack, run, check),
  and each fold's training command as its ``provenance.json`` recorded it;
- ``expected/``: the files a rerun must reproduce byte for byte (the report's results table and
  methods paragraph of every dataset and seed, the plans, the splits, the preprocessed
  dataset.json, and with several datasets or seeds the tables across them under ``paper/``;
  with methods every method's runs and plans, and ``paper/methods_comparison.csv/.tex``),
  and the selection record and each fold's ``provenance.json`` for reference;
- ``trainers/<file>.py``: the source file of each user trainer the config names, which the
  packed config names instead (``nnunet_core.workflow.reproduce_trainers``).

``unpack`` writes ``config.yaml`` into a new folder with ``work_dir`` there (and the trainer
files under ``trainers/``, named by absolute path in the config); ``check`` compares
a rerun's files with ``expected/`` and names each that differs. Bitwise equality needs the same
code, the CPU and ``deterministic: true`` (the check says so when the config lacks it).
"""

from __future__ import annotations

import io
import json
import shlex
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.atomic import atomic_path
from nnunet_core.layout.preprocessed import DATASET_JSON, SPLITS_JSON, plans_file_name
from nnunet_core.layout.results import INFERENCE_INFORMATION_JSON, REPORT_FOLDER
from nnunet_core.layout.work import (
    DEFAULT_WORK_DIR,
    METHODS_COMPARISON,
    PAPER_FOLDER,
    REPRODUCE_ARCHIVE,
    WORK_PREPROCESSED,
)
from nnunet_core.workflow.reproduce_trainers import pack_trainers, packed_sha256, unpack_trainers

ARCHIVE_NAME = REPRODUCE_ARCHIVE
EXPECTED = "expected"
# Files a rerun must give byte for byte: per dataset under preprocessed/<Dataset>, per run
# (dataset and seed) under its results folder, results/[seed_<n>/]<Dataset>.
PREPROCESSED_FILES = (plans_file_name("{plans}"), SPLITS_JSON, DATASET_JSON)
RESULTS_FILES = (f"{REPORT_FOLDER}/results_table.csv", f"{REPORT_FOLDER}/methods.md")
# for reference only: records absolute paths of the packing machine
REFERENCE_FILES = (INFERENCE_INFORMATION_JSON,)
# A run of several datasets or seeds: the tables across them, under work_dir/paper.
PAPER_FILES = ("results_table.csv", "results_table.tex")
PAPER_DATASET_FILES = ("results_table.csv", "results_table.tex", "methods.md")
# With methods (config ``methods``): the comparison of the methods, under work_dir/paper.
METHODS_FILES = (f"{METHODS_COMPARISON}.csv", f"{METHODS_COMPARISON}.tex")


@dataclass(frozen=True)
class PackedRun:
    """One (dataset, seed) of the run: its raw dataset folder, plans name and results folder."""

    raw_dataset: Path
    plans: str
    results_dataset: Path

    @property
    def dataset(self) -> str:
        return self.raw_dataset.name


def raw_checksums(raw_dataset: Path) -> dict[str, str]:
    """SHA-256 of every file of the raw dataset folder, by relative path."""
    from nnunet_core.training.fold.provenance import file_sha256

    return {
        str(p.relative_to(raw_dataset)): file_sha256(p)
        for p in sorted(raw_dataset.rglob("*"))
        if p.is_file()
    }


def fold_provenance_files(results_dataset: Path) -> list[Path]:
    return sorted(results_dataset.glob("*__*__*/fold_*/provenance.json"))


def training_commands(provenance_files: Iterable[Path]) -> list[str]:
    """``nnunet-core train ...`` of each fold as its provenance recorded the arguments."""
    lines = []
    for path in provenance_files:
        arguments = json.loads(path.read_text()).get("config", {}).get("arguments", {})
        if not arguments:
            continue
        words = ["nnunet-core", "train", arguments["dataset"], arguments["configuration"]]
        words += [str(arguments["fold"]), "-tr", arguments["trainer"], "-p", arguments["plans"]]
        for flag in ("epochs", "iterations", "val_iterations", "seed"):
            if arguments.get(flag) is not None:
                words += [f"--{flag.replace('_', '-')}", str(arguments[flag])]
        if arguments.get("deterministic"):
            words.append("--deterministic")
        lines.append(shlex.join(words))
    return lines


def commands_text(manifest: dict[str, Any], train_lines: list[str]) -> str:
    commit = (manifest.get("git") or {}).get("commit", "<the commit of this run's code>")
    lines = [
        "# Rerun this analysis (CPU, deterministic): the tables come out byte for byte.",
        "git clone <this repository> nnunet-core && cd nnunet-core",
        f"git checkout {commit}",
        "make install",
        f"nnunet-core reproduce unpack {ARCHIVE_NAME} --into rerun",
        "snakemake --cores 2 --configfile rerun/config.yaml --directory rerun",
        f"nnunet-core reproduce check {ARCHIVE_NAME} rerun/{DEFAULT_WORK_DIR}",
        "",
        "# The training commands the workflow ran, as each fold recorded them:",
        *[f"# {line}" for line in train_lines],
    ]
    return "\n".join(lines) + "\n"


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    archive.addfile(info, io.BytesIO(data))


def expected_files(
    work_dir: Path, runs: Sequence[PackedRun], paper: bool, methods: bool = False
) -> tuple[list[Path], list[Path]]:
    """The files a rerun must reproduce and those kept for reference, under ``work_dir``
    (each dataset's plans of every planner its runs used)."""
    reproduced, reference = [], []
    for run in {(r.dataset, r.plans): r for r in runs}.values():
        folder = work_dir / WORK_PREPROCESSED / run.dataset
        reproduced += [folder / name.format(plans=run.plans) for name in PREPROCESSED_FILES]
    for run in runs:
        reproduced += [run.results_dataset / name for name in RESULTS_FILES]
        reference += [run.results_dataset / name for name in REFERENCE_FILES]
    if paper:
        folder = work_dir / PAPER_FOLDER
        reproduced += [folder / name for name in PAPER_FILES]
        for dataset in dict.fromkeys(r.dataset for r in runs):
            reproduced += [folder / dataset / name for name in PAPER_DATASET_FILES]
    if methods:
        reproduced += [work_dir / PAPER_FOLDER / name for name in METHODS_FILES]
    return list(dict.fromkeys(reproduced)), reference


def pack(
    config: dict[str, Any],
    work_dir: Path,
    runs: Sequence[PackedRun],
    manifest: dict[str, Any],
    output: Path,
    paper: bool = False,
    methods: bool = False,
) -> Path:
    """Write the archive (atomically); a file the rerun must reproduce that is missing is an
    error naming it. ``paper``: a run of several datasets or seeds, with its tables across them;
    ``methods``: also the comparison of the methods."""
    portable, trainer_files, trainers = pack_trainers({**config, "work_dir": DEFAULT_WORK_DIR})
    checksums = {}
    for run in {r.dataset: r for r in runs}.values():
        for name, digest in raw_checksums(run.raw_dataset).items():
            checksums[f"{run.dataset}/{name}"] = digest
    manifest = {**manifest, "raw_sha256": checksums, "datasets": [r.dataset for r in runs]}
    manifest["trainers"] = trainers
    provenance = [path for run in runs for path in fold_provenance_files(run.results_dataset)]
    members: dict[str, bytes] = {
        "config.yaml": yaml.safe_dump(portable, sort_keys=True).encode(),
        "manifest.json": json.dumps(manifest, indent=1, sort_keys=True).encode(),
        "commands.sh": commands_text(manifest, training_commands(provenance)).encode(),
        **trainer_files,
    }
    reproduced, reference = expected_files(work_dir, runs, paper, methods)
    for source in reproduced + reference:
        if not source.is_file():
            msg = f"{source}: missing; run the workflow to its end (`snakemake all`) first"
            raise ConfigurationError(msg)
        members[f"{EXPECTED}/{source.relative_to(work_dir)}"] = source.read_bytes()
    for path in provenance:
        members[f"{EXPECTED}/{path.relative_to(work_dir)}"] = path.read_bytes()
    with atomic_path(output, suffix=".tar.gz") as tmp, tarfile.open(tmp, "w:gz") as archive:
        for name, data in members.items():
            _add_bytes(archive, name, data)
    return output


def _read_member(archive: tarfile.TarFile, name: str) -> bytes:
    member = archive.extractfile(name)
    if member is None:
        msg = f"{archive.name}: no {name} inside; not an archive of `nnunet-core reproduce pack`"
        raise ConfigurationError(msg)
    return member.read()


def _open(path: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(path, "r:gz")
    except (OSError, tarfile.TarError) as exc:
        msg = f"{path}: not a readable reproduce archive ({exc})"
        raise ConfigurationError(msg) from None


def unpack(
    archive_path: Path, into: Path, raw_root: str | None = None, *, trusted: bool = False
) -> Path:
    """``into/config.yaml`` with ``work_dir`` set to ``into/work`` (and ``dataset.raw_root`` to
    ``raw_root`` when given) and each user trainer's file under ``into/trainers`` (only with the
    reader's consent, ``trusted``: the rerun runs them); returns the config file."""

    def read(name: str) -> bytes:
        try:
            return _read_member(archive, name)
        except KeyError:
            msg = f"{archive_path}: no {name} inside"
            raise ConfigurationError(msg) from None

    into.mkdir(parents=True, exist_ok=True)
    with _open(archive_path) as archive:
        manifest = json.loads(read("manifest.json"))
        config = unpack_trainers(
            yaml.safe_load(read("config.yaml")),
            read,
            into,
            archive=archive_path,
            recorded=packed_sha256(manifest.get("trainers") if isinstance(manifest, dict) else []),
            trusted=trusted,
        )
    config["work_dir"] = str((into / DEFAULT_WORK_DIR).resolve())
    if raw_root is not None:
        for dataset in config["datasets"] if "datasets" in config else [config["dataset"]]:
            if not dataset.get("synthetic", {}).get("enabled"):
                dataset["raw_root"] = str(Path(raw_root).resolve())
    target = into / "config.yaml"
    with atomic_path(target, suffix=".yaml") as tmp:
        tmp.write_text(yaml.safe_dump(config, sort_keys=True))
    return target


def check(archive_path: Path, work_dir: Path) -> list[str]:
    """One line per reproduced file that differs from the archive's (empty: identical)."""
    problems = []
    with _open(archive_path) as archive:
        expected = [
            m.name
            for m in archive.getmembers()
            if m.name.startswith(f"{EXPECTED}/") and not m.name.endswith("provenance.json")
        ]
        manifest = json.loads(_read_member(archive, "manifest.json"))
        config = yaml.safe_load(_read_member(archive, "config.yaml"))
        for name in expected:
            relative = name[len(EXPECTED) + 1 :]
            if relative.endswith(REFERENCE_FILES):
                continue  # records absolute paths of this machine; for reference only
            produced = work_dir / relative
            if not produced.is_file():
                problems.append(f"{produced}: missing (expected as in the archive)")
            elif produced.read_bytes() != _read_member(archive, name):
                problems.append(f"{produced}: differs from the archive's {relative}")
    if problems and not config.get("deterministic"):
        problems.append("the run was not deterministic (config deterministic: false)")
    if problems and (manifest.get("git") or {}).get("dirty"):
        problems.append("the packed run's code had uncommitted changes")
    return problems
