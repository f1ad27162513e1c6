#!/usr/bin/env python3
"""The API shows only the API: after `#include "oxicuda.hpp"` (or a part or
wing header), every macro named OXICUDA_* is either one of the public ones
below or lives under OXICUDA_DETAIL_. Fails naming each one that leaks.

  public_macros.py COMPILER HEADER [HEADER...] -- FLAGS...
"""
import re
import subprocess
import sys
import tempfile

# The macros users may read or call (README): the version, whether errors
# throw, and the documented call macros of the three libraries' tables.
PUBLIC = {"OXICUDA_VERSION_MAJOR", "OXICUDA_VERSION_MINOR", "OXICUDA_VERSION_PATCH", "OXICUDA_VERSION_STRING",
          "OXICUDA_EXCEPTIONS", "OXICUDA_DRIVER", "OXICUDA_NVRTC", "OXICUDA_NVJITLINK"}


def main():
    sep = sys.argv.index("--")
    compiler, headers, flags = sys.argv[1], sys.argv[2:sep], sys.argv[sep + 1:]
    failures = 0
    for header in headers:
        with tempfile.NamedTemporaryFile("w", suffix=".cpp") as tu:
            tu.write(f"#include {header}\n")
            tu.flush()
            out = subprocess.run([compiler, "-E", "-dM"] + flags + [tu.name], capture_output=True, text=True)
        if out.returncode != 0:
            print(f"{header}: the preprocessor failed:\n{out.stderr}")
            failures += 1
            continue
        names = sorted(set(re.findall(r"^#define (OXICUDA_\w+)", out.stdout, re.M)))
        leaks = [n for n in names if n not in PUBLIC and not n.startswith("OXICUDA_DETAIL_")]
        for n in leaks:
            print(f"{header}: the macro {n} leaks: #undef it, or name it OXICUDA_DETAIL_...")
        failures += bool(leaks)
        print(f"{header}: {len(names)} OXICUDA_ macros, {len(leaks)} leaking")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
