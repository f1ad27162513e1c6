#!/usr/bin/env python3
"""README's Compiler Explorer example, exactly as written, so it cannot rot.

  readme_example.py --root R --version X.Y.Z --compiler CXX

Takes the first ```cpp block of README.md's "## Compiler Explorer" section;
its one include of the header must be by URL, pinned to the tag vX.Y.Z:
that line is replaced by #include "oxicuda.hpp" (this checkout's), nothing
else changes. It must compile and link with -std=c++20 and strict warnings
as example.cpp, and run: on a machine without a driver library it must exit
2 and print exactly the section's first output block (the one README shows);
with a driver, exit 0 (the output is then this machine's and not compared).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

URL = "https://raw.githubusercontent.com/oxicuda/oxicuda/v{}/oxicuda.hpp"


def fail(message):
    print("FAIL:", message)
    return 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--compiler", required=True)
    args = ap.parse_args()
    with open(os.path.join(args.root, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    section = re.search(r"^## Compiler Explorer\n(.*?)(?=^## )", readme, re.M | re.S)
    if not section:
        return fail("README.md has no '## Compiler Explorer' section")
    code = re.search(r"^```cpp\n(.*?)^```\n", section.group(1), re.M | re.S)
    shown = re.search(r"^```\n(.*?)^```\n", section.group(1)[code.end():] if code else "", re.M | re.S)
    if not code or not shown:
        return fail("the section needs a ```cpp block and, after it, a ``` block of its output")
    include = f"#include <{URL.format(args.version)}>\n"
    if code.group(1).count(include) != 1 or code.group(1).count("#include <http") != 1:
        return fail(f"the example must include the header once, by the URL pinned to v{args.version}: {include}")
    source = code.group(1).replace(include, '#include "oxicuda.hpp"\n')

    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "example.cpp"), "w", encoding="utf-8") as f:
            f.write(source)
        cmd = [args.compiler, "-std=c++20", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
               "-I" + os.path.abspath(args.root), "example.cpp", "-o", "example"]
        print("$", " ".join(cmd), flush=True)
        p = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        print(p.stdout + p.stderr, flush=True)
        if p.returncode != 0:
            return fail("README's example does not compile")
        env = {k: v for k, v in os.environ.items() if k != "OXICUDA_LIBCUDA_PATH"}
        p = subprocess.run([os.path.join(tmp, "example")], cwd=tmp, env=env, capture_output=True, text=True)
    print(f"exit status {p.returncode}:\n{p.stdout}{p.stderr}")
    if "no CUDA driver library could be opened" not in p.stdout:
        return 0 if p.returncode == 0 else fail("with a driver, the example must exit 0")
    if p.returncode != 2 or p.stdout != shown.group(1):
        return fail("without a driver the example must exit 2 and print what README shows:\n" + shown.group(1))
    print("OK: prints what README shows, exit status 2")
    return 0


if __name__ == "__main__":
    sys.exit(main())
