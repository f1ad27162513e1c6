#!/usr/bin/env python3
"""What `#include "oxicuda.hpp"` costs a translation unit, against what its
standard includes alone cost, and against `cuda.h` where a toolkit has it.

  include_cost.py [--runs N] [--compiler CXX]... [--toolkit DIR] [--header F]
                  [--instructions]
  include_cost.py --typical [--compiler CXX]... [--wings]

--typical is the budget's measure (BENCHMARKS.md, "Include cost"): what
oxicuda adds on top of a translation unit that includes what a CUDA C++
unit typically already has, <memory> <string> <vector> <span> <chrono>
<system_error>, as a fraction of that unit's own instructions (valgrind
cachegrind --cache-sim=no over the compiler and its processes). With
--wings, each wing header alone is measured the same way (it pays for
its wing and the wings below).

Each translation unit is compiled with `CXX -std=c++20 -fsyntax-only` N times
(after one warm-up run each), the units taking turns so that a change in the
machine's load falls on all of them alike; the figure is the median CPU time
(user + system) of the compiler and the processes it runs, which a busy
machine disturbs less than wall time (the minimum is printed too). With
--instructions the figure is the number of instructions executed instead,
counted once (it does not vary from run to run) by valgrind's lackey tool
over the compiler and its processes: slow (minutes a unit), but untouched by
other load.

  std       only the standard and system headers oxicuda.hpp itself includes
            (read from its #include <...> lines, the platform ones under the
            same conditions)
  oxicuda   #include "oxicuda.hpp"
  cuda.h    #include <cuda.h> from the toolkit (when present)

and prints, per compiler, oxicuda / std: oxicuda's own cost on top of its
standard includes is that ratio minus one. Compilers default to g++ and
clang++ on PATH. Stdlib only; a measurement, never a pass/fail test.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SYSTEM_INCLUDE = re.compile(r"^\s*#\s*include\s+<([^>]+)>", re.M)
# Platform headers oxicuda includes under a condition; the baseline keeps it.
PLATFORM = {"windows.h": "defined(_WIN32)", "dlfcn.h": "!defined(_WIN32)"}


def standard_includes(header):
    with open(header, encoding="utf-8") as f:
        names = SYSTEM_INCLUDE.findall(f.read())
    lines = []
    for name in dict.fromkeys(names):
        if name in PLATFORM:
            lines += [f"#if {PLATFORM[name]}", f"#include <{name}>", "#endif"]
        else:
            lines.append(f"#include <{name}>")
    return "\n".join(lines) + "\n"


def cpu_seconds(cmd):
    """Runs cmd; returns the child's user + system CPU time, or raises."""
    pid = os.spawnvp(os.P_NOWAIT, cmd[0], cmd)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("failed: " + " ".join(cmd))
    return usage.ru_utime + usage.ru_stime


def instructions(cmd):
    """Instructions cmd executes (all its processes), by valgrind --tool=lackey."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "lackey.%p")
        subprocess.run(["valgrind", "--tool=lackey", "--trace-children=yes", "--log-file=" + log] + cmd,
                       check=True, capture_output=True)
        total = 0
        for name in os.listdir(tmp):
            with open(os.path.join(tmp, name)) as f:
                m = re.search(r"guest instrs:\s+([\d,]+)", f.read())
                total += int(m.group(1).replace(",", "")) if m else 0
        return total


TYPICAL = ["memory", "string", "vector", "span", "chrono", "system_error"]
WINGS = ["core", "driver", "memory", "kernel", "graph", "compile"]


def cachegrind_instructions(cmd):
    """Instructions cmd executes (all its processes), by valgrind cachegrind."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--trace-children=yes",
                        "--cachegrind-out-file=/dev/null", "--log-file=" + os.path.join(tmp, "cg.%p")] + cmd,
                       check=True, capture_output=True)
        total = 0
        for name in os.listdir(tmp):
            with open(os.path.join(tmp, name)) as f:
                m = re.search(r"I\s+refs:\s+([\d,]+)", f.read())
                total += int(m.group(1).replace(",", "")) if m else 0
        return total


