#!/usr/bin/env python
"""Where training starts: our initial networks against upstream's, over many seeds.

    python -m benchmarks.parity.init_stats --work /tmp/quality --dataset Dataset952_QualitySynth3d \
        --configuration 3d_fullres --peer ~/.cache/nnunet-peer/venv --seeds 40 --out init.json

Issue 16: on quality.py's 3-D set our trainer learned the small class later than upstream's in more
runs, and upstream's trainer given our batches and our initial weights fails the same way (the
trainer is not the cause). What is left is the distribution of the draws: the batches (``python -m
benchmarks.parity.cascade_batches --dataset``) and the initial weights, compared here. Per seed,
each side builds its trainer's network for the configuration of fold 0 from its own preprocessed
plans (``--work`` laid out as quality.py's: ``ours/preprocessed``, ``upstream/preprocessed``), ours
with ``TrainerSettings(seed=s)``, upstream's after ``torch.manual_seed(s)``, and records every
parameter tensor's mean and sd and, on one fixed input (standard normal, the patch size, the same
array on both sides), each class's mean logit and mean softmax share at full resolution. Seeds give
independent draws on both sides, so the comparison is of distributions: means over seeds and a
two-sample Kolmogorov-Smirnov p-value per statistic. """

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.parity.cascade_batches import compare as compare_rows
from benchmarks.parity.cascade_batches import peer_script_rows

# Shared by both sides (the peer runs it from this text): one row of statistics per network.
NETWORK_STATS = textwrap.dedent(
    """
    import numpy as np
    import torch

    def network_row(state, network, image):
        \"\"\"Every tensor's mean and sd (by upstream's parameter name) and, on ``image``, each
        class's mean logit and softmax share at full resolution.\"\"\"
        row = {}
        for name, tensor in state.items():
            if tensor.dtype.is_floating_point and tensor.numel() > 1:
                row[f"{name}:mean"] = float(tensor.float().mean())
                row[f"{name}:sd"] = float(tensor.float().std())
        with torch.no_grad():
            out = network(torch.from_numpy(image))
        out = out[0] if isinstance(out, (list, tuple)) else out
        share = torch.softmax(out.float(), 1)
        for k in range(out.shape[1]):
            row[f"logit_{k}"] = float(out[:, k].mean())
            row[f"softmax_{k}"] = float(share[:, k].mean())
        return row
    """
)

PEER_SIDE = textwrap.dedent(
    """
    import json, sys
    from batchgenerators.utilities.file_and_folder_operations import load_json
    from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer

    preprocessed, configuration, image_path, seeds = sys.argv[1:5]
    torch.set_num_threads(1)
    image = np.load(image_path)
    rows = []
    for seed in json.loads(seeds):
        plans = load_json(preprocessed + "/nnUNetPlans.json")
        plans["continue_training"] = False  # the peer's trainer pops this key
        trainer = nnUNetTrainer(plans, configuration, 0,
                                load_json(preprocessed + "/dataset.json"), torch.device("cpu"))
        torch.manual_seed(seed)
        trainer.initialize()
        network = trainer.network.eval()
        rows.append(network_row(network.state_dict(), network, image))
    print("ROWS " + json.dumps(rows))
    """
)

namespace: dict[str, Any] = {}
exec(NETWORK_STATS, namespace)  # noqa: S102 - our own text, shared verbatim with the peer
network_row = namespace["network_row"]


def fixed_input(work: Path, dataset: str, configuration: str, seed: int = 12345) -> np.ndarray:
    """One standard normal batch of 2 at the configuration's patch size (our plans)."""
    plans = json.loads((work / "ours" / "preprocessed" / dataset / "nnUNetPlans.json").read_text())
    patch = plans["configurations"][configuration]["patch_size"]
    dataset_json = json.loads((work / "raw" / dataset / "dataset.json").read_text())
    channels = len(dataset_json["channel_names"])
    rng = np.random.default_rng(seed)
    return rng.standard_normal((2, channels, *patch)).astype(np.float32)


