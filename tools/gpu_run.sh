#!/usr/bin/env bash
# Runs the GPU checks from the binaries tools/gpu_build.sh put in .device/,
# writing logs under $OUT (default gpu-out/) and a summary to stdout:
#   the GPU suite; it under compute-sanitizer memcheck (--leak-check full;
#   MEMCHECK=0 leaves it out)
#   and, with RACE=1, racecheck; the examples; the benchmarks named by
#   BENCH (Catch2 test-case patterns, comma separated; none if empty) as
#   ratios against the raw calls; with NVRTCB=1 the kernel-cache benchmark;
#   with SYNC=1 synccheck.
set -u
cd "$(dirname "$0")/.."
D=.device
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
echo "binaries built at $(cat $D/commit 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
summary() { echo "$1: rc $2; $(grep -E '^\[doctest\] (test cases|Status)' "$3" | tr '\n' ' ')"; }
$D/oxicuda-gpu-tests >"$OUT/gpu-suite.log" 2>&1; summary "gpu suite" $? "$OUT/gpu-suite.log"
echo "  ($SECONDS s)"
san="compute-sanitizer --error-exitcode 99"
if [ "${MEMCHECK:-1}" = 1 ]; then
  # Not the case whose child makes a kernel assert on purpose (issue 30.5):
  # memcheck counts that assert as its one error.
  $san --tool memcheck --leak-check full --report-api-errors no $D/oxicuda-gpu-tests \
    --test-case-exclude='*device-side assert*' >"$OUT/memcheck.log" 2>&1
  summary "memcheck" $? "$OUT/memcheck.log"; grep -E "ERROR SUMMARY|LEAK SUMMARY|bytes leaked" "$OUT/memcheck.log" | tail -3
  echo "  ($SECONDS s)"
fi
$D/oxicuda-doctor >"$OUT/doctor.txt" 2>&1; echo "doctor: rc $?"
export OXICUDA_CACHE_DIR="$PWD/$OUT/kcache"
for i in 1 2; do $D/oxicuda-from-source >>"$OUT/from-source.txt" 2>&1; echo "from-source run $i: rc $? $(tail -1 "$OUT/from-source.txt")"; done
$D/oxicuda-graph-pipeline >"$OUT/graph-pipeline.txt" 2>&1; echo "graph-pipeline: rc $?"
$D/oxicuda-tma-tile >"$OUT/tma-tile.txt" 2>&1; echo "tma-tile: rc $? $(tail -1 "$OUT/tma-tile.txt")"
if [ -n "${BENCH:-}" ]; then
  $D/oxicuda-bench -r xml "$BENCH" >"$OUT/bench.xml" 2>"$OUT/bench.err"; echo "bench: rc $?"
  python3 bench/ratios.py "$OUT/bench.xml" | tee "$OUT/ratios.txt"; echo "  ($SECONDS s)"
fi
if [ "${NVRTCB:-0}" = 1 ]; then $D/oxicuda-bench-nvrtc >"$OUT/bench-nvrtc.txt" 2>&1; echo "bench-nvrtc: rc $?"; tail -15 "$OUT/bench-nvrtc.txt"; fi
if [ "${SYNC:-0}" = 1 ]; then
  $san --tool synccheck $D/oxicuda-gpu-tests --test-case-exclude='*device_runtime*' >"$OUT/synccheck.log" 2>&1
  summary "synccheck" $? "$OUT/synccheck.log"; grep -E "ERROR SUMMARY" "$OUT/synccheck.log" | tail -1
fi
# Last: the slowest, so that a time limit cuts it and not the figures above.
if [ "${RACE:-0}" = 1 ]; then
  # Not the kernel that launches a kernel: racecheck does not support CUDA
  # Dynamic Parallelism and warns (exit 99) where it meets one.
  $san --tool racecheck $D/oxicuda-gpu-tests --test-case-exclude='*device_runtime*' >"$OUT/racecheck.log" 2>&1
  summary "racecheck" $? "$OUT/racecheck.log"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$OUT/racecheck.log" | tail -2
fi
