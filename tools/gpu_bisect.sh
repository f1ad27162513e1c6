#!/usr/bin/env bash
# Finds which GPU test case leaves the process in a state that makes another
# case fail inside the whole suite although it passes alone. Runs the suite
# binary from .device/ (tools/gpu_build.sh) on the machine with the GPU:
#   tools/gpu_bisect.sh <file of the failing case> '<its doctest name pattern>'
# e.g. tools/gpu_bisect.sh gpu_vmm.cpp '*GrowableBuffer grows twice*'.
# Runs the case alone, then its file alone, then beside each other file's
# cases, then, for every file that makes it fail, beside each of that file's
# cases in turn. One line per run: PASS or FAIL, and what ran with the case.
set -u
cd "$(dirname "$0")/.."
bin=${BIN:-.device/oxicuda-gpu-tests}
home=$1
target=$2
out=${OUT:-gpu-out}/bisect
mkdir -p "$out"
n=0
esc() { printf '%s' "$1" | sed 's/,/\\,/g'; }  # doctest splits filter lists at commas
try() {  # try <label> <doctest arguments...>
  local label=$1 rc ran
  shift
  n=$((n + 1))
  "$bin" "$@" >"$out/$n.log" 2>&1
  rc=$?
  ran=$(grep -oE 'test cases: *[0-9]+' "$out/$n.log" | tail -1 | grep -oE '[0-9]+$')
  if [ $rc -eq 0 ]; then echo "PASS  (${ran:-0} cases) $label"; else echo "FAIL  (${ran:-0} cases, log $n) $label"; fi
  return $rc
}
try "alone" -tc="$(esc "$target")"
try "its file alone" -sf="*/$home" || { echo "its own file makes it fail: bisect within it"; }
bad=()
for f in $(cd tests/gpu && ls -- *.cpp); do
  [ "$f" = "$home" ] && continue
  try "after $f" -sf="*/$f,*/$home" || bad+=("$f")
done
for f in "${bad[@]}"; do
  mapfile -t cases < <("$bin" -sf="*/$f" --list-test-cases 2>/dev/null | grep -vE '^\[doctest\]|^=+$|^$|^GPU suite on ')
  for c in "${cases[@]}"; do try "after $f: $c" -tc="$(esc "$c"),$(esc "$target")"; done
done
