#!/usr/bin/env python3
"""The vcpkg overlay port, run without vcpkg.

  port_test.py port   --source-root R --version X.Y.Z [--fake-driver LIB]
  port_test.py plants --source-root R --version X.Y.Z
  port_test.py release --source-root R --version X.Y.Z [--fake-driver LIB]

port: tests/vcpkg/harness.cmake runs ports/oxicuda/portfile.cmake where it
is (`cmake --warn-uninitialized -P`), with the vcpkg helpers it calls. The
portfile must not fail nor read a variable vcpkg does not set. The tree it
installs (packages/oxicuda_<triplet>) must pass the checks of vcpkg's
post-build lint that apply to a Linux triplet (vcpkg-tool's
src/vcpkg/postbuildlint.cpp) and hold exactly what the port promises. Then,
as a vcpkg user would: tests/consumers/cmake builds against it found the way
vcpkg's toolchain finds packages (CMAKE_PREFIX_PATH), pkg-config finds the
.pc both where vcpkg's release and its debug configurations search, and
tests/consumers/pkg-config builds with the debug search path; both programs
run as in consumer.py.

plants: copies of the source with one error planted each (a wrong
CONFIG_PATH, a misspelled meson option, an unknown keyword, ...) must each
fail with the expected message: the checks above can fail. And a copy whose
.pc has Libs (meson's -ldl on glibc before 2.34) must pass, its .pc staying
in lib/pkgconfig.

release: the port copied out of the checkout, as into a registry, must
take the GitHub release archive of tag v<version> through vcpkg_from_github.
A .tar.gz of this checkout, laid out as GitHub lays out a tag's archive,
stands in for it in the download cache. As committed (no release is
published: SHA512 0) the install must fail naming the archive's actual
SHA512; with that SHA512 put in the copy's portfile it must pass as `port`
does, and the CMake project build and run against it.

Everything happens in a temporary directory; the source tree is not written.
"""
import contextlib
import filecmp
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(HERE, "..", "consumers"))
from consumer import (Failed, check_program, cmake_project, command_line, copy_consumers, make_project,  # noqa: E402
                      source_archive)

HARNESS = os.path.join(HERE, "harness.cmake")
PORT = "oxicuda"


def run_port(port_dir, work):
    """Runs the portfile under the harness; returns the installed tree."""
    cmd = ["cmake", "--warn-uninitialized", "-DPORT_DIR=" + port_dir, "-DWORK_DIR=" + work, "-P", HARNESS]
    print("$", " ".join(cmd), flush=True)
    # From the port's directory: cmake warns of uninitialized variables only in
    # files under the directory it runs in. Script mode writes nothing there.
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=port_dir)
    print(p.stdout + p.stderr, flush=True)
    portfile = os.path.realpath(os.path.join(port_dir, "portfile.cmake"))
    unset = [f"line {line}: {name}" for path, line, name in
             re.findall(r"CMake Warning \(dev\) at (.+?):(\d+) \(.*\):\n\s*uninitialized variable '(.+?)'", p.stderr)
             if os.path.realpath(os.path.join(port_dir, path)) == portfile]
    if unset:
        raise Failed("portfile.cmake reads variables vcpkg does not set: " + ", ".join(unset))
    if p.returncode != 0:
        raise Failed(f"portfile.cmake failed under the harness (exit status {p.returncode})")
    packages = os.path.join(work, "packages")
    (tree,) = os.listdir(packages)
    return os.path.join(packages, tree)


def walk(pkg):
    """Every directory and every regular file under pkg, relative, '/'-separated."""
    dirs, files = [], []
    for d, ds, fs in os.walk(pkg):
        rel = os.path.relpath(d, pkg)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        dirs += [prefix + x for x in ds]
        files += [prefix + x for x in fs]
    return sorted(dirs), sorted(files)


def has_libs(pc):
    """postbuildlint's test: a Libs or Libs.private line with a value."""
    with open(pc, encoding="utf-8") as f:
        for line in f.read().splitlines():
            if line.startswith("Libs") and ":" in line and line.split(":", 1)[1].lstrip(" "):
                return True
    return False


def names_absolute_path(path, prohibited):
    """postbuildlint's file kinds that may not name vcpkg's directories (it
    skips comments in headers and scripts; this does not)."""
    name = os.path.basename(path)
    ext = os.path.splitext(name)[1]
    with open(path, "rb") as f:
        data = f.read()
    if ext == "" and name != "usage" and not data.startswith(b"#!"):
        return False
    if ext not in ("", ".h", ".hpp", ".hxx", ".cfg", ".ini", ".py", ".sh", ".cmake", ".pc", ".conf", ".csh", ".pl"):
        return False
    return any(p.encode() in data for p in prohibited)


