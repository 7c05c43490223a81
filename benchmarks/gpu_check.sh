#!/usr/bin/env bash
# One prepared command for a machine with one GPU and no network (< 10 minutes):
#   bash benchmarks/gpu_check.sh [--dry-run] [--out FILE] [--peer VENV] [--only SECTION ...]
# Installs the wheels in .whl/ (made by benchmarks/gpu_wheels.sh) into /tmp/site when present,
# runs our package from this checkout (PYTHONPATH, no install) and prints one table, also written
# as JSON (--out; default $OUT/gpu_check.json, else ./gpu_check.json). The code is in
# benchmarks/gpu/ (python -m benchmarks.gpu.check). --dry-run runs the same code paths on the
# CPU with tiny sizes (for CI). The whole run is cut at GPU_CHECK_BUDGET_S (default 545 s); every
# section has its own, smaller budget (benchmarks/gpu/context.py), and the JSON is rewritten
# after each section, so a cut run still leaves what it measured.
# Sections (budget on the GPU, s): train 45, loader 30, folds 80, predict 15, compile 70, ddp 15
# on the reference plans' sizes; then the real-size ones (benchmarks/gpu/realscale/), whose
# data the script makes on the machine (no network) with plans shipped in
# tests/data/plans/gpu_realscale/ (our planner's, from our fingerprint of the same synthetic
# volumes): real_data 30 (an MR-like set of 2 x 256^3 at 1 mm stored preprocessed, 3d_fullres
# patch 112x160x128 batch 2, and one CT-like 100x512x512 raw case at 2.5x0.7x0.7 mm), real_step 25
# (3d_fullres train step at that patch with AMP, peak GPU memory), real_busy 60 (GPU busy =
# compute / wall with 4, 8 and 12 augmentation workers of our training loader feeding that step),
# real_predict 50 (the CT-like case predicted end to end with the planned 3d_fullres network,
# mirroring off and on, export included; needs SimpleITK, else its rows say skipped). Upstream's
# step, loader and nnUNetPredictor run beside ours where nnunetv2 is importable (--peer, or the
# wheels). Last, issue 50's GPU paths (benchmarks/gpu/gpu_paths.py): oom_fallback 25 (a 256^3
# MR-like case through the sliding window, then again with an out-of-memory error forced at the
# first accumulation: peak GPU memory of the normal run, at the fault, when the retry starts and
# of the retry, seconds, outputs compared), predict_slots 10 (two prediction jobs' --gpu-slot
# started together: the GPU each got, the second's wait), visible_devices 20 (two folds' slots
# under an exported CUDA_VISIBLE_DEVICES of the machine's GPUs: pool entry and torch's device
# from inside), cudnn 30 (3d_fullres step with cudnn.benchmark off, on, deterministic). Then
# issue 47's new_scans 15: one shard job of the prediction mode over 3 cases of the predict
# section's size (its wall, cases per hour, GPU busy = network / job seconds).
# --only real_busy (say) runs one section; it makes the data it needs itself.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
python="${PYTHON:-python3}"
if [[ -x "$root/.venv/bin/python" && -z "${PYTHON:-}" ]]; then
  python="$root/.venv/bin/python"  # a development checkout
fi
if compgen -G "$root/.whl/*.whl" >/dev/null; then
  site="${GPU_CHECK_SITE:-/tmp/site}"
  # wheels made for the GPU machine (Python 3.12) may not fit a development machine's Python:
  # then say so and go on with what this Python has
  if "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" "$root"/.whl/*.whl; then
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  else
    echo "gpu_check: the wheels in .whl/ do not install here; going on without them" >&2
  fi
fi
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
exec timeout --signal=TERM --kill-after=10 "${GPU_CHECK_BUDGET_S:-545}" \
  "$python" -m benchmarks.gpu.check "$@"
