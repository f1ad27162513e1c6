#!/usr/bin/env python3
"""Turn oxicuda-bench's Catch2 XML reports into tables of ratios.

  oxicuda-bench -r xml > bench.xml && python3 bench/ratios.py bench.xml
  python3 bench/ratios.py run1.xml run2.xml run3.xml   # several runs

Benchmarks come in pairs "<what>: raw" / "<what>: oxicuda[ variant]"; the
ratio is oxicuda's mean over raw's (1.00 = no overhead). Each pair also runs
a second time in the opposite order ("<what> (again): ..."). For one report,
every pair is a row (for the 256 MiB copies with the bandwidths). For
several, each pair's ratios from every report and both orders are summed up
in one row: their geometric mean, median, and range, since the spread from
run to run is often larger than the difference being measured. Stdlib only.
"""
import math
import statistics
import sys
import xml.etree.ElementTree as ET


def read(path):
    """{label: (raw mean, oxicuda mean, lower, upper)} from one report, in order."""
    root = ET.parse(path).getroot()
    means = {}
    for b in root.iter("BenchmarkResults"):
        mean = b.find("mean")
        if mean is None:  # a benchmark that failed or was cut short: no pair
            continue
        means[b.get("name")] = (float(mean.get("value")), float(mean.get("lowerBound")), float(mean.get("upperBound")))
    pairs = {}
    for name, (raw, _, _) in means.items():
        if not name.endswith(": raw"):
            continue
        what = name[: -len(": raw")]
        for other, (ox, lo, hi) in means.items():
            if other.startswith(what + ": oxicuda"):
                pairs[what + other[len(what + ": oxicuda"):]] = (raw, ox, lo, hi)
    return pairs


def one(path):
    print("| benchmark | raw (mean) | oxicuda (mean) | ratio |")
    print("| --- | --- | --- | --- |")
    for label, (raw, ox, lo, hi) in read(path).items():
        extra = ""
        if "256 MiB" in label:
            extra = f" ({256 * 2**20 / raw:.2f} vs {256 * 2**20 / ox:.2f} GB/s)"
        print(f"| {label} | {fmt(raw)} | {fmt(ox)} [{fmt(lo)}, {fmt(hi)}] | {ox / raw:.3f}{extra} |")


def several(paths):
    ratios = {}
    for path in paths:
        for label, (raw, ox, _, _) in read(path).items():
            ratios.setdefault(label.replace(" (again)", ""), []).append(ox / raw)
    print(f"| benchmark | ratios (both orders, {len(paths)} runs) | geometric mean | median | range |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, rs in ratios.items():
        gmean = math.exp(sum(math.log(r) for r in rs) / len(rs))
        print(f"| {label} | {len(rs)} | {gmean:.3f} | {statistics.median(rs):.3f} | {min(rs):.3f}–{max(rs):.3f} |")


def fmt(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.3f} µs"
    return f"{ns:.1f} ns"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: ratios.py report.xml [report.xml ...]")
    if len(sys.argv) == 2:
        one(sys.argv[1])
    else:
        several(sys.argv[1:])
