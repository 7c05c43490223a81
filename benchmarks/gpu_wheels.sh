#!/usr/bin/env bash
# The wheels benchmarks/gpu_check.sh needs on the GPU machine (Python 3.12, x86-64, no network),
# downloaded here into .whl/ (ignored through .git/info/exclude, never committed):
#   bash benchmarks/gpu_wheels.sh [--upstream]
# Ours: the GPU machine has torch, numpy, scipy, httpx, msgpack, rich, threadpoolctl; our code
# paths there (trainer, loader, sliding window, blosc2 case store) also need blosc2 and ndindex.
# SimpleITK and nibabel are not needed: gpu_check writes its cases with our blosc2 store and never
# reads or writes an image file, except the real_predict section (a raw case predicted and
# exported), whose rows say skipped where SimpleITK is not importable.
# --upstream adds nnunetv2 2.8.1 and what it imports that the machine lacks (SimpleITK alone is
# about 50 MiB); they are kept only when the working tree plus all wheels stay under the 64 MiB
# the device tool carries, else removed with the sizes that ruled them out.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PYTHON:-$root/.venv/bin/python}"
limit=$((64 * 1024 * 1024))
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
ours=(blosc2==4.15.0 ndindex==1.10.1)
# upstream's Requires-Dist (nnunetv2 2.8.1 and below) minus what the GPU machine already has
upstream=(nnunetv2==2.8.1 dynamic-network-architectures==0.4.4 batchgeneratorsv2==0.3.6
  batchgenerators==0.25.5 connected-components-3d==4.1.1 SimpleITK==2.5.7 nibabel==5.4.2
  graphviz==0.21 yacs==0.1.8 future==1.0.0 unittest2==1.1.0 linecache2==1.0.0
  traceback2==1.4.0 argparse==1.4.0)
upstream_sdists=(acvl-utils==0.2.6)  # published as a source archive only: built here

grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
mkdir -p .whl
download() {
  "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d "$1" "${@:2}"
}
bytes() { find "$@" -type f -printf '%s\n' 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
tree_bytes() {  # what the device tool carries besides .whl: tracked + untracked, not ignored
  git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null |
    awk '{s += $1} END {print s + 0}'
}

download .whl "${ours[@]}"
if [[ "${1:-}" == "--upstream" ]]; then
  stage="$(mktemp -d)"
  trap 'rm -rf "$stage"' EXIT
  download "$stage" "${upstream[@]}"
  "$python" -m pip wheel -q --no-deps -w "$stage" "${upstream_sdists[@]}"
  total=$(($(tree_bytes) + $(bytes .whl) + $(bytes "$stage")))
  if ((total > limit)); then
    echo "upstream left out: tree $(mib "$(tree_bytes)") + ours $(mib "$(bytes .whl)")" \
      "+ upstream $(mib "$(bytes "$stage")") = $(mib "$total") > 64 MiB" \
      "(SimpleITK alone: $(mib "$(bytes "$stage"/simpleitk-*.whl)"))" >&2
  else
    mv "$stage"/*.whl .whl/
  fi
fi
ls -l .whl
echo "wheels: $(mib "$(bytes .whl)"); working tree: $(mib "$(tree_bytes)");" \
  "limit for both together: 64 MiB"