def lint(pkg, port_dir, work):
    """The checks of vcpkg-tool's postbuildlint.cpp that apply to a Linux
    triplet and a port that sets no VCPKG_POLICY_*; returns the problems
    found. Left out: the list of header names include/ may not hold (libc's
    and a few general ones), and the Windows-only checks of DLLs, EXEs and
    the CRT."""
    problems = []
    dirs, files = walk(pkg)
    in_dir = lambda top: [f for f in files if f.startswith(top + "/")]  # noqa: E731
    if not in_dir("include"):
        problems.append("include/ is missing or empty")
    if [f for f in in_dir("debug/include") if not f.endswith(".ifc")]:
        problems.append("files in debug/include")
    if "debug/share" in dirs:
        problems.append("debug/share exists")
    misplaced = [f for top in ("cmake", "debug/cmake", "lib/cmake", "debug/lib/cmake")
                 for f in in_dir(top) if f.lower().endswith(".cmake")]
    if misplaced:
        problems.append("CMake files outside share/: " + ", ".join(misplaced))
    if "lib/cmake" in dirs or "debug/lib/cmake" in dirs:
        problems.append("lib/cmake or debug/lib/cmake exists (vcpkg_cmake_config_fixup merges it into share/)")
    if f"share/{PORT}/copyright" not in files:
        problems.append(f"no share/{PORT}/copyright")
    if os.path.isfile(os.path.join(port_dir, "usage")) and f"share/{PORT}/usage" not in files:
        problems.append(f"the port has a usage file but share/{PORT}/usage is not installed")
    # Made for triplets without VCPKG_BUILD_TYPE, as the Linux ones are.
    count = lambda top: len([f for f in in_dir(top) if f.endswith((".so", ".a", ".dylib"))])  # noqa: E731
    if count("lib") != count("debug/lib"):
        problems.append("release and debug libraries differ in number")
    empty = [d for d in dirs if not os.listdir(os.path.join(pkg, d))]
    if empty:
        problems.append("empty directories: " + ", ".join(empty))
    loose = [f for f in files if "/" not in f or (f.startswith("debug/") and f.count("/") == 1)]
    loose = [f for f in loose if os.path.basename(f) not in ("CONTROL", "BUILD_INFO", ".DS_Store")]
    if loose:
        problems.append("files at the package root or in debug/: " + ", ".join(loose))
    for pc in (f for f in files if f.endswith(".pc")):
        where = os.path.dirname(pc)
        if where not in ("lib/pkgconfig", "debug/lib/pkgconfig") and (
                has_libs(os.path.join(pkg, pc)) or where != "share/pkgconfig"):
            problems.append(f"misplaced pkg-config file {pc}: lib/pkgconfig, debug/lib/pkgconfig, or "
                            "share/pkgconfig when it has no Libs")
    prohibited = [os.path.join(work, d) for d in ("packages", "installed", "buildtrees", "downloads")]
    absolute = [f for f in files if names_absolute_path(os.path.join(pkg, f), prohibited)]
    if absolute:
        problems.append("files naming an absolute path into vcpkg's directories: " + ", ".join(absolute))
    return problems


def check_port(pkg, root, port_dir):
    """What this port promises: one release configuration holding the header
    and its parts, the CMake package, the pkg-config file where vcpkg's
    release and debug searches both find it, the license and the usage note."""
    _, files = walk(pkg)
    parts = sorted(os.path.relpath(os.path.join(d, f), os.path.join(root, "include", "oxicuda"))
                   for d, _, fs in os.walk(os.path.join(root, "include", "oxicuda")) for f in fs)
    pc_dir = "share/pkgconfig"
    found_pc = [f for f in files if f.endswith(".pc")]
    if found_pc and has_libs(os.path.join(pkg, found_pc[0])):
        pc_dir = "lib/pkgconfig"  # lint allows no Libs under share/pkgconfig
    sources = {"include/oxicuda.hpp": os.path.join(root, "oxicuda.hpp"),
               f"share/{PORT}/copyright": os.path.join(root, "LICENSE"),
               f"share/{PORT}/usage": os.path.join(port_dir, "usage")}
    sources.update({f"include/oxicuda/{p}": os.path.join(root, "include", "oxicuda", p) for p in parts})
    expected = set(sources) | {f"share/{PORT}/oxicudaConfig.cmake", f"share/{PORT}/oxicudaConfigVersion.cmake",
                               f"{pc_dir}/oxicuda.pc"}
    print("installed:\n  " + "\n  ".join(files))
    if set(files) != expected:
        raise Failed(f"missing {sorted(expected - set(files))}, unexpected {sorted(set(files) - expected)}")
    for rel, src in sources.items():
        if not filecmp.cmp(os.path.join(pkg, rel), src, shallow=False):
            raise Failed(f"{rel} differs from {src}")
    with open(os.path.join(pkg, pc_dir, "oxicuda.pc"), encoding="utf-8") as f:
        pc = f.read()
    if not pc.startswith("prefix=${pcfiledir}/../..\n"):
        raise Failed("oxicuda.pc is not relocatable:\n" + pc)


