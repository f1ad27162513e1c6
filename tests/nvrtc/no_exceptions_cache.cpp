// Built with -fno-exceptions (issue 22, defect 5): a cached entry that the
// driver will not load is discarded and compiled again, with a note; the
// error handler (which must not return) is not called, so no run aborts on
// it. The fake driver and the fake NVRTC (which writes its trace).
#include "oxicuda.hpp"

#include <dirent.h>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
void handler(const oxicuda::Error& e) {
  std::printf("FAIL: the error handler was called: %s\n", e.what());
  std::_Exit(1);
}
}  // namespace

int main() {
  using namespace oxicuda;
  set_error_handler(handler);
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp ? tmp : "/tmp") + "/oxicuda-noexc-cache-XXXXXX";
  if (!::mkdtemp(dir.data())) return 2;
  dir += "/c";
  ::setenv("OXICUDA_CACHE_DIR", dir.c_str(), 1);
  ::unsetenv("OXICUDA_CACHE");
  const Context ctx = Context::primary(Device::get(0));
  const char* ptx = ".version 8.0\n.target sm_90\n.visible .entry noexc() { ret; }\n";
  const SourceOptions options{.compile = {.arch = "compute_90"}};
  (void)module_from_source(ctx, ptx, options);
  std::string key;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      if (std::string(e->d_name).size() == 36 && std::string(e->d_name).substr(32) == ".bin")
        key = std::string(e->d_name).substr(0, 32);
    ::closedir(d);
  }
  if (key.empty()) {
    std::puts("FAIL: the first compile stored no entry");
    return 1;
  }
  std::string note;
  if (!detail::cache_write(dir, key, detail::encode_entry({true, "", "", "this is not PTX"}), note)) {
    std::printf("FAIL: could not plant the entry: %s\n", note.c_str());
    return 1;
  }
  const Module m = module_from_source(ctx, ptx, options);
  const std::string log(m.info_log());
  const bool ok = log.find("oxicuda cache: discarded " + dir + "/" + key + ".bin: the driver did not load it") !=
                      std::string::npos &&
                  m.function("noexc");
  std::printf("%s: %s\n", ok ? "OK" : "FAIL", log.c_str());
  std::system(("rm -rf '" + dir.substr(0, dir.size() - 2) + "'").c_str());
  return ok ? 0 : 1;
}
