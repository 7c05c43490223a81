#!/usr/bin/env bash
# Make the tiny model trained BY UPSTREAM nnU-Net stored here (tests/data/upstream_model/):
# upstream's export zip of one fold (upstream_model.zip), the 2 test images (imagesTs/) and their
# held-out labels (labelsTs/, for a sanity check only), the raw dataset.json, upstream's own
# predictions of those 2 cases (predictions/*.nii.gz) with their probabilities (predictions/*.npz;
# not upstream's .pkl files), and facts.json (what the zip, the checkpoint and upstream's folders
# hold). Our tests use them to check that we predict with an upstream-trained model exactly like
# upstream does. README.md here is written by hand.
# Needs the peer venv (../shared/peer, nnunetv2 2.8.1, CPU torch) and our venv (/work/main/.venv, for
# the dataset generator). Runs in a private mktemp work folder (nnUNet_raw / nnUNet_preprocessed /
# nnUNet_results), so the peer's own folders are left alone. Usage: bash make_upstream_model.sh
# (655 s on 2 cores when the machine was quiet; far longer under load).
#
# Choices:
#  - dataset: `nnunet-core synthesize` (ours), 6 training + 2 test cases, 16x32x32, seed 3,
#    labels background / organ = 1 / lesion = 2, Dataset950_UpstreamTiny.
#  - plans: upstream's default nnUNetPlans, 3d_fullres only; then features_per_stage of the
#    3d_fullres architecture is cut to 4, 8, 16, 32, 32, ... (n_stages unchanged: 3 here, so
#    4, 8, 16; 65,814 parameters) so that checkpoint_final.pth stays small (~290 KB).
#  - trainer: nnUNetTrainer_UpstreamTiny, written by this script into the peer's nnunetv2 trainer
#    folder (and removed again at exit): EPOCHS (200) epochs x ITERS (25) train iterations, 5
#    validation iterations per epoch, everything else as nnUNetTrainer. (The shipped
#    nnUNetTrainer_5epochs has 250 iterations per epoch; 20 or 50 epochs x 25 never predicted the
#    ~25-50 voxel lesion, 200 x 25 does: lesion Dice 0.77 / 0.63 on the 2 test cases.)
# Upstream training is not seeded, so a rerun gives a similar model, not the same bytes: the stored
# predictions belong to the stored zip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OURS=${OURS:-/work/main/.venv/bin/nnunet-core}
EPOCHS=${EPOCHS:-200}
ITERS=${ITERS:-25}
source "${PEER_ENV:-/work/shared/peer/env.sh}"
WORK=$(mktemp -d)
export nnUNet_raw=$WORK/raw nnUNet_preprocessed=$WORK/pre nnUNet_results=$WORK/results
export nnUNet_def_n_proc=1 nnUNet_n_proc_DA=0 OMP_NUM_THREADS=1 nnUNet_compile=false
mkdir -p "$nnUNet_raw" "$nnUNet_preprocessed" "$nnUNet_results"
ID=950 NAME=Dataset950_UpstreamTiny TR=nnUNetTrainer_UpstreamTiny PLANS=nnUNetPlans CONF=3d_fullres
TRAINER_DIR=$(python -c "import nnunetv2, os; print(os.path.join(os.path.dirname(nnunetv2.__file__), 'training', 'nnUNetTrainer'))")
TRAINER_FILE=$TRAINER_DIR/$TR.py
cleanup() { rm -rf "$WORK" "$TRAINER_FILE"; }
trap cleanup EXIT
SECONDS=0

echo "== 1. synthesize $NAME"
"$OURS" synthesize --output "$nnUNet_raw/$NAME" --num-training 6 --num-test 2 --shape 16 32 32 --seed 3

echo "== 2. nnUNetv2_plan_and_preprocess -d $ID -c $CONF"
# nnUNet_n_proc_DA=0 would make the planner call torch.set_num_threads(0), which fails
nnUNet_n_proc_DA=1 nnUNetv2_plan_and_preprocess -d $ID -c $CONF -np 1 --verify_dataset_integrity > "$WORK/plan.txt" 2>&1 \
  || { cat "$WORK/plan.txt"; exit 1; }

echo "== 3. tiny network: features_per_stage of $CONF"
python - "$nnUNet_preprocessed/$NAME/$PLANS.json" $CONF <<'EOF'
import json, sys
path, conf = sys.argv[1], sys.argv[2]
plans = json.load(open(path))
kw = plans["configurations"][conf]["architecture"]["arch_kwargs"]
kw["features_per_stage"] = [min(4 * 2 ** i, 32) for i in range(kw["n_stages"])]
json.dump(plans, open(path, "w"), indent=4)
print("n_stages", kw["n_stages"], "features_per_stage", kw["features_per_stage"],
      "patch_size", plans["configurations"][conf]["patch_size"],
      "batch_size", plans["configurations"][conf]["batch_size"])
