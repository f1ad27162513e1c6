#!/usr/bin/env python3
"""oxicuda-doctor as a CI system or a bug report uses it.

  doctor.py DOCTOR FAKE_LIBCUDA README

Runs the doctor on the fake driver (two devices; none; a driver call that
fails on the second device; the variant without the batched calls of
CUDA 13.0, whose loop of single copies the doctor names), without a driver (OXICUDA_LIBCUDA_PATH naming
a missing file whose name needs JSON escaping), and with --help and a bad
argument. Each --json run's output must parse as JSON (python's json, so
the escaping is checked) and hold the fields README documents, and each
exit status must be the documented one; the text form must agree. On a
machine without a driver library, README's "## oxicuda-doctor" output (both
forms) must be what the doctor prints. Every sample in that section (the
machine without a driver; the H200) must hold every JSON key and every text
line the doctor prints, so a field added to the doctor cannot be missing
from README.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

# A missing driver whose path holds a quote, a backslash and a tab: the
# reason names it, so the JSON must escape all three.
MISSING = '/nonexistent/oxicuda "doctor"\\test\tdir/libcuda.so.1'
FAILED, NO_DRIVER, USAGE = 1, 2, 64
problems = []


def run(doctor, env, *args):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OXICUDA_", "FAKE_CUDA_"))}
    full.update(env)
    p = subprocess.run([doctor, *args], env=full, capture_output=True, text=True)
    print(f"$ {' '.join(f'{k}={v!r}' for k, v in env.items())} oxicuda-doctor {' '.join(args)}: "
          f"exit status {p.returncode}\n{p.stdout}{p.stderr}", flush=True)
    return p


def expect(what, condition):
    if not condition:
        problems.append(what)
        print("FAIL:", what, flush=True)


def report(doctor, env, status):
    """Runs --json and the text form; both must exit with status. Returns the JSON and the text."""
    p = run(doctor, env, "--json")
    expect(f"--json exits {status}", p.returncode == status)
    try:
        data = json.loads(p.stdout)
    except json.JSONDecodeError as e:
        expect(f"--json prints JSON ({e})", False)
        data = {}
    expect("exit_status in the JSON is the exit status", data.get("exit_status") == p.returncode)
    text = run(doctor, env)
    expect(f"the text form exits {status}", text.returncode == status)
    return data, text.stdout


def check_device(d, ordinal):
    expect(f"device {ordinal}: fields", d.get("ordinal") == ordinal and d.get("name") == f"oxicuda fake GPU {ordinal}"
           and d.get("compute_capability") == "9.0" and d.get("total_memory_bytes") == 80 << 30
           and d.get("multiprocessors") == 132 and d.get("pci_bus_id") == f"0000:{0x18 + ordinal:02x}:00.0"
           and re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", d.get("uuid", "")) is not None)
    expect(f"device {ordinal}: persistence and MIG mode are null (the driver API does not report them)",
           "persistence_mode" in d and d["persistence_mode"] is None and "mig_mode" in d and d["mig_mode"] is None)
    expect(f"device {ordinal}: the two-stream self-check passed",
           d.get("two_stream_check", {}).get("passed") is True and "A x4 and B x2" in d["two_stream_check"]["message"])


TOOLKIT_KEYS = ("nvrtc", "nvjitlink", "kernel_cache")


def driver_part(text):
    """The text form up to the runtime-compilation lines, which depend on the machine's toolkit and cache."""
    return text.split("\nNVRTC: ")[0]


def check_readme(doctor, readme):
    """README's output for a machine without a driver, where this is one: the driver's part exactly (what NVRTC,
    nvJitLink and the kernel cache lines say depends on the machine's toolkit and home directory)."""
    with open(readme, encoding="utf-8") as f:
        section = re.search(r"^## oxicuda-doctor\n(.*?)(?=^## )", f.read(), re.M | re.S)
    shown = re.search(r"^```\n\$ oxicuda-doctor\n(.*?)^\$ oxicuda-doctor --json\n(.*?)^```\n",
                      section.group(1) if section else "", re.M | re.S)
    if not shown:
        return expect("README's oxicuda-doctor section shows its output in a ``` block of $ oxicuda-doctor runs", False)
    text, data = run(doctor, {}), run(doctor, {}, "--json")
    if "no CUDA driver library could be opened" not in text.stdout:
        print("README's output not compared: this machine has a driver library")
        return
    expect("README shows what the doctor prints without a driver (text)",
           driver_part(shown.group(1)) == driver_part(text.stdout))
    try:
        readme_json, printed_json = json.loads(shown.group(2)), json.loads(data.stdout)
    except json.JSONDecodeError as e:
        return expect(f"README's --json output parses ({e})", False)
    expect("README's --json output has the runtime-compilation sections",
           all(k in readme_json for k in TOOLKIT_KEYS))
    for d in (readme_json, printed_json):
        for k in TOOLKIT_KEYS:
            d.pop(k, None)
    expect("README shows what the doctor prints without a driver (--json)", readme_json == printed_json)


