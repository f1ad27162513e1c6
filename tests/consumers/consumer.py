#!/usr/bin/env python3
"""Consumer tests: oxicuda installed (or vendored) and used by a project of
each kind, built and run the way its users build it.

  consumer.py install    --source-root R
  consumer.py cmake      --source-root R --version X.Y.Z [--fake-driver LIB]
  consumer.py pkg-config --source-root R [--fake-driver LIB]
  consumer.py meson      --source-root R [--fake-driver LIB]
  consumer.py cmake-install    --source-root R --version X.Y.Z [--fake-driver LIB]
  consumer.py FetchContent     --source-root R --version X.Y.Z [--fake-driver LIB]
  consumer.py add_subdirectory --source-root R [--fake-driver LIB]

install: a packager's configuration (-Dtests=false -Dexamples=false
-Dbench=false, vcpkg's --libdir lib and relocatable pkg-config) set up with
no pkg-config and no cmake program to be found, so nothing the tests need
(doctest, the CUDA toolkit) can be looked up; `meson install --destdir`
must then lay down exactly the expected files.

cmake, pkg-config: `meson install --destdir` into a temporary directory, then
the project in tests/consumers/<kind> builds against that prefix (for cmake,
tests/consumers/cmake/version-check first checks the package's version file). meson: the
project in tests/consumers/meson with this source tree as
subprojects/oxicuda.

cmake-install: CMakeLists.txt configured, built and installed
(`cmake --install` with DESTDIR) beside a meson install of the same
configuration (--libdir lib, relocatable pkg-config); the two trees must
hold the same files and agree file by file: the headers byte for byte (and
with the sources), oxicudaConfigVersion.cmake byte for byte,
oxicudaConfig.cmake byte for byte outside what @PACKAGE_INIT@ expands to
(CMake's and meson's expansions differ; both compute PACKAGE_PREFIX_DIR),
oxicuda.pc as pkg-config reads it (the same variables and fields, and the
same `pkg-config --modversion --cflags --libs` output, each tree's prefix
aside). Then the CMake project and the Makefile build against the CMake
install. FetchContent, add_subdirectory: tests/consumers/subproject takes
oxicuda from a .tar.gz of this checkout (FetchContent: README's example for
an archive, its URL and SHA256 filled in; no network) or from the checkout
itself (add_subdirectory); CMake must configure it without a warning (so
README's example sets CMP0135); oxicuda must
then define no oxicuda-doctor and install nothing, unless OXICUDA_INSTALL is
set (add_subdirectory: then it installs the header and the package).

Each program then runs:
  - with OXICUDA_LIBCUDA_PATH naming a missing file: it must exit 2 and print
    the library's reason, which names that file;
  - with the fake driver (when given): it must exit 0 and list its devices;
  - as the machine is: exit 0 (a driver and a device) or 2 with the reason.
Everything happens in a temporary directory; the source tree is not written.
"""
import argparse
import filecmp
import os
import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
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
    return p.stdout + p.stderr


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
    parts = sorted(os.path.relpath(os.path.join(d, f), os.path.join(root, "include", "oxicuda"))
                   for d, _, fs in os.walk(os.path.join(root, "include", "oxicuda")) for f in fs)
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


def tree(prefix):
    """The files under prefix, relative to it."""
    return {os.path.relpath(os.path.join(d, f), prefix) for d, _, fs in os.walk(prefix) for f in fs}


def cmake_install(root, tmp, *configure_args):
    """Configures, builds and installs the source tree with CMake under
    tmp/cmake-stage (DESTDIR); returns the staged prefix."""
    build, stage = os.path.join(tmp, "oxicuda-cmake-build"), os.path.join(tmp, "cmake-stage")
    run(["cmake", "-S", root, "-B", build, "-DCMAKE_INSTALL_PREFIX=" + PREFIX, *configure_args])
    run(["cmake", "--build", build])
    run(["cmake", "--install", build], env=dict(os.environ, DESTDIR=stage))
    return stage + PREFIX