def install_and_check(port_dir, root, work):
    pkg = run_port(port_dir, work)
    problems = lint(pkg, port_dir, work)
    if problems:
        raise Failed("vcpkg's post-build checks would fail:\n  " + "\n  ".join(problems))
    check_port(pkg, root, port_dir)
    return pkg


def pkg_config_searches(pkg):
    """PKG_CONFIG_PATH as vcpkg sets it for a release and a debug build
    (vcpkg_configure_meson, z_vcpkg_setup_pkgconfig_path)."""
    return {"release": f"{pkg}/lib/pkgconfig:{pkg}/share/pkgconfig",
            "debug": f"{pkg}/debug/lib/pkgconfig:{pkg}/share/pkgconfig"}


def check_port_in_use(root, tmp, version, fake_driver):
    pkg = install_and_check(os.path.join(root, "ports", PORT), root, os.path.join(tmp, "vcpkg"))
    consumers = copy_consumers(tmp)
    check_program(cmake_project(pkg, tmp, consumers, version), fake_driver)
    searches = pkg_config_searches(pkg)
    for config, search in searches.items():
        env = dict(os.environ, PKG_CONFIG_PATH=search)
        p = subprocess.run(["pkg-config", "--print-errors", "--variable=includedir", PORT],
                           env=env, capture_output=True, text=True)
        print(f"-- pkg-config, {config} search: {p.stdout.strip()}{p.stderr.strip()}", flush=True)
        if p.returncode != 0 or os.path.realpath(p.stdout.strip()) != os.path.realpath(os.path.join(pkg, "include")):
            raise Failed(f"pkg-config does not find oxicuda.pc's include directory where vcpkg's {config} "
                         "configuration searches")
    check_program(make_project(consumers, PKG_CONFIG_PATH=searches["debug"]), fake_driver)


def check_release(root, tmp, version, fake_driver):
    port = os.path.join(tmp, "registry", "ports", PORT)
    shutil.copytree(os.path.join(root, "ports", PORT), port)
    work = os.path.join(tmp, "vcpkg")
    archive = source_archive(root, tmp, version)
    os.makedirs(os.path.join(work, "downloads"))
    shutil.copy(archive, os.path.join(work, "downloads", f"oxicuda-oxicuda-v{version}.tar.gz"))
    with open(archive, "rb") as f:
        sha512 = hashlib.sha512(f.read()).hexdigest()

    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        try:
            run_port(port, work)
            passed = True
        except Failed:
            passed = False
    print(log.getvalue())
    if passed or "File does not have expected hash" not in log.getvalue() or sha512 not in log.getvalue():
        raise Failed("with a SHA512 that is not the archive's, the port must fail naming the archive's SHA512")

    portfile = os.path.join(port, "portfile.cmake")
    with open(portfile, encoding="utf-8") as f:
        text, count = re.subn(r"^( *)SHA512 \w+$", rf"\g<1>SHA512 {sha512}", f.read(), flags=re.M)
    if count != 1:
        raise Failed("portfile.cmake does not give vcpkg_from_github one SHA512")
    with open(portfile, "w", encoding="utf-8") as f:
        f.write(text)
    pkg = install_and_check(port, root, work)
    check_program(cmake_project(pkg, tmp, copy_consumers(tmp), version), fake_driver)


