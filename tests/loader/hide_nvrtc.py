#!/usr/bin/env python3
"""Runs a command where no libnvrtc.so.13 is on the loader's search path, so
that the NVRTC search reaches its later steps ($CUDA_HOME): the entries of
LD_LIBRARY_PATH that hold one are dropped, and the directories the loader's
cache (`ldconfig -p`) has one in are covered by an empty directory in a
private mount namespace (`unshare --user --map-root-user --mount`, no
privileges needed where user namespaces are allowed). Where they are not,
the command runs as it is, and the test it runs skips (exit 77), saying why.

  hide_nvrtc.py COMMAND [ARG...]
"""
import os
import shutil
import subprocess
import sys
import tempfile

SONAME = "libnvrtc.so.13"


def holders():
    dirs = set()
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        name, _, path = line.partition("=>")
        if name.strip().startswith(SONAME + " "):
            dirs.add(os.path.dirname(os.path.realpath(path.strip())))
    return sorted(dirs)


def drop_from_library_path():
    kept = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":")
            if d and not os.path.exists(os.path.join(d, SONAME))]
    os.environ["LD_LIBRARY_PATH"] = ":".join(kept)


def main():
    cmd = sys.argv[1:]
    drop_from_library_path()
    dirs = holders()
    if not dirs:
        os.execvp(cmd[0], cmd)
    unshare = shutil.which("unshare")
    if not unshare or subprocess.run([unshare, "--user", "--map-root-user", "--mount", "true"],
                                     capture_output=True).returncode != 0:
        print(f"hide_nvrtc: cannot hide {', '.join(dirs)} (no user and mount namespaces here)", flush=True)
        os.execvp(cmd[0], cmd)
    empty = tempfile.mkdtemp(prefix="oxicuda-empty-")
    mounts = " && ".join(f"mount --bind '{empty}' '{d}'" for d in dirs)
    print(f"hide_nvrtc: hiding {', '.join(dirs)}", flush=True)
    status = subprocess.run([unshare, "--user", "--map-root-user", "--mount", "sh", "-c", mounts + ' && exec "$@"',
                             "sh"] + cmd).returncode
    os.rmdir(empty)
    sys.exit(status)


if __name__ == "__main__":
    main()