def typical(compilers, header, wings):
    """The budget's measure: (typical + oxicuda - typical) / typical."""
    base = "".join(f"#include <{h}>\n" for h in TYPICAL)
    units = {"typical": base, "oxicuda.hpp": base + f'#include "{header}"\n'}
    if wings:
        units.update({f"{w} wing": base + f"#include <oxicuda/{w}.hpp>\n" for w in WINGS})
    print(f"include cost on top of a typical TU ({' '.join('<' + h + '>' for h in TYPICAL)}):")
    print("instructions (valgrind cachegrind --cache-sim=no --trace-children=yes), -std=c++20 -fsyntax-only")
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for i, (name, text) in enumerate(units.items()):
            paths[name] = os.path.join(tmp, f"unit{i}.cpp")
            with open(paths[name], "w", encoding="utf-8") as f:
                f.write(text)
        for compiler in compilers:
            flags = ["-std=c++20", "-fsyntax-only", "-I" + os.path.join(ROOT, "include")]
            counts = {name: cachegrind_instructions([compiler] + flags + [p]) for name, p in paths.items()}
            t = counts["typical"]
            print(f"{label(compiler)}: typical {t / 1e6:.0f}M")
            for name, n in counts.items():
                if name != "typical":
                    print(f"  + {name:<12} {n / 1e6:>8.0f}M  adds {(n - t) / t:.2f}x of the typical TU", flush=True)


def measure(compiler, paths, flags, runs, count_instructions):
    """{unit: (figure, cell text)}: the median CPU time in ms (cell: median
    and min) of runs taken in turn, or the instructions (cell: millions)."""
    cmds = {name: [compiler, "-std=c++20", "-fsyntax-only"] + flags + [path] for name, path in paths.items()}
    if count_instructions:
        return {name: (n, f"{n / 1e6:.0f}M") for name, n in ((k, instructions(c)) for k, c in cmds.items())}
    for cmd in cmds.values():
        cpu_seconds(cmd)  # warm-up: page cache, not counted
    times = {name: [] for name in cmds}
    for _ in range(runs):
        for name, cmd in cmds.items():
            times[name].append(1000 * cpu_seconds(cmd))
    medians = {name: statistics.median(t) for name, t in times.items()}
    return {name: (medians[name], f"{medians[name]:.0f} ({min(t):.0f})") for name, t in times.items()}


def label(compiler):
    out = subprocess.run([compiler, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True).stdout
    return f"{compiler} {out.strip()}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--compiler", action="append")
    ap.add_argument("--toolkit", default=os.environ.get("CUDA_PATH", "/usr/local/cuda"))
    ap.add_argument("--header", default=os.path.join(ROOT, "oxicuda.hpp"))
    ap.add_argument("--instructions", action="store_true", help="count instructions with valgrind instead")
    ap.add_argument("--typical", action="store_true", help="the budget's measure (see above)")
    ap.add_argument("--wings", action="store_true", help="with --typical: each wing header too")
    args = ap.parse_args()
    compilers = [c for c in (args.compiler or ["g++", "clang++"]) if shutil.which(c)]
    if not compilers:
        sys.exit("include_cost: no compiler found")
    header = os.path.abspath(args.header)
    if args.typical:
        typical(compilers, header, args.wings)
        return
    cuda_include = os.path.join(args.toolkit, "include")
    have_cuda = os.path.isfile(os.path.join(cuda_include, "cuda.h"))

    with tempfile.TemporaryDirectory() as tmp:
        units = {
            "std": standard_includes(header),
            "oxicuda": f'#include "{header}"\n',
        }
        if have_cuda:
            units["cuda.h"] = "#include <cuda.h>\n"
        paths = {}
        for name, text in units.items():
            paths[name] = os.path.join(tmp, name.replace(".", "_") + ".cpp")
            with open(paths[name], "w", encoding="utf-8") as f:
                f.write(text)

        what = ("instructions executed (valgrind lackey)" if args.instructions
                else f"CPU time in ms, median (min) of {args.runs} runs")
        print(f"include cost of {header}: -std=c++20 -fsyntax-only, {what}")
        print("std: " + " ".join(l.split()[-1] for l in units["std"].splitlines() if "include" in l)
              + " (<windows.h> on Windows only, <dlfcn.h> elsewhere)")
        if not have_cuda:
            print(f"cuda.h: not found under {cuda_include}, not measured")
        cols = list(units)
        print(f"{'compiler':<18}" + "".join(f"{c:>16}" for c in cols) + f"{'oxicuda/std':>13}"
              + (f"{'oxicuda/cuda.h':>16}" if have_cuda else ""))
        for compiler in compilers:
            m = measure(compiler, paths, ["-I" + cuda_include] if have_cuda else [], args.runs, args.instructions)
            row = f"{label(compiler):<18}" + "".join(f"{m[c][1]:>16}" for c in cols)
            row += f"{m['oxicuda'][0] / m['std'][0]:>13.2f}"
            if have_cuda:
                row += f"{m['oxicuda'][0] / m['cuda.h'][0]:>16.2f}"
            print(row, flush=True)
        print("oxicuda's own cost on top of its standard includes: oxicuda/std - 1")


if __name__ == "__main__":
    main()
