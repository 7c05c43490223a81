"""The pure parts of benchmarks/quality/fold_repeats.py: voxel counts, false labels and the
report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.quality import fold_repeats as fr


def summary(lesion_on_free_case: int) -> dict:
    """A summary.json of two validation cases; the second has no lesion in its reference."""

    def metrics(organ: tuple[int, int], lesion: tuple[int, int]) -> dict:
        return {"1": {"n_ref": organ[0], "n_pred": organ[1]},
                "2": {"n_ref": lesion[0], "n_pred": lesion[1]}}  # fmt: skip

    return {
        "metric_per_case": [
            {"reference_file": "/x/gt/synth_008.nii.gz", "metrics": metrics((90, 95), (9, 7))},
            {
                "reference_file": "/x/gt/synth_001.nii.gz",
                "metrics": metrics((80, 70), (0, lesion_on_free_case)),
            },  # fmt: skip
        ]
    }


def test_a_label_predicted_on_a_case_without_it_is_found_and_only_then() -> None:
    cases = fr.case_counts(summary(32))
    assert cases[1] == {"case": "synth_001", "labels": {"1": [80, 70], "2": [0, 32]}}
    assert fr.false_labels(cases) == ["2"]
    assert fr.false_labels(fr.case_counts(summary(0))) == []  # a missed voxel is not "false"


def repeat(index: int, lesion_dice: float, false_voxels: int) -> dict:
    return {"repeat": index, "dice": {"1": 0.9, "2": lesion_dice},
            "cases": fr.case_counts(summary(false_voxels))}  # fmt: skip


def test_the_report_counts_false_positive_runs_and_tests_the_sides(tmp_path: Path) -> None:
    ours = [repeat(0, 0.45, 32), repeat(1, 0.46, 10), repeat(2, 0.9, 0), repeat(3, 0.44, 5)]
    upstream = [repeat(k, 0.91, 0) for k in range(4)]
    (tmp_path / "ours.json").write_text(json.dumps({"repeats": ours}))
    # upstream's repeats from two processes (the second with --start 2): pooled
    (tmp_path / "upstream.json").write_text(json.dumps({"repeats": upstream[:2]}))
    (tmp_path / "upstream_from2.json").write_text(json.dumps({"repeats": upstream[2:]}))
    table = fr.report(tmp_path)
    assert table["ours"]["false_positive_runs"] == {"1": 0, "2": 3}
    assert table["upstream"]["false_positive_runs"] == {"1": 0, "2": 0}
    assert table["upstream"]["n"] == 4
    assert table["ours"]["dice"]["2"]["mean"] == pytest.approx((0.45 + 0.46 + 0.9 + 0.44) / 4)
    assert table["upstream"]["dice"]["2"]["sd"] == 0.0
    assert table["fisher_p"]["2"] == pytest.approx(1 / 7)  # 3 of 4 against 0 of 4, two-sided
    assert table["fisher_p"]["1"] == 1.0
    assert table["ours"]["false_voxels"]["2"] == [32, 10, 0, 5]
    assert table["upstream"]["false_voxels"]["2"] == [0, 0, 0, 0]
    assert 0.02 < table["mann_whitney_p"]["2"] < 0.2  # 3 of 4 above all of upstream's zeros
    assert table["mann_whitney_p"]["1"] == 1.0  # no false organ voxels on either side
    assert "3/4" in fr.format_report(table) and "0/4" in fr.format_report(table)


def test_one_side_alone_is_reported_without_a_test(tmp_path: Path) -> None:
    (tmp_path / "ours.json").write_text(json.dumps({"repeats": [repeat(0, 0.45, 32)]}))
    table = fr.report(tmp_path)
    assert set(table) == {"ours"} and table["ours"]["dice"]["2"]["sd"] is None


def test_the_report_can_take_our_repeats_from_another_folder(tmp_path: Path) -> None:
    ours, swap = tmp_path / "plain", tmp_path / "swap"
    ours.mkdir(), swap.mkdir()
    (ours / "ours.json").write_text(json.dumps({"repeats": [repeat(0, 0.45, 32)]}))
    (swap / "upstream.json").write_text(json.dumps({"repeats": [repeat(0, 0.9, 0)]}))
    table = fr.report(swap, ours)
    assert table["ours"]["false_positive_runs"]["2"] == 1
    assert table["upstream"]["false_positive_runs"]["2"] == 0
    assert set(fr.report(swap)) == {"upstream"}  # without it, only the folder's own side


def test_our_initial_weights_follow_the_seed_in_upstreams_names(
    make_preprocessed_dataset, tmp_path: Path
) -> None:
    """--our-init: the start our trainer draws from a seed, written for upstream's network."""
    import argparse

    import torch

    from nnunet_core.io.plans import Plans
    from nnunet_core.model import build_network, checkpoint

    name = f"Dataset{fr.NUMBER}_CascadeQuality"
    pre = make_preprocessed_dataset(tmp_path / "build", name, "3d_fullres", num_training=5)
    shutil.copytree(pre, tmp_path / "ours" / "preprocessed" / name)  # cascade_quality's layout
    args = argparse.Namespace(work=tmp_path, stage="3d_fullres", fold=0)
    paths = [tmp_path / "init" / f"{k}.pth" for k in ("a", "b", "c")]
    for seed, path in zip((1000, 1000, 1001), paths, strict=True):
        fr.write_our_initial_weights(args, seed, path)
    first, again, other = (torch.load(p) for p in paths)
    assert "decoder.seg_layers.0.weight" in first  # upstream's parameter names
    assert all(torch.equal(first[k], again[k]) for k in first)
    head = "decoder.seg_layers.0.weight"
    assert not torch.equal(first[head], other[head])
    plans = Plans.load(pre / "nnUNetPlans.json")
    network = build_network(plans.configuration("3d_fullres"), 1, 3, True)
    checkpoint.load_network_weights(network, first, paths[0])  # every tensor, strictly


@pytest.mark.parametrize(
    ("flags", "kind"),
    [
        ([], "Cascade"),
        (["--our-augmentation"], "OurDA"),
        (["--our-loader"], "OurDL"),
        (["--our-loader", "--our-init"], "OurDLInit"),
        (["--our-init"], "OurInit"),
    ],  # fmt: skip
)
def test_each_swap_writes_its_own_upstream_trainer_class(flags: list[str], kind: str) -> None:
    """A swap's class file must never take the plain trainer's name: cascade_quality.py runs
    that one, and would otherwise train with a swapped pipeline."""
    import argparse

    args = argparse.Namespace(our_augmentation="--our-augmentation" in flags,
                              our_loader="--our-loader" in flags,
                              our_init="--our-init" in flags)  # fmt: skip
    assert fr.TRAINER_KINDS[fr.swap(args)] == kind
    assert len(set(fr.TRAINER_KINDS.values())) == len(fr.TRAINER_KINDS)
