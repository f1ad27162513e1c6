#!/usr/bin/env python3
"""What an oxicuda hot-path operation costs on the CPU beyond the raw driver
call, in instructions: deterministic, so it settles what timing runs on a GPU
cannot resolve (their run-to-run spread is several percent).

  overhead.py OXICUDA_OVERHEAD_BINARY FAKE_DRIVER_LIBRARY

Runs oxicuda-overhead (bench/overhead.cpp) against the fake driver under
valgrind's lackey tool, each mode with N and 2N operations; the difference
divided by N is one operation's instructions, the fixed set-up cancelling
out. The fake driver's entry points do the same work whichever side calls
them, so oxicuda minus raw is what the wrapper adds. Stdlib only; a
measurement, never a pass/fail test.
"""
import os
import re
import subprocess
import sys

PAIRS = [
    ("typed launch (Kernel<void(float*, unsigned)>)", "raw-launch", "launch"),
    ("untyped launch (Function)", "raw-launch", "untyped-launch"),
    ("event record", "raw-record", "record"),
    ("Stream handle copy + drop (raw: std::shared_ptr)", "raw-copy", "copy"),
    ("event create + destroy (context current)", "raw-event", "event"),
    ("event create + destroy: the floor (cuCtxGetCurrent, a Context copy)", "raw-event", "floor-event"),
    ("event create + destroy: oxicuda over that floor", "floor-event", "event"),
    ("GraphExec::set_kernel (one node of 100, context current)", "raw-set-kernel", "set-kernel"),
]
N = 20000


def instructions(binary, env, mode, n):
    out = subprocess.run(["valgrind", "--tool=lackey", binary, mode, str(n)], env=env, capture_output=True,
                         text=True, check=True)
    m = re.search(r"guest instrs:\s+([\d,]+)", out.stderr)
    if not m:
        sys.exit("no instruction count from valgrind:\n" + out.stderr)
    return int(m.group(1).replace(",", ""))


def per_op(binary, env, mode):
    return (instructions(binary, env, mode, 2 * N) - instructions(binary, env, mode, N)) / N


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, fake = sys.argv[1], os.path.abspath(sys.argv[2])
    env = dict(os.environ, OXICUDA_LIBCUDA_PATH=fake)
    cache = {}
    print(f"instructions per operation, {N} vs {2 * N} operations, against the fake driver")
    print("| operation | raw | oxicuda | oxicuda - raw |")
    print("| --- | ---: | ---: | ---: |")
    for label, raw_mode, ox_mode in PAIRS:
        for mode in (raw_mode, ox_mode):
            if mode not in cache:
                cache[mode] = per_op(binary, env, mode)
        raw, ox = cache[raw_mode], cache[ox_mode]
        print(f"| {label} | {raw:.1f} | {ox:.1f} | {ox - raw:+.1f} |")


if __name__ == "__main__":
    main()
