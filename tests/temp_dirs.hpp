// Paths for the tests' scratch directories under TMPDIR (else /tmp), named
// "<prefix>-<pid>-<n>", none existing when returned, and each removed with
// what it holds when the process exits: a test run leaves nothing behind.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

namespace oxicuda_test {

inline std::string tmp_root() {
  const char* t = std::getenv("TMPDIR");
  return t ? t : "/tmp";
}

inline void remove_tree(const std::string& path) { (void)std::system(("rm -rf '" + path + "'").c_str()); }

// A fresh path for a scratch directory (not created: mkdir it, or let the
// code under test create it).
inline std::string scratch_path(const std::string& prefix) {
  struct Made {
    std::vector<std::string> paths;
    ~Made() {
      for (const std::string& p : paths) remove_tree(p);
    }
  };
  static Made made;
  static int n = 0;
  const std::string dir = tmp_root() + "/" + prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
  remove_tree(dir);
  made.paths.push_back(dir);
  return dir;
}

}  // namespace oxicuda_test