def our_rows(work: Path, dataset: str, configuration: str, seeds: list[int], image: np.ndarray):
    """Our trainer's initial network per seed."""
    import torch

    from nnunet_core import Trainer, TrainerSettings
    from nnunet_core.layout.roots import Roots
    from nnunet_core.model import checkpoint
    from nnunet_core.training.fold.setup import prepare_fold

    torch.set_num_threads(1)
    scratch = work / "init_stats" / "ours"
    roots = Roots(preprocessed=work / "ours" / "preprocessed", results=scratch)
    setup = prepare_fold(roots, dataset, configuration, 0, "nnUNetPlans", "nnUNetTrainer")
    rows = []
    for seed in seeds:
        trainer = Trainer(setup, TrainerSettings(seed=seed), torch.device("cpu"))
        network = trainer.network.eval()
        rows.append(network_row(checkpoint.network_weights(network), network, image))
        print(f"  ours: seed {seed}", flush=True)
    return rows


def peer_rows(peer: Path, work: Path, dataset: str, configuration: str, seeds: list[int],
              image_path: Path) -> list[dict]:  # fmt: skip
    """Upstream's initial network per seed, by the peer venv's python."""
    env = dict(os.environ, nnUNet_raw=str(work / "raw"), nnUNet_results=str(work / "init_stats"))
    env.update(nnUNet_preprocessed=str(work / "upstream" / "preprocessed"), nnUNet_compile="false")
    env.pop("PYTHONPATH", None)
    command = [str(peer / "bin" / "python"), "-c", NETWORK_STATS + PEER_SIDE,
               str(work / "upstream" / "preprocessed" / dataset), configuration,
               str(image_path), json.dumps(seeds)]  # fmt: skip
    return peer_script_rows(command, env, "upstream's networks")


def compare(ours: list[dict], upstream: list[dict]) -> dict[str, Any]:
    """Per statistic both means over seeds and the KS p-value (cascade_batches' comparison);
    the statistics both sides have (a tensor one side lacks is listed, not compared)."""
    shared = [k for k in upstream[0] if k in ours[0]]

    def pick(rows: list[dict]) -> list[dict]:
        return [{k: row[k] for k in shared} for row in rows]

    only = sorted(set(ours[0]) ^ set(upstream[0]))
    return {"rows": compare_rows(pick(ours), pick(upstream)), "one_side_only": only}


def format_summary(table: dict[str, Any], alpha: float = 0.01) -> str:
    """The output statistics in full; of the tensor statistics, how many differ at ``alpha``
    and which."""
    lines = [f"{'statistic':28s} {'ours':>10s} {'upstream':>10s} {'KS p':>7s}"]
    tensors = [r for r in table["rows"] if ":" in r["statistic"]]
    for row in (r for r in table["rows"] if ":" not in r["statistic"]):
        lines.append(f"{row['statistic']:28s} {row['ours']:10.4f} {row['upstream']:10.4f} "
                     f"{row['ks_p']:7.3f}")  # fmt: skip
    low = [r for r in tensors if r["ks_p"] < alpha]
    lines.append(f"tensor statistics: {len(tensors)}, with KS p < {alpha}: {len(low)}")
    lines += [f"  {r['statistic']}: ours {r['ours']:.5f} upstream {r['upstream']:.5f} "
              f"p {r['ks_p']:.4f}" for r in low]  # fmt: skip
    if table["one_side_only"]:
        lines.append(f"on one side only: {', '.join(table['one_side_only'])}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="quality.py's --work")
    parser.add_argument("--dataset", default="Dataset952_QualitySynth3d")
    parser.add_argument("--configuration", default="3d_fullres")
    parser.add_argument("--peer", type=Path, required=True, help="upstream's venv")
    parser.add_argument("--seeds", type=int, default=40, help="networks per side")
    parser.add_argument("--out", type=Path, default=Path("init_stats.json"))
    args = parser.parse_args()
    work, seeds = args.work.resolve(), list(range(args.seeds))
    image = fixed_input(work, args.dataset, args.configuration)
    image_path = work / "init_stats" / "input.npy"
    image_path.parent.mkdir(parents=True, exist_ok=True)
    np.save(image_path, image)
    ours = our_rows(work, args.dataset, args.configuration, seeds, image)
    upstream = peer_rows(args.peer.expanduser(), work, args.dataset, args.configuration, seeds,
                         image_path)  # fmt: skip
    table = compare(ours, upstream)
    print(format_summary(table))
    args.out.write_text(json.dumps({"command": sys.argv, "seeds": args.seeds, **table}, indent=1))


if __name__ == "__main__":
    main()
