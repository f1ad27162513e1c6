#!/usr/bin/env python3
"""One compile test: run a compiler on a translation unit and judge the result.

  compile.py --compiler CXX [--include H]... [--source F] [--link]
             [--expect-fail TEXT] -- FLAGS...

With --include, the translation unit is generated: one #include line per H,
in order. With --expect-fail, the test passes only when compilation fails
and the diagnostics contain TEXT (a misuse that must not compile).
--link compiles and links a program (in a temporary directory) instead of
checking syntax only.
"""
import argparse
import os
import shlex
import subprocess
import sys
import tempfile


def main():
    argv = sys.argv[1:]
    flags = []
    if "--" in argv:
        i = argv.index("--")
        argv, flags = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser()
    ap.add_argument("--compiler", required=True)
    ap.add_argument("--include", action="append", default=[])
    ap.add_argument("--source")
    ap.add_argument("--expect-fail")
    ap.add_argument("--link", action="store_true")
    args = ap.parse_args(argv)
    compiler = shlex.split(args.compiler)
    with tempfile.TemporaryDirectory() as tmp:
        source = args.source
        if args.include:
            source = os.path.join(tmp, "tu.cpp")
            with open(source, "w") as f:
                for h in args.include:
                    f.write(f"#include {h}\n")
                f.write("int main() { return 0; }\n")
        output = ["-o", os.path.join(tmp, "program")] if args.link else ["-fsyntax-only"]
        cmd = compiler + flags + output + [source]
        print("$", " ".join(shlex.quote(c) for c in cmd))
        if args.include:
            print("translation unit:", " ".join(f"#include {h}" for h in args.include))
        p = subprocess.run(cmd, capture_output=True, text=True)
        out = p.stdout + p.stderr
        if args.expect_fail is None:
            print(out)
            return 0 if p.returncode == 0 else 1
        if p.returncode == 0:
            print("compiled, but it must not")
            return 1
        if args.expect_fail not in out:
            print(out)
            print(f"failed to compile, but without the expected diagnostic {args.expect_fail!r}")
            return 1
        print(f"rejected as expected ({args.expect_fail!r})")
        return 0


if __name__ == "__main__":
    sys.exit(main())
