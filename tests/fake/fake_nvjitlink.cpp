// A fake nvJitLink: every entry point of oxicuda's nvJitLink table, counted
// and failable (fake_toolkit.hpp). It needs an -arch option, joins its inputs
// (an input holding "frob" fails with an error log) and hands back the join,
// less the fake NVRTC's "LTOIR:" prefixes, as the linked "cubin": PTX text the
// fake driver loads.
#include "fake_toolkit.hpp"

#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace oxicuda::ffi;

namespace {

fake::Counters<nvjitlink::entry_count> counters(nvjitlink::entries);

struct Link {
  std::string linked, error_log, info_log;
  bool has_arch = false;
};
// Live links, under counters.mu; never destroyed (see fake_nvrtc.cpp).
std::vector<Link*>& links = *new std::vector<Link*>;

Link* find(nvJitLinkHandle h) {
  for (Link* l : links)
    if (reinterpret_cast<nvJitLinkHandle>(l) == h) return l;
  return nullptr;
}

nvJitLinkResult enter(nvjitlink::Entry e) {
  return static_cast<nvJitLinkResult>(counters.enter(static_cast<std::size_t>(e)));
}

}  // namespace

// FAKE_NVJITLINK_VERSIONED: exported only as nvJitLink of CUDA 12.0 to 12.2
// exports them (__nvJitLinkCreate_12_0, ...).
#ifdef FAKE_NVJITLINK_VERSIONED
#define FAKE_SYMBOL(symbol) "__" symbol "_12_0"
#else
#define FAKE_SYMBOL(symbol) symbol
#endif
#define FAKE_DECLARE(member, version, symbol, params) \
  extern "C" __attribute__((visibility("default"))) nvJitLinkResult fake_nvjitlink_##member params __asm__(FAKE_SYMBOL(symbol));
OXICUDA_DETAIL_NVJITLINK_API(FAKE_DECLARE)
#undef FAKE_DECLARE

#define FAKE_ENTRY(member)                                                                         \
  if (const nvJitLinkResult fake_r_ = enter(nvjitlink::Entry::member); fake_r_ != NVJITLINK_SUCCESS) \
  return fake_r_

FAKE_TOOLKIT_CONTROLS(nvjitlink, counters)

nvJitLinkResult fake_nvjitlink_Create(nvJitLinkHandle* out, std::uint32_t n, const char** options) {
  FAKE_ENTRY(Create);
  if (!out) return NVJITLINK_ERROR_NULL_INPUT;
  // As nvJitLink 13 does, a refused create still makes a handle, holding the
  // reason in its error log, for the caller to read and destroy.
  auto* l = new Link{};
  nvJitLinkResult r = NVJITLINK_SUCCESS;
  for (std::uint32_t i = 0; i < n && r == NVJITLINK_SUCCESS; ++i) {
    if (!options[i] || options[i][0] != '-') {
      l->error_log = std::string("ERROR: unrecognized option: ") + (options[i] ? options[i] : "(null)") + "\n";
      r = NVJITLINK_ERROR_UNRECOGNIZED_OPTION;
    }
    l->has_arch = l->has_arch || (options[i] && std::strncmp(options[i], "-arch=sm_", 9) == 0);
  }
  // As nvJitLink 13: a virtual architecture (compute_NN) needs -ptx.
  bool virtual_arch = false, ptx = false;
  for (std::uint32_t i = 0; i < n; ++i) {
    virtual_arch = virtual_arch || (options[i] && std::strncmp(options[i], "-arch=compute_", 14) == 0);
    ptx = ptx || (options[i] && std::strcmp(options[i], "-ptx") == 0);
  }
  if (r == NVJITLINK_SUCCESS && virtual_arch && !ptx) {
    l->error_log = "ERROR: virtual arch requires -ptx\n";
    r = NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS;
  } else if (r == NVJITLINK_SUCCESS && !l->has_arch) {
    l->error_log = "ERROR: -arch option missing\n";
    r = NVJITLINK_ERROR_MISSING_ARCH;
  }
  std::lock_guard lock(counters.mu);
  links.push_back(l);
  ++counters.live;
  *out = reinterpret_cast<nvJitLinkHandle>(l);
  return r;
}

nvJitLinkResult fake_nvjitlink_Destroy(nvJitLinkHandle* h) {
  FAKE_ENTRY(Destroy);
  std::lock_guard lock(counters.mu);
  Link* l = h ? find(*h) : nullptr;
  if (!l) {
    ++counters.invalid_destroys;
    return NVJITLINK_ERROR_INVALID_INPUT;
  }
  for (auto it = links.begin(); it != links.end(); ++it)
    if (*it == l) {
      links.erase(it);
      break;
    }
  delete l;
  --counters.live;
  *h = nullptr;
  return NVJITLINK_SUCCESS;
}

