#!/usr/bin/env python3
"""Every ```cpp block of README.md compiles, so no example can rot.

  readme_blocks.py --root R --compiler CXX

A block that is a whole program (it defines main) compiles on its own, its
include of the header by URL (Compiler Explorer's) replaced by this
checkout's. Every other block is a fragment: it compiles as the body of a
function whose parameters are the names README's examples take as given
(PRELUDE below: `ctx`, `stream`, `n`, ...), in a nested scope, so a block may
declare the same names again. Its #include lines move to the top of the
file. All fragments go into one translation unit, checked with
-fsyntax-only; a #line directive makes each error name README.md's line.
Warnings are allowed (a fragment may leave a variable unused); errors fail.
A new example that uses a name none declares gets it added to PRELUDE.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# What README's fragments use without declaring it: one parameter each.
PRELUDE = """\
struct Layer {  // GraphedStep's example: a layer of a network
  oxicuda::Kernel<void(float*, float)> kernel;
  oxicuda::LaunchConfig config;
  oxicuda::DeviceBuffer<float>& weights;
};
#define README_GIVEN                                                                                     \\
  [[maybe_unused]] oxicuda::Context& ctx, [[maybe_unused]] oxicuda::Stream& stream,                      \\
  [[maybe_unused]] oxicuda::Module& m, [[maybe_unused]] unsigned n,                                      \\
  [[maybe_unused]] const char* source, [[maybe_unused]] const char* dbl_source,                          \\
  [[maybe_unused]] const char* util_source, [[maybe_unused]] std::vector<float>& a_host,                 \\
  [[maybe_unused]] std::vector<float>& b_host, [[maybe_unused]] std::vector<float>& host_vector,         \\
  [[maybe_unused]] oxicuda::DeviceBuffer<float>& data, [[maybe_unused]] oxicuda::PinnedBuffer<float>& host, \\
  [[maybe_unused]] oxicuda::Kernel<void(float*, float, unsigned)>& scale, [[maybe_unused]] int& replays,   \\
  [[maybe_unused]] oxicuda::Graph& other_graph_of_the_same_shape, [[maybe_unused]] std::vector<Layer>& layers, \\
  [[maybe_unused]] float lr
"""
URL_INCLUDE = re.compile(r'^#include <https://[^>]*/oxicuda\.hpp>\n', re.M)


def blocks(readme):
    """(first code line's number, code) of each ```cpp block."""
    found = []
    for m in re.finditer(r"^```cpp\n(.*?)^```\n", readme, re.M | re.S):
        found.append((readme.count("\n", 0, m.start(1)) + 1, m.group(1)))
    return found


def compile_source(compiler, root, tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    cmd = [compiler, "-std=c++20", "-fsyntax-only", "-I" + os.path.abspath(root), path]
    print("$", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    print(p.stdout + p.stderr, flush=True)
    return p.returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--compiler", required=True)
    args = ap.parse_args()
    with open(os.path.join(args.root, "README.md"), encoding="utf-8") as f:
        found = blocks(f.read())
    if not found:
        print("FAIL: README.md has no ```cpp block")
        return 1
    programs = [(line, code) for line, code in found if re.search(r"^int main\(", code, re.M)]
    fragments = [(line, code) for line, code in found if (line, code) not in programs]
    includes = {'#include "oxicuda.hpp"', "#include <vector>"}
    bodies = []
    for line, code in fragments:
        kept = []
        for text in code.splitlines():
            if re.match(r"\s*#\s*include\b", text):
                includes.add(text.strip())
                kept.append("")  # keeps the line numbers
            else:
                kept.append(text)
        bodies.append(f"void readme_line_{line}(README_GIVEN) {{\n  {{\n#line {line} \"README.md\"\n"
                      + "\n".join(kept) + "\n  }\n}\n")
    unit = "\n".join(sorted(includes)) + "\nusing namespace oxicuda;\n" + PRELUDE + "\n" + "\n".join(bodies)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{len(fragments)} fragments (README.md lines {', '.join(str(l) for l, _ in fragments)}), "
              f"{len(programs)} whole programs", flush=True)
        if not compile_source(args.compiler, args.root, tmp, "readme_fragments.cpp", unit):
            print("FAIL: a fragment of README.md does not compile (errors name README.md's lines; a name the "
                  "examples take as given goes into PRELUDE in tests/compile/readme_blocks.py)")
            ok = False
        for line, code in programs:
            text = f'#line {line} "README.md"\n' + URL_INCLUDE.sub('#include "oxicuda.hpp"\n', code)
            if not compile_source(args.compiler, args.root, tmp, f"readme_program_{line}.cpp", text):
                print(f"FAIL: README.md's program at line {line} does not compile")
                ok = False
    print("OK: every ```cpp block of README.md compiles" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
