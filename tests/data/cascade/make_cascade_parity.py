"""Make the cascade parity data with upstream nnU-Net (run once, with the peer venv's python).

    nnunet-core synthesize --output $nnUNet_raw/Dataset990_Casc --num-training 5 --num-test 0 \
        --shape 40 48 48 --spacing 1 1 1
    nnunet-core fingerprint -d 990 && nnunet-core plan -d 990 -gpu_memory_target 0.02
    nnunet-core preprocess -d 990 -c 3d_lowres 3d_fullres -np 1
    ~/.cache/nnunet-peer/venv/bin/python tests/data/cascade/make_cascade_parity.py \
        $nnUNet_preprocessed/Dataset990_Casc tests/data/cascade

The tiny memory target makes our planner plan 3d_lowres (next_stage 3d_cascade_fullres). Stored
(the tests need neither upstream nor the dataset): plans.json, dataset.json, the properties of two
cases, fixed random lowres logits (float16 values; case A is passed as float32, case B as
float16, as upstream's sliding window returns them), and what upstream made of them:

- ``resample_and_save`` (the call its final validation makes) to each case's 3d_fullres
  preprocessed shape, read back from its ``.b2nd`` (and once more for case A with plans whose
  3d_lowres spacing is anisotropic, to cover the separate-z path);
- ``convert_labelmap_to_one_hot`` stacked onto data as its validation does, and batchgenerators'
  ``MoveSegAsOneHotToDataTransform`` (training) on the same input;
- the parameter counts of its networks for 3d_lowres and 3d_cascade_fullres.
"""

from __future__ import annotations

import copy
import json
import sys
import tempfile
from pathlib import Path

import blosc2
import numpy as np
import torch
from batchgeneratorsv2.transforms.nnunet.seg_to_onehot import MoveSegAsOneHotToDataTransform
from nnunetv2.inference.export_prediction import resample_and_save
from nnunetv2.training.dataloading.nnunet_dataset import nnUNetDatasetBlosc2
from nnunetv2.utilities.get_network_from_plans import get_network_from_plans
from nnunetv2.utilities.label_handling.label_handling import (
    convert_labelmap_to_one_hot,
    determine_num_input_channels,
)
from nnunetv2.utilities.plans_handling.plans_handler import PlansManager

CASES = {"A": "synth_000", "B": "synth_003"}
KEEP_PROPERTIES = (
    "spacing",
    "shape_before_cropping",
    "bbox_used_for_cropping",
    "shape_after_cropping_and_before_resampling",
)
ANISOTROPIC_LOWRES_SPACING = [4.0, 1.2587894646677542, 1.2534689780157984]


def upstream_next_stage(plans: dict, dataset_json: dict, logits: torch.Tensor, shape, props):
    manager = PlansManager(copy.deepcopy(plans))
    with tempfile.TemporaryDirectory() as tmp:
        target = str(Path(tmp) / "case")
        resample_and_save(
            logits,
            list(shape),
            target,
            manager,
            manager.get_configuration("3d_lowres"),
            props,
            dataset_json,
            1,
            nnUNetDatasetBlosc2,
        )
        array = blosc2.open(target + ".b2nd", mode="r")
        return array[:], {"chunks": list(array.chunks), "blocks": list(array.blocks)}


def parameter_count(plans: dict, dataset_json: dict, configuration: str) -> int:
    manager = PlansManager(copy.deepcopy(plans))
    conf = manager.get_configuration(configuration)
    labels = manager.get_label_manager(dataset_json)
    network = get_network_from_plans(
        conf.network_arch_class_name,
        conf.network_arch_init_kwargs,
        conf.network_arch_init_kwargs_req_import,
        determine_num_input_channels(manager, conf, dataset_json),
        labels.num_segmentation_heads,
        allow_init=True,
        deep_supervision=True,
    )
    return sum(p.numel() for p in network.parameters() if p.requires_grad)


def main(preprocessed: Path, out: Path) -> None:
    plans = json.loads((preprocessed / "nnUNetPlans.json").read_text())
    dataset_json = json.loads((preprocessed / "dataset.json").read_text())
    lowres = preprocessed / plans["configurations"]["3d_lowres"]["data_identifier"]
    fullres = preprocessed / plans["configurations"]["3d_fullres"]["data_identifier"]
    heads = PlansManager(plans).get_label_manager(dataset_json).num_segmentation_heads
    rng = np.random.default_rng(12)
    logits, outputs, properties, meta = {}, {}, {}, {"cases": CASES, "layout": {}}
    for key, case in CASES.items():
        props = json.loads((lowres / f"{case}.json").read_text())
        properties[key] = {k: props[k] for k in KEEP_PROPERTIES}
        shape = blosc2.open(str(lowres / f"{case}.b2nd"), mode="r").shape[1:]
        logits[key] = (rng.standard_normal((heads, *shape)) * 3).astype(np.float16)
        meta[f"lowres_shape_{key}"] = list(shape)
        meta[f"fullres_shape_{key}"] = list(blosc2.open(str(fullres / f"{case}.b2nd")).shape[1:])
    inputs = {
        "A": torch.from_numpy(logits["A"].astype(np.float32)),
        "B": torch.from_numpy(logits["B"]),
    }
    for key in CASES:
        shape = meta[f"fullres_shape_{key}"]
        outputs[key], meta["layout"][key] = upstream_next_stage(
            plans, dataset_json, inputs[key], shape, properties[key]
        )
    anisotropic = copy.deepcopy(plans)
    anisotropic["configurations"]["3d_lowres"]["spacing"] = ANISOTROPIC_LOWRES_SPACING
    meta["anisotropic_lowres_spacing"] = ANISOTROPIC_LOWRES_SPACING
    outputs["A_anisotropic"], meta["layout"]["A_anisotropic"] = upstream_next_stage(
        anisotropic, dataset_json, inputs["A"], meta["fullres_shape_A"], properties["A"]
    )
    # the cascade's input: two image channels and the previous stage's segmentation
    seg = outputs["A"][6:16, 10:22, 8:22]
    data = rng.standard_normal((2, *seg.shape)).astype(np.float32)
    foreground = PlansManager(plans).get_label_manager(dataset_json).foreground_labels
    stacked = np.vstack(
        (data, convert_labelmap_to_one_hot(seg, foreground, output_dtype=data.dtype))
    )
    batch = {
        "image": torch.from_numpy(data.copy()),
        "segmentation": torch.from_numpy(np.stack([np.zeros_like(seg), seg]).astype(np.int16)),
    }
    moved = MoveSegAsOneHotToDataTransform(1, foreground)(**batch)["image"].numpy()
    assert moved.dtype == stacked.dtype and np.array_equal(moved, stacked)
    meta["foreground_labels"] = list(foreground)
    meta["parameters"] = {
        c: parameter_count(plans, dataset_json, c) for c in ("3d_lowres", "3d_cascade_fullres")
    }
    meta["input_channels"] = {
        c: determine_num_input_channels(PlansManager(plans), c, dataset_json)
        for c in ("3d_lowres", "3d_cascade_fullres")
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "plans.json").write_text(json.dumps(plans, indent=1, sort_keys=False))
    (out / "dataset.json").write_text(json.dumps(dataset_json, indent=1))
    (out / "properties.json").write_text(json.dumps(properties, indent=1))
    (out / "upstream.json").write_text(json.dumps(meta, indent=1, default=int))
    np.savez_compressed(out / "logits.npz", **logits)
    np.savez_compressed(out / "upstream_next_stage.npz", **outputs)
    np.savez_compressed(
        out / "upstream_cascade_input.npz", data=data, previous_seg=seg, stacked=stacked
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