nvJitLinkResult fake_nvjitlink_AddData(nvJitLinkHandle h, nvJitLinkInputType type, const void* data, std::size_t size,
                                       const char* name) {
  FAKE_ENTRY(AddData);
  std::lock_guard lock(counters.mu);
  Link* l = find(h);
  if (!l) return NVJITLINK_ERROR_INVALID_INPUT;
  if (!data || !size) return NVJITLINK_ERROR_NULL_INPUT;
  // PTX is read up to its NUL, whatever the size says, as nvJitLink reads it;
  // other inputs are `size` bytes.
  std::string text = type == NVJITLINK_INPUT_PTX ? std::string(static_cast<const char*>(data))
                                                  : std::string(static_cast<const char*>(data), size);
  text = text.c_str();
  if (text.find("frob") != std::string::npos) {
    l->error_log = std::string("ptxas error   : Unknown instruction 'frob' in ") + (name ? name : "?") + "\n";
    return NVJITLINK_ERROR_PTX_COMPILE;
  }
  if (text.rfind("LTOIR:", 0) == 0) text.erase(0, 6);
  l->linked += text + "\n";
  return NVJITLINK_SUCCESS;
}

nvJitLinkResult fake_nvjitlink_Complete(nvJitLinkHandle h) {
  FAKE_ENTRY(Complete);
  std::lock_guard lock(counters.mu);
  Link* l = find(h);
  if (!l) return NVJITLINK_ERROR_INVALID_INPUT;
  if (l->linked.empty()) {
    l->error_log = "nvJitLink error: no input\n";
    return NVJITLINK_ERROR_INVALID_INPUT;
  }
  l->info_log = "fake nvJitLink: linked\n";
  // A successful link may leave warnings in the error log: the fake does
  // for an input holding "// warn".
  if (l->linked.find("// warn") != std::string::npos) l->error_log = "nvJitLink warning: fake warning\n";
  return NVJITLINK_SUCCESS;
}

namespace {
nvJitLinkResult text_of(nvJitLinkHandle h, std::string Link::*field, std::size_t* size, char* out) {
  std::lock_guard lock(counters.mu);
  Link* l = find(h);
  if (!l) return NVJITLINK_ERROR_INVALID_INPUT;
  if (!size && !out) return NVJITLINK_ERROR_NULL_INPUT;
  const std::string& t = l->*field;
  if (size) *size = t.size() + 1;
  if (out) std::memcpy(out, t.c_str(), t.size() + 1);
  return NVJITLINK_SUCCESS;
}
}  // namespace

nvJitLinkResult fake_nvjitlink_GetLinkedCubinSize(nvJitLinkHandle h, std::size_t* size) {
  FAKE_ENTRY(GetLinkedCubinSize);
  return text_of(h, &Link::linked, size, nullptr);
}
nvJitLinkResult fake_nvjitlink_GetLinkedCubin(nvJitLinkHandle h, void* out) {
  FAKE_ENTRY(GetLinkedCubin);
  return text_of(h, &Link::linked, nullptr, static_cast<char*>(out));
}
nvJitLinkResult fake_nvjitlink_GetErrorLogSize(nvJitLinkHandle h, std::size_t* size) {
  FAKE_ENTRY(GetErrorLogSize);
  return text_of(h, &Link::error_log, size, nullptr);
}
nvJitLinkResult fake_nvjitlink_GetErrorLog(nvJitLinkHandle h, char* out) {
  FAKE_ENTRY(GetErrorLog);
  return text_of(h, &Link::error_log, nullptr, out);
}
nvJitLinkResult fake_nvjitlink_GetInfoLogSize(nvJitLinkHandle h, std::size_t* size) {
  FAKE_ENTRY(GetInfoLogSize);
  return text_of(h, &Link::info_log, size, nullptr);
}
nvJitLinkResult fake_nvjitlink_GetInfoLog(nvJitLinkHandle h, char* out) {
  FAKE_ENTRY(GetInfoLog);
  return text_of(h, &Link::info_log, nullptr, out);
}

// nvJitLinkVersion came with CUDA 12.3: the versioned (12.0 to 12.2) build
// has none. FAKE_NVJITLINK_VERSION="12.4" sets the version (13.0 otherwise).
#ifndef FAKE_NVJITLINK_VERSIONED
nvJitLinkResult fake_nvjitlink_Version(unsigned int* major, unsigned int* minor) {
  FAKE_ENTRY(Version);
  if (!major || !minor) return NVJITLINK_ERROR_NULL_INPUT;
  unsigned a = 13, b = 0;
  if (const char* v = std::getenv("FAKE_NVJITLINK_VERSION")) std::sscanf(v, "%u.%u", &a, &b);
  *major = a;
  *minor = b;
  return NVJITLINK_SUCCESS;
}
#endif
