#!/usr/bin/env python3
"""The loader on Windows: oxicuda.hpp built with MinGW-w64 and run under Wine.

  run.py --cxx x86_64-w64-mingw32-g++ --cc x86_64-w64-mingw32-gcc --header-dir DIR

Builds tests/windows/loader.cpp against DIR/oxicuda.hpp, and stand-ins for
nvcuda.dll (cuInit answers CUDA_ERROR_NO_DEVICE) and NVRTC's DLL
(nvrtcVersion answers 13.0), lays them out as a driver, a CUDA 13 toolkit
(bin\\x64), a CUDA 12 toolkit (bin), a conda environment (Library\\bin) and a
loose copy, and runs the program under Wine once per search step, checking
what the driver's and NVRTC's searches found and what their messages say.
Exit 77 (meson: skipped) when the cross compiler or Wine is missing.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def find_wine():
    for name in ("wine64", "wine"):
        path = shutil.which(name)
        if path:
            return path
    for path in ("/usr/lib/wine/wine64", "/usr/lib/wine/wine"):
        if os.access(path, os.X_OK):
            return path
    return None


def windows_path(path):
    """Wine's Z: drive is the Unix root."""
    return "Z:" + path.replace("/", "\\")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cxx", required=True)
    ap.add_argument("--cc", required=True)
    ap.add_argument("--header-dir", required=True)
    args = ap.parse_args()
    wine = find_wine()
    missing = [what for what, have in (("the MinGW-w64 compilers", shutil.which(args.cxx) and shutil.which(args.cc)),
                                      ("Wine (the wine64 package)", wine)) if not have]
    if missing:
        print("SKIP: needs " + " and ".join(missing))
        return 77

    failures = []

    def expect(what, ok, seen=None):
        print(("ok: " if ok else "FAIL: ") + what + ("" if ok or seen is None else f" (seen: {seen!r})"))
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        def build(cmd):
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(" ".join(cmd) + "\n" + r.stdout + r.stderr)
                raise SystemExit(1)

        dirs = {name: os.path.join(tmp, *name.split("/")) for name in
                ("app", "drv", "cuda13/bin/x64", "cuda12/bin", "conda/Library/bin", "loose")}
        for d in dirs.values():
            os.makedirs(d)
        exe = os.path.join(dirs["app"], "loader.exe")
        build([args.cxx, "-std=c++20", "-O1", "-static", "-Wall", "-Wextra", "-Werror", "-I", args.header_dir,
               os.path.join(HERE, "loader.cpp"), "-o", exe])
        build([args.cc, "-shared", "-O1", os.path.join(HERE, "fake_nvcuda.c"), "-o",
               os.path.join(dirs["drv"], "nvcuda.dll")])
        nvrtc = os.path.join(tmp, "nvrtc.dll")
        build([args.cc, "-shared", "-O1", os.path.join(HERE, "fake_nvrtc.c"), "-o", nvrtc])
        placed = {"cuda13/bin/x64": "nvrtc64_130_0.dll", "cuda12/bin": "nvrtc64_120_0.dll",
                  "conda/Library/bin": "nvrtc64_120_0.dll", "loose": "nvrtc64_130_0.dll"}
        for d, name in placed.items():
            shutil.copy(nvrtc, os.path.join(dirs[d], name))
        win = {k: windows_path(v) for k, v in dirs.items()}
        for root in ("cuda13", "cuda12", "conda"):  # the toolkits' and conda's roots
            win[root] = windows_path(os.path.join(tmp, root))

        base = {k: v for k, v in os.environ.items()
                if not k.startswith("OXICUDA_") and k not in ("CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX", "WINEPATH")}
        base.update(WINEPREFIX=os.path.join(tmp, "prefix"), WINEDEBUG="-all", WINEDLLOVERRIDES="mscoree,mshtml=")
        subprocess.run([wine, "wineboot", "-i"], env=base, capture_output=True, timeout=300)

        def run(step, env=None, preload=None):
            cmd = [wine, exe] + ([preload] if preload else [])
            r = subprocess.run(cmd, cwd=dirs["app"], env=dict(base, **(env or {})), capture_output=True, text=True,
                               timeout=120)
            out = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
            print(f"== {step}: exit {r.returncode}")
            for k, v in out.items():
                print(f"   {k} = {v}")
            if r.returncode != 0 or "driver.status" not in out:
                expect(f"{step}: the program ran", False, r.stdout + r.stderr)
                return {}
            return out

        o = run("nothing installed")
        expect("no driver: no_library", o.get("driver.status") == "no_library", o.get("driver.status"))
        expect("no driver: the reason names nvcuda.dll, the Windows error and its text, and the variable",
               "tried nvcuda.dll (Windows error 126: " in o.get("driver.reason", "")
               and "set OXICUDA_LIBCUDA_PATH to its nvcuda.dll" in o.get("driver.reason", ""))
        expect("no driver: a call is an Error, not a crash", o.get("error") not in (None, "none"), o.get("error"))
        reason = o.get("nvrtc.reason", "")
        expect("no NVRTC: every DLL name tried, newest first, and what to do",
               o.get("nvrtc.found") == "0"
               and reason.find("nvrtc64_130_0.dll") < reason.find("nvrtc64_120_0.dll") < reason.find("nvrtc64_112_0.dll")
               and reason.find("nvrtc64_130_0.dll") >= 0 and "OXICUDA_LIBNVRTC_PATH to its nvrtc64_*.dll" in reason,
               reason)
        expect("no NVRTC: no Unix path in the search", "/usr/local/cuda" not in reason, reason)

        drv_dll = win["drv"] + "\\nvcuda.dll"
        o = run("OXICUDA_LIBCUDA_PATH and OXICUDA_LIBNVRTC_PATH",
                {"OXICUDA_LIBCUDA_PATH": drv_dll, "OXICUDA_LIBNVRTC_PATH": win["loose"] + "\\nvrtc64_130_0.dll"})
        expect("the driver named by OXICUDA_LIBCUDA_PATH is opened and initialized (cuInit's refusal explained)",
               o.get("driver.status") == "init_failed" and o.get("driver.library") == drv_dll
               and o.get("driver.version") == "13000" and "CUDA_ERROR_NO_DEVICE (100)" in o.get("driver.reason", ""),
               (o.get("driver.status"), o.get("driver.library"), o.get("driver.reason")))
        expect("a call reports the driver's CUDA_ERROR_NO_DEVICE", o.get("error") == "CUDA_ERROR_NO_DEVICE",
               o.get("error"))
        expect("NVRTC from OXICUDA_LIBNVRTC_PATH, its version asked",
               o.get("nvrtc.found") == "1" and o.get("nvrtc.found_by") == "OXICUDA_LIBNVRTC_PATH"
               and o.get("nvrtc.version") == "13000", (o.get("nvrtc.found_by"), o.get("nvrtc.version")))

        o = run("the driver on the search path (PATH)", {"WINEPATH": win["drv"]})
        expect("nvcuda.dll found by name on PATH",
               o.get("driver.status") == "init_failed" and o.get("driver.library") == "nvcuda.dll",
               (o.get("driver.status"), o.get("driver.library")))

        o = run("$CUDA_PATH, a CUDA 13 toolkit (bin\\x64)", {"CUDA_PATH": win["cuda13"]})
        expect("NVRTC found in $CUDA_PATH\\bin\\x64",
               o.get("nvrtc.found_by") == "$CUDA_PATH"
               and o.get("nvrtc.library") == win["cuda13"] + "\\bin\\x64\\nvrtc64_130_0.dll"
               and o.get("nvrtc.path", "").lower() == o.get("nvrtc.library", "").lower(),
               (o.get("nvrtc.found_by"), o.get("nvrtc.library"), o.get("nvrtc.path")))

        o = run("$CUDA_HOME before $CUDA_PATH, a CUDA 12 toolkit (bin)",
                {"CUDA_HOME": win["cuda12"], "CUDA_PATH": win["cuda13"]})
        expect("NVRTC 12 found in $CUDA_HOME\\bin first",
               o.get("nvrtc.found_by") == "$CUDA_HOME"
               and o.get("nvrtc.library") == win["cuda12"] + "\\bin\\nvrtc64_120_0.dll",
               (o.get("nvrtc.found_by"), o.get("nvrtc.library")))

        o = run("$CONDA_PREFIX before the toolkits", {"CONDA_PREFIX": win["conda"], "CUDA_PATH": win["cuda13"]})
        expect("NVRTC found in $CONDA_PREFIX\\Library\\bin",
               o.get("nvrtc.found_by") == "$CONDA_PREFIX"
               and o.get("nvrtc.library") == win["conda"] + "\\Library\\bin\\nvrtc64_120_0.dll",
               (o.get("nvrtc.found_by"), o.get("nvrtc.library")))

        loose = win["loose"] + "\\nvrtc64_130_0.dll"
        o = run("a copy the process loaded already", {"CUDA_PATH": win["cuda13"]}, preload=loose)
        expect("NVRTC already loaded is used, not the toolkit's",
               o.get("nvrtc.found_by") == "already loaded" and o.get("nvrtc.path", "").lower() == loose.lower(),
               (o.get("nvrtc.found_by"), o.get("nvrtc.path")))

        o = run("OXICUDA_LIBNVRTC_PATH naming a DLL that is not NVRTC", {"OXICUDA_LIBNVRTC_PATH": drv_dll})
        expect("not NVRTC: refused, saying so",
               o.get("nvrtc.found") == "0" and drv_dll in o.get("nvrtc.reason", ""), o.get("nvrtc.reason"))

    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
