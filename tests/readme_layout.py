#!/usr/bin/env python3
"""README's Layout section draws the house as it stands.

  readme_layout.py ROOT

The first code block after "### Layout" in README.md lists the wings top down,
each as a line `<wing>/  what lives there`, and under each wing its parts,
indented by two spaces, top down, each as `<part>  what it holds` (a line
indented deeper continues the one above). This fails, naming the
difference, when a wing or a part is missing, extra, or out of order against
tools/amalgamate.py's list (the wing headers, which the amalgamation follows).
Stdlib only.
"""
import os
import re
import subprocess
import sys


def drawn(readme):
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    at = text.find("\n### Layout\n")
    if at < 0:
        raise SystemExit("FAIL: README.md has no '### Layout' section")
    m = re.search(r"\n```[a-z]*\n(.*?)\n```", text[at:], re.S)
    if not m:
        raise SystemExit("FAIL: the Layout section has no code block")
    wings, current = [], None
    for line in m.group(1).splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            name = line.split()[0]
            if not name.endswith("/"):
                raise SystemExit(f"FAIL: Layout line {line!r}: a wing line starts with '<wing>/'")
            current = (name[:-1], [])
            wings.append(current)
        elif current is None:
            raise SystemExit(f"FAIL: Layout line {line!r} comes before any wing")
        elif line.startswith("  ") and not line.startswith("   "):
            current[1].append(line.split()[0])
        # (a line indented deeper continues the part above it)
    return wings


def actual(root):
    tool = os.path.join(root, "tools", "amalgamate.py")
    parts = subprocess.run([sys.executable, tool, "--list-parts"], check=True, capture_output=True, text=True).stdout
    wings = subprocess.run([sys.executable, tool, "--list-wings"], check=True, capture_output=True, text=True).stdout
    by_wing = {w: [] for w in wings.split()}
    for p in parts.split():
        w, name = p.split("/")
        by_wing[w].append(name)
    # The README draws the house top down.
    return [(w, list(reversed(ps))) for w, ps in reversed(list(by_wing.items()))]


def main(root):
    want, got = actual(root), drawn(os.path.join(root, "README.md"))
    print("the house, top down:", "; ".join(f"{w}/ {len(ps)} parts" for w, ps in want))
    if [w for w, _ in got] != [w for w, _ in want]:
        print(f"FAIL: Layout draws the wings {[w for w, _ in got]}; the house has {[w for w, _ in want]} (top down)")
        return 1
    bad = 0
    for (w, ps), (_, drawn_ps) in zip(want, got):
        if drawn_ps != ps:
            missing = [p for p in ps if p not in drawn_ps]
            extra = [p for p in drawn_ps if p not in ps]
            print(f"FAIL: {w}/: Layout draws {drawn_ps}; the wing has {ps} (top down)"
                  + (f"; missing {missing}" if missing else "") + (f"; not parts {extra}" if extra else ""))
            bad += 1
    if not bad:
        print("README's Layout draws every wing and every part, in order")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")))
