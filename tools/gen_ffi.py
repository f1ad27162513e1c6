#!/usr/bin/env python3
"""Regenerate the tables in include/oxicuda/core/ffi.hpp that mirror cuda.h.

Reads the toolkit's cuda.h (argument, or $CUDA_PATH/include/cuda.h, or
/usr/local/cuda/include/cuda.h) and rewrites the text between the
`// <gen:NAME>` and `// </gen:NAME>` markers of ffi.hpp:

  results     every CUDA_ERROR_* name, value and the first sentence of its
              doc comment (the header's own texts: the stub driver answers
              cuGetErrorString with 34, so we cannot ask it)
  device_attr every CU_DEVICE_ATTRIBUTE_* enumerator

Run by hand when the toolkit moves; the ABI test checks the result against
cuda.h on every build where the toolkit is present.  Stdlib only.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FFI = os.path.join(HERE, "..", "include", "oxicuda", "core", "ffi.hpp")


def find_cuda_h():
    if len(sys.argv) > 1:
        return sys.argv[1]
    root = os.environ.get("CUDA_PATH", "/usr/local/cuda")
    return os.path.join(root, "include", "cuda.h")


def enum_body(text, tag, typedef_name):
    m = re.search(r"typedef enum " + tag + r"\s*\{(.*?)\}\s*" + typedef_name + r"\s*;", text, re.S)
    if not m:
        sys.exit(f"gen_ffi: enum {typedef_name} not found")
    return m.group(1)


def first_sentence(comment):
    text = " ".join(line.strip().lstrip("*").strip() for line in comment.splitlines())
    text = re.sub(r"\\deprecated\s*", "", text)
    text = re.sub(r"::", "", text)
    text = re.sub(r"\s+", " ", text).strip()
    m = re.match(r"(.*?\.)(\s|$)", text)
    s = m.group(1) if m else text
    for prefix in ("This indicates that ", "This error indicates that ", "This indicates "):
        if s.startswith(prefix):
            s = s[len(prefix):]
            break
    s = s[0].lower() + s[1:] if s else s
    return s.rstrip(".")


def results(text):
    body = enum_body(text, "cudaError_enum", "CUresult")
    out = []
    for m in re.finditer(r"/\*\*(.*?)\*/\s*(CUDA_\w+)\s*=\s*(\d+)", body, re.S):
        desc = first_sentence(m.group(1))
        out.append((m.group(2), int(m.group(3)), desc))
    return out


def device_attrs(text):
    body = enum_body(text, "CUdevice_attribute_enum", "CUdevice_attribute")
    return [(m.group(1), int(m.group(2)))
            for m in re.finditer(r"(CU_DEVICE_ATTRIBUTE_\w+)\s*=\s*(\d+)", body)]


def cxx_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(tables):
    res = tables["results"]
    lines = {"results": [], "result_texts": [], "device_attr": []}
    for name, value, _ in res:
        lines["results"].append(f"  {name} = {value},")
    for name, value, desc in res:
        lines["result_texts"].append(f"  {{{value}, {cxx_str(name)}, {cxx_str(desc)}}},")
    for name, value in tables["device_attr"]:
        lines["device_attr"].append(f"  {name} = {value},")
    return {k: "\n".join(v) for k, v in lines.items()}


def main():
    path = find_cuda_h()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    blocks = render({"results": results(text), "device_attr": device_attrs(text)})
    with open(FFI, encoding="utf-8") as f:
        ffi = f.read()
    for key, block in blocks.items():
        pat = re.compile(r"(// <gen:" + key + r">\n)(.*?)(\s*// </gen:" + key + r">)", re.S)
        if not pat.search(ffi):
            sys.exit(f"gen_ffi: marker gen:{key} missing in ffi.hpp")
        ffi = pat.sub(lambda m: m.group(1) + block + m.group(3), ffi)
    with open(FFI, "w", encoding="utf-8") as f:
        f.write(ffi)
    print(f"gen_ffi: {len(blocks['results'].splitlines())} results, "
          f"{len(blocks['device_attr'].splitlines())} device attributes from {path}")


if __name__ == "__main__":
    main()
