#!/usr/bin/env python3
"""Consumer tests: oxicuda installed (or vendored) and used by a project of
each kind, built and run the way its users build it.

  consumer.py install    --source-root R
  consumer.py cmake      --source-root R --version X.Y.Z [--fake-driver LIB]
  consumer.py pkg-config --source-root R [--fake-driver LIB]
  consumer.py meson      --source-root R [--fake-driver LIB]

install: a packager's configuration (-Dtests=false -Dexamples=false
-Dbench=false, vcpkg's --libdir lib and relocatable pkg-config) set up with
no pkg-config and no cmake program to be found, so nothing the tests need
(doctest, the CUDA toolkit) can be looked up; `meson install --destdir`
must then lay down exactly the expected files.

cmake, pkg-config: `meson install --destdir` into a temporary directory, then
the project in tests/consumers/<kind> builds against that prefix (for cmake,
tests/consumers/cmake/version-check first checks the package's version file). meson: the
project in tests/consumers/meson with this source tree as
subprojects/oxicuda. Each program then runs:
  - with OXICUDA_LIBCUDA_PATH naming a missing file: it must exit 2 and print
    the library's reason, which names that file;
  - with the fake driver (when given): it must exit 0 and list its devices;
  - as the machine is: exit 0 (a driver and a device) or 2 with the reason.
Everything happens in a temporary directory; the source tree is not written.
"""
import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "/usr/local"
PACKAGER = ["-Dtests=false", "-Dexamples=false", "-Dbench=false"]
MISSING_DRIVER = "/nonexistent/oxicuda-consumer/libcuda.so.1"


class Failed(Exception):
    pass