EOF

echo "== 4. nnUNetv2_train $ID $CONF 0 -tr $TR ($EPOCHS epochs x $ITERS iterations)"
cat > "$TRAINER_FILE" <<EOF
"""Written by nnunet-core tests/data/upstream_model/make_upstream_model.sh (removed again when it ends)."""
import torch
from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer


class $TR(nnUNetTrainer):
    """$EPOCHS epochs x $ITERS train iterations, 5 val iterations per epoch (default: 1000 x 250 / 50)."""
    def __init__(self, plans: dict, configuration: str, fold: int, dataset_json: dict,
                 device: torch.device = torch.device('cuda')):
        super().__init__(plans, configuration, fold, dataset_json, device)
        self.num_iterations_per_epoch = $ITERS
        self.num_val_iterations_per_epoch = 5
        self.num_epochs = $EPOCHS
EOF
nnUNetv2_train $ID $CONF 0 -tr $TR -p $PLANS --npz -device cpu > "$WORK/train.txt" 2>&1 \
  || { cat "$WORK/train.txt"; exit 1; }
grep -E "train_loss|val_loss|Pseudo dice|Epoch time" "$WORK/train.txt" | tail -8
MODEL=$nnUNet_results/$NAME/${TR}__${PLANS}__$CONF

echo "== 5. nnUNetv2_predict the test cases, with probabilities"
nnUNetv2_predict -i "$nnUNet_raw/$NAME/imagesTs" -o "$WORK/predictions" -d $ID -c $CONF -tr $TR -p $PLANS \
  -f 0 --save_probabilities -device cpu -npp 1 -nps 1 > "$WORK/predict.txt" 2>&1 \
  || { cat "$WORK/predict.txt"; exit 1; }

echo "== 6. nnUNetv2_export_model_to_zip"
nnUNetv2_export_model_to_zip -d $ID -o "$WORK/upstream_model.zip" -c $CONF -tr $TR -p $PLANS -f 0 \
  -chk checkpoint_final.pth > "$WORK/export.txt" 2>&1 || { cat "$WORK/export.txt"; exit 1; }

