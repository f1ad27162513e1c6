#!/usr/bin/env bash
# Builds the entry-decoder fuzz test (entry_decoder.cpp) under AddressSanitizer
# and runs it for SECONDS (default 60): with libFuzzer where clang++ has it,
# else as a seeded mutation loop. Prints the inputs executed; exits non-zero
# on a crash or a sanitizer report. Usage: tests/fuzz/run.sh [SECONDS] [OUTDIR]
set -uo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
out=${2:-build-fuzz}
mkdir -p "$out"
python3 tools/amalgamate.py >/dev/null || { echo "amalgamate failed"; exit 1; }
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -I. -Wall -Wextra -Werror)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
if command -v clang++ >/dev/null &&
   clang++ "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
     tests/fuzz/entry_decoder.cpp -o "$out/entry_decoder" 2>"$out/build.log"; then
  mkdir -p "$out/corpus"
  echo "== libFuzzer, ${seconds}s"
  "$out/entry_decoder" -max_total_time="$seconds" -max_len=4096 -artifact_prefix="$out/" -print_final_stats=1 "$out/corpus" 2>&1 |
    grep -E '^(Done|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY|INFO: Seed)|runtime error' 
  exit "${PIPESTATUS[0]}"
fi
cat "$out/build.log" 2>/dev/null | head -5
cxx=${CXX:-g++}
echo "== no libFuzzer: a seeded mutation loop (${cxx}), ${seconds}s"
$cxx "${flags[@]}" -DOXICUDA_FUZZ_LOOP -fsanitize=address,undefined -fno-sanitize-recover=all \
  tests/fuzz/entry_decoder.cpp -o "$out/entry_decoder_loop" || { echo "build failed"; exit 1; }
"$out/entry_decoder_loop" "$seconds"
