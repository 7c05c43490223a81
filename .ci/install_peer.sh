#!/usr/bin/env bash
# Upstream nnU-Net v2 2.8.1 with CPU torch, in the venv where the tests that compare with
# upstream look for it (tests/helpers: ~/.cache/nnunet-peer/venv; model exchange both ways,
# upstream parameter names, the loader swap). Without it those tests skip; CI must not skip them.
# torch is pinned before and with nnunetv2: unpinned, pip would pull a multi-GB CUDA build.
set -euo pipefail
PEER=${PEER:-$HOME/.cache/nnunet-peer}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
if [ -x "$PEER/venv/bin/nnUNetv2_predict" ]; then
  echo "upstream peer present: $PEER/venv"
  exit 0
fi
python3 -m venv "$PEER/venv"
"$PEER/venv/bin/pip" install -q --upgrade pip
"$PEER/venv/bin/pip" install -q "$TORCH_SPEC"
"$PEER/venv/bin/pip" install -q nnunetv2==2.8.1 "$TORCH_SPEC"
"$PEER/venv/bin/python" -c "import nnunetv2, torch; print('upstream peer ready:', torch.__version__)"
