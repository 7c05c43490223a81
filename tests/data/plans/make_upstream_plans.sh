#!/usr/bin/env bash
# Regenerate upstream's ResEnc L/XL plans and the non-default GPU-memory-target plans stored here.
# Needs the peer venv (../shared/peer, nnunetv2 2.8.1). Runs in a private work folder, so the
# peer's own nnUNet_raw / nnUNet_preprocessed are left alone. Usage: bash make_upstream_plans.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REF=${REF:-/work/shared/reference}
source "${PEER_ENV:-/work/shared/peer/env.sh}"
WORK=$(mktemp -d)
export nnUNet_raw=$WORK/raw nnUNet_preprocessed=$WORK/pre nnUNet_results=$WORK/results
export nnUNet_def_n_proc=1 OMP_NUM_THREADS=1
mkdir -p "$nnUNet_raw" "$nnUNet_preprocessed"

# stage <folder under tests/data/plans> <raw folder to copy, or "placeholder">
stage() {
  local folder=$HERE/$1 raw=$2 name
  name=$(python -c "import json,sys;print(json.load(open(sys.argv[1]))['dataset_name'])" "$folder/nnUNetPlans.json")
  mkdir -p "$nnUNet_preprocessed/$name"
  cp "$folder/dataset_fingerprint.json" "$nnUNet_preprocessed/$name/"
  if [ "$raw" = placeholder ]; then  # one tiny case: upstream only opens it to pick the reader
    mkdir -p "$nnUNet_raw/$name/imagesTr" "$nnUNet_raw/$name/labelsTr"
    cp "$folder/dataset.json" "$nnUNet_raw/$name/"
    python - "$nnUNet_raw/$name" <<'EOF'
import sys, numpy as np, SimpleITK as sitk
root = sys.argv[1]
sitk.WriteImage(sitk.GetImageFromArray(np.zeros((4, 5, 6), np.float32)), f"{root}/imagesTr/case_000_0000.nii.gz")
sitk.WriteImage(sitk.GetImageFromArray(np.zeros((4, 5, 6), np.uint8)), f"{root}/labelsTr/case_000.nii.gz")
EOF
  else
    cp -r "$raw" "$nnUNet_raw/$name"
    chmod -R u+w "$nnUNet_raw/$name"
  fi
}

# plan <folder> <dataset id> <plans file to keep> <nnUNetv2_plan_experiment flags...>
plan() {
  local folder=$1 id=$2 plans=$3 name
  shift 3
  name=$(python -c "import json,sys;print(json.load(open(sys.argv[1]))['dataset_name'])" "$HERE/$folder/nnUNetPlans.json")
  echo "== $folder: nnUNetv2_plan_experiment -d $id $*"
  nnUNetv2_plan_experiment -d "$id" "$@" > "$WORK/stdout.txt" 2>&1 || { cat "$WORK/stdout.txt"; exit 1; }
  cp "$nnUNet_preprocessed/$name/$plans.json" "$HERE/$folder/$plans.json"
}

SCENARIOS="a_Dataset901_IsoCT:901 b_Dataset902_AnisoMRI:902 c_Dataset903_ToyAniso:903
e_Dataset905_Natural2D:905 f_Dataset906_LargeCT:906 g_Dataset907_HippoLike:907
i_Dataset909_TransposedAxis:909 synth3d_peer900:900
preprocessing_cases/Dataset951_PPAnisoMR:951 preprocessing_cases/Dataset952_PPCT:952"
for entry in $SCENARIOS; do
  folder=${entry%%:*} id=${entry##*:}
  case $folder in
    synth3d_peer900) stage "$folder" placeholder ;;
    preprocessing_cases/*) stage "$folder" "$REF/preprocessing/${folder#preprocessing_cases/}/raw" ;;
    *) stage "$folder" "$REF/plans/$folder/raw" ;;
  esac
  plan "$folder" "$id" nnUNetResEncUNetLPlans -pl nnUNetPlannerResEncL
  plan "$folder" "$id" nnUNetResEncUNetXLPlans -pl nnUNetPlannerResEncXL
done

# the ResEnc base class (8 GB, 5% cap) and non-default GPU memory targets
for entry in a_Dataset901_IsoCT:901 f_Dataset906_LargeCT:906; do
  folder=${entry%%:*} id=${entry##*:}
  plan "$folder" "$id" nnUNetResEncUNetPlans -pl ResEncUNetPlanner
  plan "$folder" "$id" nnUNetPlans_4GB -gpu_memory_target 4 -overwrite_plans_name nnUNetPlans_4GB
done
for entry in a_Dataset901_IsoCT:901 b_Dataset902_AnisoMRI:902; do
  folder=${entry%%:*} id=${entry##*:}
  plan "$folder" "$id" nnUNetResEncUNetLPlans_12GB -pl nnUNetPlannerResEncL \
    -gpu_memory_target 12 -overwrite_plans_name nnUNetResEncUNetLPlans_12GB
done
# a user-chosen full-resolution target spacing (z y x, before the transpose)
plan b_Dataset902_AnisoMRI 902 nnUNetPlans_ots -overwrite_target_spacing 3.0 0.8 0.8 \
  -overwrite_plans_name nnUNetPlans_ots
plan i_Dataset909_TransposedAxis 909 nnUNetPlans_ots -overwrite_target_spacing 1.0 1.0 3.0 \
  -overwrite_plans_name nnUNetPlans_ots
rm -rf "$WORK"
echo "done"
