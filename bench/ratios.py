#!/usr/bin/env python3
"""Turn oxicuda-bench's Catch2 XML report into a table of ratios.

  oxicuda-bench -r xml > bench.xml && python3 bench/ratios.py bench.xml

Benchmarks come in pairs "<what>: raw" / "<what>: oxicuda[ variant]"; the
ratio is oxicuda's mean over raw's (1.00 = no overhead). Each pair also runs
a second time in the opposite order ("<what> (again): ..."), reported as its
own row. For the 256 MiB copies the bandwidth is printed too. Stdlib only.
"""
import sys
import xml.etree.ElementTree as ET


def main():
    root = ET.parse(sys.argv[1]).getroot()
    means = {}
    for b in root.iter("BenchmarkResults"):
        mean = b.find("mean")
        means[b.get("name")] = (float(mean.get("value")), float(mean.get("lowerBound")), float(mean.get("upperBound")))
    print("| benchmark | raw (mean) | oxicuda (mean) | ratio |")
    print("| --- | --- | --- | --- |")
    for name, (raw, _, _) in means.items():
        if not name.endswith(": raw"):
            continue
        what = name[: -len(": raw")]
        for other, (ox, lo, hi) in means.items():
            if not other.startswith(what + ": oxicuda"):
                continue
            label = what + other[len(what + ": oxicuda"):]
            extra = ""
            if "256 MiB" in what:
                extra = f" ({256 * 2**20 / raw:.2f} vs {256 * 2**20 / ox:.2f} GB/s)"
            print(f"| {label} | {fmt(raw)} | {fmt(ox)} [{fmt(lo)}, {fmt(hi)}] | {ox / raw:.3f}{extra} |")


def fmt(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.3f} µs"
    return f"{ns:.1f} ns"


if __name__ == "__main__":
    main()
