"""benchmarks/parity/init_stats.py: our initial networks per seed and the comparison of two
sides."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from benchmarks.parity import init_stats


def test_a_network_row_gives_tensor_statistics_and_class_shares() -> None:
    import torch

    network = torch.nn.Conv2d(1, 3, 1)
    with torch.no_grad():
        network.weight.zero_()
        network.bias.copy_(torch.tensor([0.0, 0.0, np.log(2.0)]))  # class 2 twice as likely
    image = np.ones((2, 1, 4, 4), dtype=np.float32)
    row = init_stats.network_row(network.state_dict(), network, image)
    assert row["bias:mean"] == pytest.approx(np.log(2.0) / 3)
    assert row["weight:sd"] == 0.0
    assert row["logit_2"] == pytest.approx(np.log(2.0))
    assert row["softmax_2"] == pytest.approx(0.5) and row["softmax_0"] == pytest.approx(0.25)


def test_the_comparison_flags_a_shifted_statistic_and_lists_one_sided_tensors() -> None:
    rng = np.random.default_rng(0)
    ours = [{"w:sd": rng.normal(1, 0.01), "logit_0": rng.normal(), "extra:sd": 1.0}
            for _ in range(30)]  # fmt: skip
    upstream = [{"w:sd": rng.normal(2, 0.01), "logit_0": rng.normal()} for _ in range(30)]
    table = init_stats.compare(ours, upstream)
    p = {row["statistic"]: row["ks_p"] for row in table["rows"]}
    assert p["w:sd"] < 1e-6 and p["logit_0"] > 0.01
    assert table["one_side_only"] == ["extra:sd"]
    text = init_stats.format_summary(table)
    assert "with KS p < 0.01: 1" in text and "w:sd: ours 0.99" in text


def test_our_initial_networks_follow_the_seed(make_preprocessed_dataset, tmp_path: Path) -> None:
    """Same seed, same network and outputs; another seed, another draw (else the seeds would
    not be independent draws of the distribution that is compared)."""
    name = "Dataset952_QualitySynth3d"
    pre = make_preprocessed_dataset(tmp_path, name, "3d_fullres", num_training=5)
    shutil.copytree(pre, tmp_path / "ours" / "preprocessed" / name)  # quality.py's layout
    image = init_stats.fixed_input(tmp_path, name, "3d_fullres")
    assert image.shape[:2] == (2, 1) and abs(float(image.mean())) < 0.05
    first, again, other = init_stats.our_rows(tmp_path, name, "3d_fullres", [0, 0, 1], image)
    assert first == again
    assert first["decoder.seg_layers.0.weight:sd"] != other["decoder.seg_layers.0.weight:sd"]
    assert sum(first[f"softmax_{k}"] for k in range(3)) == pytest.approx(1.0)