def key_paths(value, path=""):
    """Every key of a JSON value, as a path ("devices[].two_stream_check.passed")."""
    if isinstance(value, dict):
        return {p for k, v in value.items() for p in {f"{path}{k}"} | key_paths(v, f"{path}{k}.")}
    if isinstance(value, list):
        return {p for v in value for p in key_paths(v, path.rstrip(".") + "[].")}
    return set()


def text_labels(text):
    """The text form's line labels: what comes before the first ': ' (device ordinals as N)."""
    return {re.sub(r"^device \d+$", "device N", line.split(": ")[0].strip()) for line in text.splitlines()
            if ": " in line}


def check_readme_samples(doctor, fake, readme):
    """Every sample in README's "## oxicuda-doctor" section, from whichever machine, must show every key the
    doctor's --json prints and every line its text form prints: a sample with devices against the fake driver
    with one device, one without against a missing driver. In each, NVRTC's and nvJitLink's version is the
    same in both forms (the text's "(13.0)" when the JSON's version is "13.0"; none when it is null)."""
    with open(readme, encoding="utf-8") as f:
        section = re.search(r"^## oxicuda-doctor\n(.*?)(?=^## )", f.read(), re.M | re.S)
    samples = re.findall(r"^```\n\$ oxicuda-doctor\n(.*?)^\$ oxicuda-doctor --json\n(.*?)^```\n",
                         section.group(1) if section else "", re.M | re.S)
    expect("README's oxicuda-doctor section has two samples (no driver; a GPU)", len(samples) == 2)
    runs = {}
    for shown_text, shown_json in samples:
        try:
            shown = json.loads(shown_json)
        except json.JSONDecodeError as e:
            expect(f"README's --json sample parses ({e})", False)
            continue
        kind = "with devices" if shown.get("devices") else "without a driver"
        if kind not in runs:
            env = {"OXICUDA_LIBCUDA_PATH": fake, "FAKE_CUDA_DEVICES": "1"} if shown.get("devices") else \
                {"OXICUDA_LIBCUDA_PATH": MISSING}
            text, data = run(doctor, env), run(doctor, env, "--json")
            runs[kind] = (text.stdout, json.loads(data.stdout))
        text, data = runs[kind]
        missing, extra = key_paths(data) - key_paths(shown), key_paths(shown) - key_paths(data)
        expect(f"README's --json sample {kind} has every key the doctor prints (missing: {sorted(missing)})",
               not missing)
        expect(f"README's --json sample {kind} has no key the doctor does not print (extra: {sorted(extra)})",
               not extra)
        lacking = text_labels(text) - text_labels(shown_text)
        expect(f"README's text sample {kind} has every line the doctor prints (lacking: {sorted(lacking)})",
               not lacking)
        for key, label in (("nvrtc", "NVRTC"), ("nvjitlink", "nvJitLink")):
            version = shown.get(key, {}).get("version")
            line = next((l for l in shown_text.splitlines() if l.startswith(label + ": ")), "")
            shows = re.search(r" \((\d+\.\d+)\), found by ", line)
            expect(f"README's sample {kind}: {label}'s version is the same in the text ({line!r}) and the JSON "
                   f"({version!r})", (shows.group(1) if shows else None) == version)


