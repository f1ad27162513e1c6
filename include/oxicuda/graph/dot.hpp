// oxicuda/graph/dot.hpp — a graph as Graphviz DOT (cuGraphDebugDotPrint),
// written to a file or read back through a temporary one: what
// Graph::write_dot and Graph::dot do.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "node.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// Writes the DOT of `graph` to `path`.
inline void write_dot(CUgraph graph, const std::string& path, unsigned flags, SourceLocation where) {
  const Outcome r = OXICUDA_DRIVER(GraphDebugDotPrint, graph, path.c_str(), flags);
  if (!r.ok()) fail(r, where, cat({"writing the graph's DOT to '", path, "'"}));
}

// A file name for a temporary file, made and closed (empty when none could be).
inline std::string temporary_file() {
#if defined(_WIN32)
  char dir[MAX_PATH + 1] = {}, name[MAX_PATH + 1] = {};
  if (!::GetTempPathA(MAX_PATH, dir) || !::GetTempFileNameA(dir, "oxi", 0, name)) return {};
  return name;
#else
  const char* tmp = std::getenv("TMPDIR");
  std::string name = cat({tmp && *tmp ? tmp : "/tmp", "/oxicuda-graph-XXXXXX"});
  const int fd = ::mkstemp(name.data());
  if (fd < 0) return {};
  ::close(fd);
  return name;
#endif
}

inline std::string read_file(const std::string& path) {
  std::string text;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(static_cast<const char*>(buf), n);
    std::fclose(f);
  }
  return text;
}

// The DOT of `graph`, through a temporary file that is removed after.
inline std::string dot(CUgraph graph, unsigned flags, SourceLocation where) {
  const std::string path = temporary_file();
  if (path.empty())
    raise(Error(ffi::CUDA_ERROR_OPERATING_SYSTEM, "oxicuda::Graph::dot",
                "no temporary file could be made for the driver to write the DOT into", where));
  struct Remove {
    const std::string& path;
    ~Remove() { std::remove(path.c_str()); }
  } remove{path};
  write_dot(graph, path, flags, where);
  return read_file(path);
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
