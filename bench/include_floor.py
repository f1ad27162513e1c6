#!/usr/bin/python3
"""The include cost's floor: oxicuda.hpp with every function body emptied.

  include_floor.py [HEADER] [OUT]     (defaults: oxicuda.hpp, /tmp/oxicuda_floor.hpp)

Writes HEADER with the body of every function, member function and function
template defined in it replaced by `{}`, except the bodies of constexpr
functions and of functions whose return type is deduced (auto,
decltype(auto)), which declarations may need, and of functions whose body a
macro writes. What that file costs a translation unit is less than any header
that defines the same functions inline can cost: measure it with
`bench/include_cost.py --typical --header OUT` (BENCHMARKS.md, "Include
cost", round 8). Needs libclang's Python bindings (Debian: python3-clang-14,
for /usr/bin/python3). A measurement aid, never a test.
"""
import sys

import clang.cindex as ci

LIBCLANG = "/usr/lib/llvm-14/lib/libclang.so.1"
KINDS = {ci.CursorKind.FUNCTION_DECL, ci.CursorKind.CXX_METHOD, ci.CursorKind.CONSTRUCTOR,
         ci.CursorKind.DESTRUCTOR, ci.CursorKind.FUNCTION_TEMPLATE, ci.CursorKind.CONVERSION_FUNCTION}
KEEP = {"auto", "constexpr", "consteval", "decltype"}


def bodies(src, data):
    """(start, end) byte offsets of the bodies to empty."""
    ci.Config.set_library_file(LIBCLANG)
    tu = ci.Index.create().parse(src, args=["-x", "c++", "-std=c++20"])
    cuts = []

    def visit(cursor):
        for c in cursor.get_children():
            if c.location.file is None or c.location.file.name != src:
                continue
            if c.kind in KINDS and c.is_definition():
                tokens = [t.spelling for t in c.get_tokens()]
                head = tokens[: tokens.index("{")] if "{" in tokens else tokens
                body = [k for k in c.get_children() if k.kind == ci.CursorKind.COMPOUND_STMT]
                if body and not KEEP & set(head):
                    e = body[-1].extent
                    a, b = e.start.offset, e.end.offset
                    # (only a body written out in the file: not one a macro expands to)
                    if (e.start.file and e.start.file.name == src and data[a:a + 1] == b"{"
                            and data[b - 1:b] == b"}" and b"#" not in data[a:b]):
                        cuts.append((a, b))
                continue
            visit(c)

    visit(tu.cursor)
    return sorted(cuts)


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "oxicuda.hpp"
    out = sys.argv[2] if len(sys.argv) > 2 else "/tmp/oxicuda_floor.hpp"
    with open(src, "rb") as f:
        data = f.read()
    parts, pos, n = [], 0, 0
    for a, b in bodies(src, data):
        if a < pos:
            continue  # (inside a body already emptied)
        parts += [data[pos:a], b"{}"]
        pos, n = b, n + 1
    parts.append(data[pos:])
    with open(out, "wb") as f:
        f.write(b"".join(parts))
    print(f"{out}: {n} bodies emptied, {len(data)} -> {sum(map(len, parts))} bytes")


if __name__ == "__main__":
    main()