# --- planted errors ------------------------------------------------------------------
PORTFILE = f"ports/{PORT}/portfile.cmake"
COPIED = ["meson.build", "meson_options.txt", "oxicuda.hpp", "LICENSE", "include", "cmake", f"ports/{PORT}"]
DL_IN_LIBS = ("meson.build", "libraries: dependency('dl', required: false)", "libraries: '-ldl'")
# (what is planted, [(file, text, replacement)], what the failure must say; None: must pass)
PLANTS = [
    ("CONFIG_PATH names a directory meson did not install",
     [(PORTFILE, "CONFIG_PATH lib/cmake/oxicuda", "CONFIG_PATH lib/cmake/oxicuda-config")],
     "missing ['share/oxicuda/oxicudaConfig.cmake'"),
    ("a misspelled meson option", [(PORTFILE, "-Dexamples=false", "-Dexample=false")], 'Unknown options: "example"'),
    ("a keyword vcpkg_install_copyright does not know",
     [(PORTFILE, "vcpkg_install_copyright(FILE_LIST", "vcpkg_install_copyright(FILES")],
     "vcpkg_install_copyright was passed extra arguments"),
    ("a vcpkg helper the harness does not define",
     [(PORTFILE, "vcpkg_install_meson()\n", "vcpkg_install_meson()\nvcpkg_copy_pdbs()\n")],
     'Unknown CMake command "vcpkg_copy_pdbs"'),
    ("a variable vcpkg does not set", [(PORTFILE, '"${SOURCE_PATH}/LICENSE"', '"${SOURCE_DIR}/LICENSE"')],
     "reads variables vcpkg does not set: line"),
    ("the ambiguous LINUX instead of VCPKG_TARGET_IS_LINUX",
     [(PORTFILE, "if(NOT pc_libs)", "if(NOT pc_libs AND LINUX)")], "the portfile reads LINUX"),
    ("no VCPKG_BUILD_TYPE: a debug configuration as well",
     [(PORTFILE, "set(VCPKG_BUILD_TYPE release)", "# (no build type)")],
     "unexpected ['debug/lib/pkgconfig/oxicuda.pc'"),
    ("the emptied lib/ left behind",
     [(PORTFILE, 'file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/lib")', "# (lib/ kept)")], "empty directories: lib"),
    ("an absolute path in an installed file",
     [(PORTFILE, "vcpkg_fixup_pkgconfig()\n", 'vcpkg_fixup_pkgconfig()\n'
       'file(WRITE "${CURRENT_PACKAGES_DIR}/share/pkgconfig/x.pc" "${CURRENT_PACKAGES_DIR}")\n')],
     "naming an absolute path into vcpkg's directories: share/pkgconfig/x.pc"),
    ("the CMake package's prefix not corrected",
     [(PORTFILE, "CONFIG_PATH lib/cmake/oxicuda)", "CONFIG_PATH lib/cmake/oxicuda NO_PREFIX_CORRECTION)")],
     "non-existent path"),
    ("a .pc with Libs moved to share/pkgconfig all the same",
     [DL_IN_LIBS, (PORTFILE, "if(NOT pc_libs)", "if(TRUE)")], "misplaced pkg-config file share/pkgconfig/oxicuda.pc"),
    ("(passes) a .pc with Libs, as meson writes it on glibc before 2.34, kept in lib/pkgconfig",
     [DL_IN_LIBS], None),
]


def planted_copy(root, dest, edits):
    os.makedirs(dest)
    for rel in COPIED:
        src = os.path.join(root, rel)
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(dest, rel))
    for rel, text, replacement in edits:
        path = os.path.join(dest, rel)
        with open(path, encoding="utf-8") as f:
            content = f.read()
        if content.count(text) != 1:
            raise Failed(f"plant out of date: {rel} does not hold {text!r} exactly once")
        with open(path, "w", encoding="utf-8") as f:
            f.write(content.replace(text, replacement))


def check_plants(root, tmp, version):
    wrong = []
    consumers = copy_consumers(tmp)
    for i, (what, edits, expected) in enumerate(PLANTS):
        case = os.path.join(tmp, f"plant{i}")
        src = os.path.join(case, "src")
        planted_copy(root, src, edits)
        log, error = io.StringIO(), None
        with contextlib.redirect_stdout(log):
            try:
                pkg = install_and_check(os.path.join(src, "ports", PORT), src, os.path.join(case, "vcpkg"))
                cmake_project(pkg, case, consumers, version)
            except Failed as e:
                error = str(e)
        text = log.getvalue() + (error or "")
        if expected is None and error is None:
            print(f"ok   {what}: passes")
        elif expected is not None and error is not None and expected in text:
            print(f"ok   {what}: fails with {expected!r}")
        else:
            wrong.append(what)
            print(f"FAIL {what}: " + (f"fails: {error}" if expected is None else
                                       "passes" if error is None else f"fails without {expected!r}: {error}"))
            print("     " + text.replace("\n", "\n     "))
    if wrong:
        raise Failed("plants not caught as expected: " + "; ".join(wrong))


def check(kind, root, tmp, args):
    if not args.version:
        raise Failed("--version is required")
    if kind == "port":
        check_port_in_use(root, tmp, args.version, args.fake_driver)
    elif kind == "release":
        check_release(root, tmp, args.version, args.fake_driver)
    else:
        check_plants(root, tmp, args.version)


if __name__ == "__main__":
    sys.exit(command_line(["port", "plants", "release"], "oxicuda-vcpkg-", check))