def check_toolkit(doctor, env, tmp):
    """NVRTC, nvJitLink and the kernel cache: found or not, and what the cache holds; none changes the exit status."""
    missing = os.path.join(tmp, "no-such-libnvrtc.so")
    cache = os.path.join(tmp, "cache")
    os.makedirs(cache)
    # Two entries (a 32-digit key and ".bin", begun as an entry is), a
    # writer's temporary file, and files that are not entries.
    magic = b"OXICUDA-CACHE-1\n"
    for name, size in (("a" * 32 + ".bin", 100), ("b" * 32 + ".bin", 28), ("c" * 32 + ".bin.tmp.1.0", 5),
                       ("notes.txt", 7), ("data.bin", 9)):
        with open(os.path.join(cache, name), "wb") as f:
            f.write((magic + b"x" * size)[:size] if len(name) == 36 else b"x" * size)
    data, text = report(doctor, dict(env, OXICUDA_LIBNVRTC_PATH=missing, OXICUDA_CACHE_DIR=cache,
                                     OXICUDA_CACHE_MAX_BYTES="1000"), 0)
    nv = data.get("nvrtc", {})
    expect("NVRTC not found: available false, the reason names the file tried",
           nv.get("available") is False and nv.get("library") is None and missing in (nv.get("reason") or ""))
    expect("the text form says NVRTC was not found", "NVRTC: not found: " in text)
    kc = data.get("kernel_cache", {})
    expect("the kernel cache: its directory, the two entries (not temporary files or others), their bytes, the limit",
           kc.get("enabled") is True and kc.get("directory") == cache and kc.get("entries") == 2
           and kc.get("bytes") == 128 and kc.get("limit_bytes") == 1000 and kc.get("note") is None)
    expect("the text form gives the cache", f"kernel cache: {cache} (2 entries, 128 bytes; limit 1000 bytes)" in text)
    expect("nvJitLink has its section", "available" in data.get("nvjitlink", {}))
    data, text = report(doctor, dict(env, OXICUDA_CACHE="0"), 0)
    kc = data.get("kernel_cache", {})
    expect("OXICUDA_CACHE=0: the cache is off and says why",
           kc.get("enabled") is False and kc.get("directory") is None and "OXICUDA_CACHE=0" in (kc.get("note") or "")
           and "kernel cache: off (disabled by OXICUDA_CACHE=0)" in text)


