#!/usr/bin/env python3
"""The version is one: meson.build's project version is what the header says.

  version.py --version X.Y.Z --root R --compiler CXX

Checks OXICUDA_VERSION_MAJOR/MINOR/PATCH/STRING in include/oxicuda/core/config.hpp
and in the generated oxicuda.hpp (and its banner), CMakeLists.txt's
project(oxicuda VERSION ...), the vcpkg port's version,
that CHANGELOG.md has a section for it, and, by compiling, that the API lives
in the inline ABI namespace oxicuda::vX_Y_Z.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile


def macros(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    found = dict(re.findall(r"^\s*#\s*define\s+OXICUDA_VERSION_(MAJOR|MINOR|PATCH|STRING)\s+(\S+)", text, re.M))
    return found, text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--compiler", required=True)
    args = ap.parse_args()
    major, minor, patch = args.version.split(".")
    want = {"MAJOR": major, "MINOR": minor, "PATCH": patch, "STRING": f'"{args.version}"'}
    problems = []

    for rel in ("include/oxicuda/core/config.hpp", "oxicuda.hpp"):
        found, text = macros(os.path.join(args.root, rel))
        for key, value in want.items():
            if found.get(key) != value:
                problems.append(f"{rel}: OXICUDA_VERSION_{key} is {found.get(key)}, meson.build says {value}")
        if rel == "oxicuda.hpp" and f"Version {args.version}." not in text:
            problems.append("oxicuda.hpp: the banner does not name version " + args.version)

    with open(os.path.join(args.root, "CMakeLists.txt"), encoding="utf-8") as f:
        cmake = re.search(r"^project\(oxicuda\s+VERSION\s+(\S+)", f.read(), re.M)
    if not cmake or cmake.group(1) != args.version:
        problems.append(f"CMakeLists.txt: project(oxicuda VERSION {cmake.group(1) if cmake else '?'} ...)")

    with open(os.path.join(args.root, "ports", "oxicuda", "vcpkg.json"), encoding="utf-8") as f:
        port = json.load(f).get("version")
    if port != args.version:
        problems.append(f"ports/oxicuda/vcpkg.json: version is {port}")

    with open(os.path.join(args.root, "CHANGELOG.md"), encoding="utf-8") as f:
        if not re.search(rf"^## \[?{re.escape(args.version)}\]?", f.read(), re.M):
            problems.append(f"CHANGELOG.md: no '## {args.version}' section")

    abi = f"v{major}_{minor}_{patch}"
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "abi.cpp")
        with open(source, "w") as f:
            f.write('#include "oxicuda.hpp"\n#include <type_traits>\n'
                    f"static_assert(std::is_same_v<oxicuda::Stream, oxicuda::{abi}::Stream>);\n"
                    f"static_assert(std::is_same_v<oxicuda::Error, oxicuda::{abi}::Error>);\n")
        p = subprocess.run([args.compiler, "-std=c++20", "-fsyntax-only", "-I" + args.root, source],
                           capture_output=True, text=True)
        if p.returncode != 0:
            problems.append(f"the API is not in the inline namespace oxicuda::{abi}:\n{p.stderr}")

    print(f"meson.build version {args.version}; ABI namespace oxicuda::{abi}")
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
