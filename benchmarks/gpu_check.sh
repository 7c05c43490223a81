#!/usr/bin/env bash
# One prepared command for a machine with one GPU and no network (< 8 minutes):
#   bash benchmarks/gpu_check.sh [--dry-run] [--out FILE] [--peer VENV] [--only SECTION ...]
# Installs the wheels in .whl/ (made by benchmarks/gpu_wheels.sh) into /tmp/site when present,
# runs our package from this checkout (PYTHONPATH, no install) and prints one table, also written
# as JSON (--out; default $OUT/gpu_check.json, else ./gpu_check.json). The code is in
# benchmarks/gpu/ (python -m benchmarks.gpu.check). --dry-run runs the same code paths on the
# CPU with tiny sizes (for CI). The whole run is cut at GPU_CHECK_BUDGET_S (default 470 s); every
# section has its own, smaller budget (benchmarks/gpu/context.py), and the JSON is rewritten
# after each section, so a cut run still leaves what it measured.
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
exec timeout --signal=TERM --kill-after=10 "${GPU_CHECK_BUDGET_S:-470}" \
  "$python" -m benchmarks.gpu.check "$@"