def run(cmd, env=None):
    print("$", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    print(p.stdout + p.stderr, flush=True)
    if p.returncode != 0:
        raise Failed(f"exit status {p.returncode}: {' '.join(cmd)}")


def meson_install(root, tmp, *setup_args):
    """Configures the source tree as a packager would and installs it under
    tmp/stage; returns the staged prefix."""
    build, stage = os.path.join(tmp, "oxicuda-build"), os.path.join(tmp, "stage")
    run(["meson", "setup", build, root, "--prefix", PREFIX, *PACKAGER, *setup_args])
    run(["meson", "install", "-C", build, "--destdir", stage, "--quiet"])
    return stage + PREFIX


def find_file(top, name):
    for dirpath, _, files in os.walk(top):
        if name in files:
            return dirpath
    raise Failed(f"{name} is not installed under {top}")


def check_install(root, tmp):
    native = os.path.join(tmp, "no-lookups.ini")
    with open(native, "w") as f:
        f.write("[binaries]\npkgconfig = 'false'\ncmake = 'false'\n")
    prefix = meson_install(root, tmp, "--native-file", native, "--libdir", "lib",
                           "-Dpkgconfig.relocatable=true")
    parts = sorted(os.listdir(os.path.join(root, "include", "oxicuda")))
    expected = {"include/oxicuda.hpp", "lib/pkgconfig/oxicuda.pc",
                "lib/cmake/oxicuda/oxicudaConfig.cmake", "lib/cmake/oxicuda/oxicudaConfigVersion.cmake"}
    expected |= {f"include/oxicuda/{p}" for p in parts}
    found = {os.path.relpath(os.path.join(d, f), prefix) for d, _, fs in os.walk(prefix) for f in fs}
    print("installed:\n  " + "\n  ".join(sorted(found)))
    if found != expected:
        raise Failed(f"missing {sorted(expected - found)}, unexpected {sorted(found - expected)}")
    for rel, src in [("include/oxicuda.hpp", "oxicuda.hpp")] + [(f"include/oxicuda/{p}", f"include/oxicuda/{p}")
                                                                 for p in parts]:
        if not filecmp.cmp(os.path.join(prefix, rel), os.path.join(root, src), shallow=False):
            raise Failed(f"{rel} differs from {src}")
    with open(os.path.join(prefix, "lib/pkgconfig/oxicuda.pc")) as f:
        pc = f.read()
    if "prefix=${pcfiledir}/../.." not in pc:
        raise Failed("oxicuda.pc is not relocatable:\n" + pc)


def check_program(exe, fake_driver):
    def launch(what, overrides):
        env = {k: v for k, v in os.environ.items() if k != "OXICUDA_LIBCUDA_PATH"}
        env.update(overrides)
        p = subprocess.run([exe], env=env, capture_output=True, text=True)
        print(f"-- {what}: exit status {p.returncode}\n{p.stdout}{p.stderr}", flush=True)
        return p.returncode, p.stdout

    code, out = launch("no driver", {"OXICUDA_LIBCUDA_PATH": MISSING_DRIVER})
    if code != 2 or "no usable CUDA driver: " not in out or MISSING_DRIVER not in out:
        raise Failed("without a driver the program must exit 2 and print the reason, naming the file tried")
    if fake_driver:
        code, out = launch("fake driver", {"OXICUDA_LIBCUDA_PATH": fake_driver})
        if code != 0 or "device 0: " not in out:
            raise Failed("on the fake driver the program must exit 0 and list its devices")
    code, out = launch("this machine", {})
    if code not in (0, 2) or (code == 2 and "no usable CUDA driver: " not in out and "0 device(s)" not in out):
        raise Failed("on this machine the program must exit 0, or 2 with the reason")


def cmake_project(prefix, tmp, consumers, version):
    """Builds tests/consumers/cmake against the package installed under prefix
    (after version-check/ has checked its version file); returns the program."""
    run(["cmake", "-S", os.path.join(consumers, "cmake", "version-check"), "-B", os.path.join(tmp, "version-check"),
         "-DCMAKE_PREFIX_PATH=" + prefix, "-DOXICUDA_EXPECTED_VERSION=" + version])
    build = os.path.join(tmp, "consumer-build")
    run(["cmake", "-S", os.path.join(consumers, "cmake"), "-B", build, "-DCMAKE_PREFIX_PATH=" + prefix])
    run(["cmake", "--build", build])
    return os.path.join(build, "consumer")


def make_project(consumers, **pkg_config_env):
    """Builds the Makefile in tests/consumers/pkg-config with pkg-config
    finding oxicuda.pc as pkg_config_env (PKG_CONFIG_PATH, ...) says; returns
    the program."""
    env = dict(os.environ, **pkg_config_env)
    run(["pkg-config", "--print-errors", "--cflags", "--libs", "oxicuda"], env=env)
    src = os.path.join(consumers, "pkg-config")
    run(["make", "-C", src], env=env)
    return os.path.join(src, "consumer")


def build_cmake(root, tmp, consumers, version):
    return cmake_project(meson_install(root, tmp), tmp, consumers, version)


def build_pkg_config(root, tmp, consumers, version):
    prefix = meson_install(root, tmp)
    return make_project(consumers, PKG_CONFIG_PATH=find_file(prefix, "oxicuda.pc"),
                        PKG_CONFIG_SYSROOT_DIR=prefix[: -len(PREFIX)])


def build_meson(root, tmp, consumers, version):
    src = os.path.join(consumers, "meson")
    os.symlink(root, os.path.join(src, "subprojects", "oxicuda"))
    build = os.path.join(tmp, "consumer-build")
    # Even where an oxicuda is installed, take the subproject.
    run(["meson", "setup", build, src, "--force-fallback-for=oxicuda"])
    run(["meson", "compile", "-C", build])
    return os.path.join(build, "consumer")


def copy_consumers(tmp):
    """The consumer projects, copied to tmp (their builds write next to them)."""
    consumers = os.path.join(tmp, "consumers")
    shutil.copytree(HERE, consumers, ignore=shutil.ignore_patterns("__pycache__"))
    return consumers


BUILDERS = {"cmake": build_cmake, "pkg-config": build_pkg_config, "meson": build_meson}


def command_line(kinds, temp_prefix, check):
    """The command line of this script and tests/vcpkg/port_test.py:
    KIND --source-root R [--version X.Y.Z] [--fake-driver LIB]. Calls
    check(kind, root, tmp, args) in a temporary directory; a Failed it raises
    is the test's failure. Returns the exit status."""
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=kinds)
    ap.add_argument("--source-root", required=True)
    ap.add_argument("--version", help="the project version (meson.project_version())")
    ap.add_argument("--fake-driver")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix=temp_prefix) as tmp:
        try:
            check(args.kind, os.path.abspath(args.source_root), tmp, args)
        except Failed as e:
            print("FAIL:", e)
            return 1
    print("OK")
    return 0


def check(kind, root, tmp, args):
    if kind == "install":
        check_install(root, tmp)
    else:
        consumers = copy_consumers(tmp)
        check_program(BUILDERS[kind](root, tmp, consumers, args.version), args.fake_driver)


if __name__ == "__main__":
    sys.exit(command_line(["install", *BUILDERS], "oxicuda-consumer-", check))