echo "== 7. copy into $HERE"
rm -rf "$HERE/imagesTs" "$HERE/labelsTs" "$HERE/predictions" "$HERE/upstream_model.zip" "$HERE/dataset.json"
mkdir -p "$HERE/imagesTs" "$HERE/labelsTs" "$HERE/predictions"
cp "$WORK/upstream_model.zip" "$HERE/"
cp "$nnUNet_raw/$NAME/dataset.json" "$HERE/"
cp "$nnUNet_raw/$NAME"/imagesTs/*.nii.gz "$HERE/imagesTs/"
cp "$nnUNet_raw/$NAME"/labelsTs/*.nii.gz "$HERE/labelsTs/"  # the held-out test labels (tiny), for a sanity check
cp "$WORK"/predictions/*.nii.gz "$WORK"/predictions/*.npz "$HERE/predictions/"  # not the .pkl files

python - "$HERE" "$WORK" "$MODEL" <<EOF
import collections, importlib.metadata, json, os, sys, zipfile
import numpy as np, torch
here, work, model = sys.argv[1:4]

def types_in(obj, found):
    t = type(obj)
    found.add(t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}")
    if isinstance(obj, dict):
        for k, v in obj.items():
            types_in(k, found); types_in(v, found)
    elif isinstance(obj, (list, tuple, set)):
        for v in obj:
            types_in(v, found)
    return found

def listing(folder):
    """All files under folder, as sorted relative paths."""
    return sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs)

def beside_pickles(folder):
    """For each folder holding .pkl files: the file suffixes found next to them (one case = one stem)."""
    out = {}
    for d, _, fs in os.walk(folder):
        pkl = [f for f in fs if f.endswith(".pkl")]
        if not pkl:
            continue
        stems = {f[:-4] for f in pkl}
        suffixes = collections.Counter()
        for f in fs:
            for s in stems:
                if f.startswith(s) and f != s + ".pkl":
                    suffixes["<case>" + f[len(s):]] += 1
                    break
        out[os.path.relpath(d, work)] = {"pickles": sorted(pkl), "beside_each_pickle": sorted(suffixes),
                                         "other_files": sorted(f for f in fs if not any(f.startswith(s) for s in stems))}
    return out

chk_path = os.path.join(model, "fold_0", "checkpoint_final.pth")
# the full unpickling happens here only, on upstream's own file made just now (trusted)
chk = torch.load(chk_path, map_location="cpu", weights_only=False)
try:
    torch.load(chk_path, map_location="cpu", weights_only=True)
    weights_only = "loads"
except Exception as e:
    lines = [l.strip() for l in str(e).splitlines() if "Unsupported global" in l] or [str(e).strip().splitlines()[0]]
    weights_only = f"{type(e).__name__}: " + lines[0][:300]
facts = {
    "nnunetv2_version": importlib.metadata.version("nnunetv2"),
    "torch_version": torch.__version__,
    "trainer": "$TR", "plans": "$PLANS", "configuration": "$CONF", "fold": 0,
    "dataset_id": $ID, "dataset_name": "$NAME",
    "schedule": {"epochs": $EPOCHS, "iterations_per_epoch": $ITERS, "val_iterations_per_epoch": 5},
    "zip_files": sorted(zipfile.ZipFile(os.path.join(here, "upstream_model.zip")).namelist()),
    "checkpoint_keys": list(chk.keys()),
    "checkpoint_types": {k: sorted(types_in(v, set())) for k, v in chk.items()},
    "checkpoint_values": {k: chk[k] for k in ("current_epoch", "trainer_name", "_best_ema")}
                         | {"inference_allowed_mirroring_axes": list(chk["inference_allowed_mirroring_axes"])},
    "checkpoint_init_args_keys": list(chk["init_args"].keys()),
    "checkpoint_logging_keys": list(chk["logging"].keys()),
    "checkpoint_logging_types": {k: sorted(types_in(v, set())) for k, v in chk["logging"].items()},
    "network_parameters": int(sum(v.numel() for v in chk["network_weights"].values())),
    "checkpoint_unsafe_globals": sorted(torch.serialization.get_unsafe_globals_in_checkpoint(chk_path)),
    "checkpoint_weights_only_load": weights_only,
    "checkpoint_network_weights_dtypes": sorted({str(v.dtype) for v in chk["network_weights"].values()}),
    "validation_summary_foreground_mean": json.load(open(os.path.join(model, "fold_0", "validation", "summary.json")))["foreground_mean"],
    "files_beside_pickles": beside_pickles(work),
    "model_folder_files": listing(model),
    "preprocessed_folder_files": listing(os.path.join(work, "pre", "$NAME")),
    "prediction_output_files": listing(os.path.join(work, "predictions")),
}
facts["checkpoint_values"]["_best_ema"] = float(facts["checkpoint_values"]["_best_ema"])
facts["checkpoint_init_args"] = {k: str(v) for k, v in chk["init_args"].items() if k not in ("plans", "dataset_json")}
# how confident upstream's predictions are (argmax must be stable) and how good (vs labelsTs)
import SimpleITK as sitk
facts["predictions"] = {}
for f in sorted(os.listdir(os.path.join(here, "predictions"))):
    if f.endswith(".npz"):
        case = f[:-4]
        npz = np.load(os.path.join(here, "predictions", f))
        p = npz["probabilities"]
        top2 = np.sort(p, axis=0)[-2:]
        margin = top2[1] - top2[0]
        seg = sitk.GetArrayFromImage(sitk.ReadImage(os.path.join(here, "predictions", case + ".nii.gz")))
        ref = sitk.GetArrayFromImage(sitk.ReadImage(os.path.join(here, "labelsTs", case + ".nii.gz")))
        dice = {int(c): float(2 * ((seg == c) & (ref == c)).sum() / max(1, (seg == c).sum() + (ref == c).sum()))
                for c in (1, 2)}
        facts["predictions"][case] = {
            "npz_keys": list(npz.keys()), "probabilities_shape": list(p.shape), "probabilities_dtype": str(p.dtype),
            "segmentation_shape_zyx": list(seg.shape), "segmentation_dtype": str(seg.dtype),
            "voxels_per_label": {int(c): int((seg == c).sum()) for c in np.unique(seg)},
            "dice_vs_labelsTs": dice, "min_top1_top2_margin": float(margin.min()),
            "voxels_margin_below_0.1": int((margin < 0.1).sum()),
            "voxels_margin_below_0.01": int((margin < 0.01).sum()), "voxels": int(margin.size)}
        print(case, facts["predictions"][case])
json.dump(facts, open(os.path.join(here, "facts.json"), "w"), indent=2, default=str)
EOF
echo "done in ${SECONDS}s"
du -sh "$HERE"