def without_package_init(path):
    """oxicudaConfig.cmake less what @PACKAGE_INIT@ expanded to."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.fullmatch(r"(.*?)^####### Expanded from @PACKAGE_INIT@.*?^#{20,}\n\s*(.*)", text, re.S | re.M)
    if not m:
        raise Failed(f"{path}: no expanded @PACKAGE_INIT@ block")
    return m.group(1) + m.group(2)


def pc_entries(path):
    """A .pc's variables (name=) and fields (Name:), as pkg-config reads them."""
    with open(path, encoding="utf-8") as f:
        entries = re.finditer(r"^([\w.]+)\s*([=:])\s*(.*?)\s*$", f.read(), re.M)
        return {m.group(1) + m.group(2): m.group(3) for m in entries}


def pkg_config_answers(prefix):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    p = subprocess.run(["pkg-config", "--print-errors", "--modversion", "--cflags", "--libs", "oxicuda"],
                       env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise Failed(f"pkg-config does not read {prefix}/lib/pkgconfig/oxicuda.pc: {p.stderr}")
    return p.stdout.replace(os.path.realpath(prefix), "<prefix>").replace(prefix, "<prefix>")


def check_cmake_install(root, tmp, consumers, version, fake_driver):
    meson_prefix = meson_install(root, tmp, "--libdir", "lib", "-Dpkgconfig.relocatable=true")
    cmake_prefix = cmake_install(root, tmp, "-DCMAKE_INSTALL_LIBDIR=lib")
    files, cmake_files = tree(meson_prefix), tree(cmake_prefix)
    print("installed by CMake:\n  " + "\n  ".join(sorted(cmake_files)))
    if cmake_files != files:
        raise Failed(f"CMake's install lacks {sorted(files - cmake_files)} and adds {sorted(cmake_files - files)}")
    for rel in sorted(files):
        ours, theirs = os.path.join(cmake_prefix, rel), os.path.join(meson_prefix, rel)
        if rel.endswith(".hpp") or rel.endswith("ConfigVersion.cmake"):
            same = filecmp.cmp(ours, theirs, shallow=False)
            source = os.path.join(root, "oxicuda.hpp" if rel == "include/oxicuda.hpp" else rel)
            same = same and (not rel.endswith(".hpp") or filecmp.cmp(ours, source, shallow=False))
        elif rel.endswith("Config.cmake"):
            same = without_package_init(ours) == without_package_init(theirs)
        elif rel.endswith(".pc"):
            same = pc_entries(ours) == pc_entries(theirs)
            print(f"-- oxicuda.pc: {pc_entries(ours)}")
        else:
            raise Failed(f"no comparison for {rel}")
        if not same:
            raise Failed(f"{rel}: CMake's and meson's differ")
    if pkg_config_answers(cmake_prefix) != pkg_config_answers(meson_prefix):
        raise Failed("pkg-config answers differently for CMake's and meson's oxicuda.pc")
    check_program(cmake_project(cmake_prefix, tmp, consumers, version), fake_driver)
    check_program(make_project(consumers, PKG_CONFIG_PATH=os.path.join(cmake_prefix, "lib", "pkgconfig")),
                  fake_driver)


def source_archive(root, tmp, version):
    """The checkout as a release archive holds it, under oxicuda-X.Y.Z/: the
    files git tracks or would (every file outside build*/ and dot
    directories where git cannot say); returns its path."""
    try:
        p = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True)
        files = [f for f in p.stdout.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = [os.path.relpath(os.path.join(d, f), root) for d, ds, fs in os.walk(root) for f in fs
                 if not os.path.relpath(d, root).split(os.sep)[0].startswith(("build", "."))]
    archive = os.path.join(tmp, f"oxicuda-{version}.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        for f in sorted(files):
            if os.path.isfile(os.path.join(root, f)):
                tar.add(os.path.join(root, f), arcname=f"oxicuda-{version}/{f}")
    return archive


def readme_fetch_example(root, archive, sha256):
    """README's FetchContent example for an archive (the ```cmake block of
    "## Using from CMake" with a URL line), its URL and SHA256 replaced by
    the archive's and its last line, the target app's, left out."""
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        section = re.search(r"^## Using from CMake: add_subdirectory and FetchContent\n(.*?)(?=^## )", f.read(),
                            re.M | re.S)
    blocks = [b for b in re.findall(r"^```cmake\n(.*?)^```\n", section.group(1) if section else "", re.M | re.S)
              if re.search(r"^\s*URL\s", b, re.M)]
    app = "target_link_libraries(app PRIVATE oxicuda::oxicuda)\n"
    if len(blocks) != 1 or not blocks[0].endswith(app) or len(re.findall(r"^\s*URL\s+\S+", blocks[0], re.M)) != 1 \
            or len(re.findall(r"URL_HASH SHA256=<[^>]*>", blocks[0])) != 1:
        raise Failed("README's CMake section needs one ```cmake FetchContent example with one URL line and "
                     "URL_HASH SHA256=<...>, ending with " + app.strip())
    code = re.sub(r"^(\s*URL\s+)\S+", lambda m: m.group(1) + archive, blocks[0][:-len(app)], flags=re.M)
    code = re.sub(r"URL_HASH SHA256=<[^>]*>", "URL_HASH SHA256=" + sha256, code)
    print("README's FetchContent example, filled in:\n" + code, flush=True)
    return code


def build_subproject(root, tmp, consumers, version, via):
    """Builds tests/consumers/subproject with oxicuda taken through via;
    returns the program."""
    src, build = os.path.join(consumers, "subproject"), os.path.join(tmp, "consumer-build")
    if via == "FetchContent":
        archive = source_archive(root, tmp, version)
        with open(archive, "rb") as f:
            sha256 = hashlib.sha256(f.read()).hexdigest()
        fetch = os.path.join(tmp, "fetch.cmake")
        with open(fetch, "w", encoding="utf-8") as f:
            f.write(readme_fetch_example(root, archive, sha256))
        source = ["-DOXICUDA_FETCH=" + fetch]
    else:
        source = ["-DOXICUDA_SOURCE_DIR=" + root]
    out = run(["cmake", "-S", src, "-B", build, "-DOXICUDA_VIA=" + via, *source])
    if "CMake Warning" in out or "CMP0135" in out:
        raise Failed("CMake warned while configuring (README's examples must configure cleanly)")
    run(["cmake", "--build", build])
    stage = os.path.join(tmp, "consumer-stage")
    run(["cmake", "--install", build, "--prefix", stage])
    if tree(stage) != {"bin/consumer"}:
        raise Failed(f"installing the parent project installed {sorted(tree(stage) - {'bin/consumer'})} of oxicuda")
    if via == "add_subdirectory":
        run(["cmake", "-S", src, "-B", build, "-DOXICUDA_INSTALL=ON"])
        run(["cmake", "--install", build, "--prefix", stage])
        installed = tree(stage)
        if "include/oxicuda.hpp" not in installed or not any(f.endswith("cmake/oxicuda/oxicudaConfig.cmake")
                                                             for f in installed):
            raise Failed("with OXICUDA_INSTALL=ON the parent project's install lacks oxicuda's")
    return os.path.join(build, "consumer")


def copy_consumers(tmp):
    """The consumer projects, copied to tmp (their builds write next to them)."""
    consumers = os.path.join(tmp, "consumers")
    shutil.copytree(HERE, consumers, ignore=shutil.ignore_patterns("__pycache__"))
    return consumers


BUILDERS = {"cmake": build_cmake, "pkg-config": build_pkg_config, "meson": build_meson,
            "FetchContent": lambda *a: build_subproject(*a, "FetchContent"),
            "add_subdirectory": lambda *a: build_subproject(*a, "add_subdirectory")}


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
    elif kind == "cmake-install":
        check_cmake_install(root, tmp, copy_consumers(tmp), args.version, args.fake_driver)
    else:
        consumers = copy_consumers(tmp)
        check_program(BUILDERS[kind](root, tmp, consumers, args.version), args.fake_driver)


if __name__ == "__main__":
    sys.exit(command_line(["install", "cmake-install", *BUILDERS], "oxicuda-consumer-", check))
