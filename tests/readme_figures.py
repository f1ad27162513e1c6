#!/usr/bin/env python3
"""README's figures that are counts of something in the source must be that
count, so they cannot drift when an entry point is added.

  readme_figures.py ROOT

The fault-injection line README quotes ("fault injection: driver N/N, NVRTC
M/M, nvJitLink K/K entry points", what tests/cpu/core/test_fault_injection.cpp
prints at full coverage) must give, for each library, the number of entries
of its X-macro table: OXICUDA_DETAIL_DRIVER_API in include/oxicuda/core/ffi.hpp,
OXICUDA_DETAIL_NVRTC_API in nvrtc_ffi.hpp, OXICUDA_DETAIL_NVJITLINK_API in
nvjitlink_ffi.hpp. On a mismatch it prints the line README must hold.
"""
import os
import re
import sys

TABLES = (("driver", "core/ffi.hpp", "OXICUDA_DETAIL_DRIVER_API"), ("NVRTC", "core/nvrtc_ffi.hpp", "OXICUDA_DETAIL_NVRTC_API"),
          ("nvJitLink", "core/nvjitlink_ffi.hpp", "OXICUDA_DETAIL_NVJITLINK_API"))


def table_size(path, macro):
    """The number of X(...) entries in `#define MACRO(X) ...` (the lines continued with a backslash)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(rf"^#define {macro}\(X\)[ \t]*\\\n((?:.*\\\n)*.*)$", text, re.M)
    if not m:
        raise SystemExit(f"FAIL: no '#define {macro}(X)' in {path}")
    return len(re.findall(r"^\s*X\(", m.group(1), re.M))


def main(root):
    sizes = {lib: table_size(os.path.join(root, "include", "oxicuda", part), macro) for lib, part, macro in TABLES}
    want = "fault injection: " + ", ".join(f"{lib} {n}/{n}" for lib, n in sizes.items()) + " entry points"
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = " ".join(f.read().split())  # the line may be wrapped anywhere
    quoted = re.findall(r"fault injection: driver [^`]*? entry points", readme)
    print("the tables:", ", ".join(f"{lib} {n}" for lib, n in sizes.items()))
    print("README quotes:", quoted)
    if not quoted:
        print("FAIL: README.md quotes no 'fault injection: driver ... entry points' line")
        return 1
    wrong = [q for q in quoted if q != want]
    if wrong:
        print(f"FAIL: README.md's fault-injection figures are stale; it must say: `{want}`")
        return 1
    print("OK:", want)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