def main():
    doctor, fake = sys.argv[1], os.path.abspath(sys.argv[2])
    on_fake = {"OXICUDA_LIBCUDA_PATH": fake}

    data, text = report(doctor, dict(on_fake, FAKE_CUDA_DEVICES="2"), 0)
    drv = data.get("driver", {})
    expect("driver: available, the fake's path, CUDA 13.0", drv.get("available") is True and drv.get("status") == "ok"
           and drv.get("library") == fake and drv.get("cuda_version") == "13.0" and drv.get("reason") is None)
    expect("driver: the fake has the batched calls, and the doctor says copy_batch takes them",
           drv.get("batched_copies") == "batched" and drv.get("batched_managed") == "batched"
           and "batched copies: one cuMemcpyBatchAsync per copy_batch" in text)
    expect("driver: the fake has libraries (cuLibraryLoadData), and the doctor says so",
           drv.get("libraries") == "available" and "libraries: cuLibraryLoadData" in text)
    expect("driver: the fake has external memory and checkpointing, and the doctor says so",
           drv.get("external_memory") == "available" and drv.get("checkpointing") == "available"
           and "checkpointing: cuCheckpointProcess* (lock, checkpoint" in text)
    # The fake without its newest entry points (fake_cuda_old, beside the fake): whatever the self-check says.
    old_env = {"OXICUDA_LIBCUDA_PATH": os.path.join(os.path.dirname(fake), "libfake_cuda_old.so")}
    old_text = run(doctor, old_env).stdout
    try:
        old_drv = json.loads(run(doctor, old_env, "--json").stdout).get("driver", {})
    except json.JSONDecodeError:
        old_drv = {}
    expect("driver without the batched calls: the doctor names the loop of single copies",
           old_drv.get("batched_copies") == "single_copies" and old_drv.get("batched_managed") == "single_prefetches"
           and "copy_batch loops over single copies" in old_text)
    expect("driver without libraries: the doctor says a KernelLibrary is an Error there",
           old_drv.get("libraries") == "unavailable" and "libraries: none (this driver lacks cuLibraryLoadData" in old_text)
    expect("driver: the fake has green contexts, and the doctor says so",
           drv.get("green_contexts") == "available" and "green contexts: SmResource::split and GreenContext" in text)
    expect("driver without green contexts: the doctor says they are unavailable and why",
           old_drv.get("green_contexts") == "unavailable"
           and "green contexts: unavailable: this driver lacks cuGreenCtxCreate (CUDA 12.4)" in old_text)
    expect("driver without the checkpoint calls: the doctor says checkpointing is unavailable (external memory is there)",
           old_drv.get("checkpointing") == "unavailable" and old_drv.get("external_memory") == "available"
           and "lacks cuCheckpointProcess* (CUDA 12.8)" in old_text)
    expect("oxicuda.version", re.fullmatch(r"\d+\.\d+\.\d+", data.get("oxicuda", {}).get("version", "")) is not None)
    devices = data.get("devices", [])
    expect("two devices", data.get("device_count") == 2 and len(devices) == 2)
    for i, d in enumerate(devices):
        check_device(d, i)
    expect("the text form names each device's PCI bus id and the self-check",
           "PCI bus id: 0000:19:00.0" in text and text.count("two-stream self-check: PASS") == 2)

    data, text = report(doctor, dict(on_fake, FAKE_CUDA_DEVICES="0"), NO_DRIVER)
    expect("no device: device_count 0, devices []", data.get("device_count") == 0 and data.get("devices") == [])
    expect("no device: the text form says so", "the driver sees no CUDA device" in text)

    # The second cuDeviceGetPCIBusId (device 1) fails with CUDA_ERROR_UNKNOWN.
    data, text = report(doctor, dict(on_fake, FAKE_CUDA_DEVICES="2", FAKE_CUDA_FAIL="cuDeviceGetPCIBusId:2:999"),
                        FAILED)
    devices = data.get("devices", [{}, {}])
    expect("a failing call: device 0 passes, device 1 carries the error naming the call",
           devices[0].get("two_stream_check", {}).get("passed") is True and "error" not in devices[0]
           and "cuDeviceGetPCIBusId failed: CUDA_ERROR_UNKNOWN (999)" in devices[1].get("error", ""))
    expect("a failing call: the text form prints it", "FAIL: cuDeviceGetPCIBusId failed" in text)

    data, text = report(doctor, {"OXICUDA_LIBCUDA_PATH": MISSING}, NO_DRIVER)
    drv = data.get("driver", {})
    expect("no driver: available false, status no_library, no library",
           drv.get("available") is False and drv.get("status") == "no_library" and drv.get("library") is None)
    expect("no driver: the reason names the missing file, escaped and read back exactly",
           MISSING in (drv.get("reason") or ""))
    expect("no driver: which batch path is unknown (null)", "batched_copies" in drv and drv["batched_copies"] is None
           and "batched_managed" in drv and drv["batched_managed"] is None
           and "libraries" in drv and drv["libraries"] is None
           and "checkpointing" in drv and drv["checkpointing"] is None
           and "external_memory" in drv and drv["external_memory"] is None)
    expect("no driver: whether green contexts are available is unknown (null)",
           "green_contexts" in drv and drv["green_contexts"] is None)
    expect("no driver: no devices", data.get("device_count") is None and data.get("devices") == [])
    expect("no driver: the text form prints the reason", "no usable CUDA driver: " in text and MISSING in text)

    p = run(doctor, {}, "--help")
    expect("--help exits 0 and documents every exit status", p.returncode == 0 and p.stdout.startswith("usage: ")
           and all(re.search(rf"^  {s} ", p.stdout, re.M) for s in (0, FAILED, NO_DRIVER, USAGE)))
    p = run(doctor, on_fake, "--json", "--frobnicate")
    expect(f"an unknown argument: exit {USAGE}, the usage on stderr, nothing on stdout",
           p.returncode == USAGE and "unknown argument '--frobnicate'" in p.stderr and "usage: " in p.stderr
           and p.stdout == "")

    with tempfile.TemporaryDirectory() as tmp:
        check_toolkit(doctor, dict(on_fake, FAKE_CUDA_DEVICES="1"), tmp)
    check_readme(doctor, sys.argv[3])
    check_readme_samples(doctor, fake, sys.argv[3])

    print("FAILED: " + "; ".join(problems) if problems else "OK")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
