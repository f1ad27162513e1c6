#!/usr/bin/env bash
# Builds what the GPU checks run, here (no GPU needed), into .device/ (an
# ignored folder): the GPU suite, the benchmarks and the examples. Then, on a
# machine with the GPU, `bash tools/gpu_run.sh` runs them (the device tool's
# `run` with carry [".device"]). Usage: tools/gpu_build.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build-device}
[ -d "$b" ] || meson setup "$b" -Dwerror=true >/dev/null
targets=(tests/oxicuda-gpu-tests bench/oxicuda-bench bench/oxicuda-bench-nvrtc examples/oxicuda-doctor
         examples/oxicuda-from-source examples/oxicuda-graph-pipeline examples/oxicuda-tma-tile)
ninja -C "$b" "${targets[@]}"
mkdir -p .device
for t in "${targets[@]}"; do cp "$b/$t" .device/; done
git rev-parse --short HEAD > .device/commit
echo "built at $(cat .device/commit): ${targets[*]##*/}"
