"""The data the real-scale benchmark runs on: the two synthetic real-size sets, or a user's raw
dataset, each placed where both sides' command lines find it.

Each set gets its own work folder holding ``raw/Dataset977_Bench`` (the name speed/preprocess.py's
commands use), so the same fingerprint/plan/preprocess commands serve every set; a user's dataset
is linked there, never copied or written to.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmarks.speed.preprocess import DATASET

# The sizes users bring (issue 34): brain MR 256^3 at 1 mm; CT 512x512xN at 0.7x0.7x2.5 mm.
MR_SHAPE, MR_SPACING = (256, 256, 256), (1.0, 1.0, 1.0)
CT_SIDE, CT_SPACING = 512, (2.5, 0.7, 0.7)
# --tiny (the test's end-to-end run): same spacings, toy sizes, so that only the sizes differ.
TINY_MR_SHAPE, TINY_CT_SHAPE = (24, 24, 24), (12, 40, 40)


@dataclass(frozen=True)
class DataSet:
    """One benchmarked set: its work folder (``raw/``, both sides' preprocessed trees), its
    suffix in stage names ("" or "_aniso") and how the record describes it."""

    work: Path
    suffix: str
    description: str

    @property
    def raw(self) -> Path:
        return self.work / "raw" / DATASET

    def ours_preprocessed(self) -> Path:
        return self.work / "ours_preprocessed" / DATASET

    def peer_preprocessed_root(self) -> Path:
        return self.work / "peer_preprocessed"


def synthesize_set(
    preset: str,
    target: Path,
    num_training: int,
    num_test: int,
    slices: int | None = None,
    tiny: bool = False,
) -> Path:
    """A real-size synthetic raw dataset in ``target`` (kept when already complete): the
    ``synthesize --preset`` generator (HU-like CT, T1-like heads); ``tiny``: the demo's phantoms
    at toy sizes with the same spacings (the test's end-to-end run)."""
    from nnunet_core.dataset.realscale import synthesize_realscale
    from nnunet_core.dataset.synthesize import SynthOptions, synthesize_dataset

    if (target / "dataset.json").is_file():
        return target
    if preset not in ("mr", "ct"):
        msg = f"unknown preset {preset!r} (mr or ct)"
        raise ValueError(msg)
    if not tiny:
        return synthesize_realscale(
            target, preset, num_training, num_test, slices=slices if preset == "ct" else None,
            force=True,
        )  # fmt: skip
    shape, spacing = (TINY_MR_SHAPE, MR_SPACING) if preset == "mr" else (TINY_CT_SHAPE, CT_SPACING)
    options = SynthOptions(
        num_training=num_training, num_test=num_test, shape=shape, spacing=spacing
    )
    synthesize_dataset(target, options, force=True)
    return target


def synthetic_sets(
    work: Path, num_training: int, ct_slices: int | None, tiny: bool = False
) -> tuple[DataSet, DataSet]:
    """The isotropic MR-like set and the anisotropic CT-like set, generated under ``work``."""
    mr = DataSet(
        work / "mr",
        "",
        f"MR-like {num_training} x {'x'.join(map(str, TINY_MR_SHAPE if tiny else MR_SHAPE))}"
        " at 1 mm",
    )
    ct_shape = "x".join(
        map(str, TINY_CT_SHAPE if tiny else (ct_slices or "80-120", CT_SIDE, CT_SIDE))
    )
    ct = DataSet(work / "ct", "_aniso", f"CT-like {num_training} x {ct_shape} at 2.5x0.7x0.7 mm")
    synthesize_set("mr", mr.raw, num_training, 0, tiny=tiny)
    synthesize_set("ct", ct.raw, num_training, 1, slices=ct_slices, tiny=tiny)
    return mr, ct


def user_set(work: Path, raw_dataset: Path) -> DataSet:
    """A user's raw dataset folder, linked (not copied) under ``work``; one-line error when it is
    not an nnU-Net raw dataset."""
    raw_dataset = raw_dataset.resolve()
    if not raw_dataset.is_dir():
        msg = f"--dataset {raw_dataset}: no such folder"
        raise ValueError(msg)
    for needed in ("dataset.json", "imagesTr", "labelsTr"):
        if not (raw_dataset / needed).exists():
            msg = f"--dataset {raw_dataset}: no {needed} (not an nnU-Net raw dataset folder)"
            raise ValueError(msg)
    dataset = DataSet(work / "user", "", str(raw_dataset))
    dataset.raw.parent.mkdir(parents=True, exist_ok=True)
    if dataset.raw.is_symlink() and dataset.raw.resolve() != raw_dataset:
        dataset.raw.unlink()
    if not dataset.raw.exists():
        dataset.raw.symlink_to(raw_dataset, target_is_directory=True)
    return dataset


def loader_configurations(plans_path: Path) -> list[str]:
    """The planned configurations a training loader runs without another stage's predictions
    (the cascade's second stage needs a trained first stage, so it is left out)."""
    from nnunet_core.io.plans import Plans

    plans = Plans.load(plans_path)
    return [n for n in plans.configuration_names if plans.previous_stage_of(n) is None]
