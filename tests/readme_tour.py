#!/usr/bin/env python3
"""README's tour is examples/from_source.cpp: the ```cpp block of the section
"## A tour: a kernel from source" must be the example's lines between
"// [tour]" and "// [/tour]" (their indentation removed), after the block's
first lines (the include and the using-directive), so the tour is code that
is compiled (examples/meson.build builds oxicuda-from-source).

  readme_tour.py README.md examples/from_source.cpp
"""
import re
import sys


def main(readme_path, example_path):
    readme = open(readme_path, encoding="utf-8").read()
    section = re.search(r"^## A tour: a kernel from source\n(.*?)(?=^## )", readme, re.M | re.S)
    if not section:
        print("FAIL: README.md has no '## A tour: a kernel from source' section")
        return 1
    block = re.search(r"^```cpp\n(.*?)^```\n", section.group(1), re.M | re.S)
    example = open(example_path, encoding="utf-8").read()
    tour = re.search(r"^( *)// \[tour\]\n(.*?)^ *// \[/tour\]\n", example, re.M | re.S)
    if not block or not tour:
        print("FAIL: no ```cpp block in the section, or no // [tour] ... // [/tour] in the example")
        return 1
    indent = len(tour.group(1))
    want = "\n".join(line[indent:] for line in tour.group(2).splitlines())
    head = '#include "oxicuda.hpp"\nusing namespace oxicuda;\n\n'
    got = block.group(1)
    if not got.startswith(head) or got[len(head):].rstrip("\n") != want.rstrip("\n"):
        print("FAIL: README's tour differs from examples/from_source.cpp's [tour] lines; README has:\n" + got +
              "\nthe example has:\n" + want)
        return 1
    print("README's tour is examples/from_source.cpp")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
