// A fake NVRTC: every entry point of oxicuda's NVRTC table, counted and
// failable (fake_toolkit.hpp). It "compiles" a source that is PTX text (it
// holds ".version") or holds "frob" (the fakes' unknown instruction) into
// itself, so that the fake driver loads it; a source
// holding "#error" fails with a log. A name expression "f<T>" lowers to
// "fake_" + the expression with every other character than a letter or digit
// made '_' ("fake_f_T_"). Built with FAKE_NVRTC_OLD it lacks nvrtcGetLTOIRSize
// and nvrtcGetLTOIR, as NVRTC 11 did. FAKE_NVRTC_VERSION="12.4" sets its version.
// --fdevice-time-trace=PATH writes PATH.json as NVRTC 13 does: a Chrome
// trace with a "Processing Header File" event for NVRTC's builtin header and
// for each name the source names in #include "name" (given in memory or not);
// with FAKE_NVRTC_NO_TRACE set, the option is rejected, as by an NVRTC
// older than it.
#include "fake_toolkit.hpp"

#include <cctype>
#include <cstdio>
#include <string_view>
#include <cstdlib>
#include <utility>
#include <vector>

using namespace oxicuda::ffi;

namespace {

fake::Counters<nvrtc::entry_count> counters(nvrtc::entries);

struct Program {
  std::string source, name, log, ptx;
  std::vector<std::pair<std::string, std::string>> names;  // expression, lowered
  bool compiled = false;
  // What NVRTC produces, as the real one decides it from the options: LTO-IR
  // only with -dlto (then a PTX of 0 bytes and no cubin), a cubin only for
  // -arch=sm_XX, PTX otherwise.
  // none: no output at all, which the fake makes under FAKE_NVRTC_NO_OUTPUT
  // (for the check that an empty result is never a success).
  bool lto = false, cubin = false, none = false;
};
// Live programs, under counters.mu. Never destroyed, so that a program left
// alive on purpose (a destroy the fake was told to refuse) stays reachable at
// exit for LeakSanitizer, as the fake driver's handles do.
std::vector<Program*>& programs = *new std::vector<Program*>;

bool alive(nvrtcProgram p) {
  for (Program* q : programs)
    if (reinterpret_cast<nvrtcProgram>(q) == p) return true;
  return false;
}

nvrtcResult enter(nvrtc::Entry e) { return static_cast<nvrtcResult>(counters.enter(static_cast<std::size_t>(e))); }

}  // namespace

#define FAKE_DECLARE(member, version, symbol, params) \
  extern "C" __attribute__((visibility("default"))) nvrtcResult fake_nvrtc_##member params __asm__(symbol);
OXICUDA_DETAIL_NVRTC_API(FAKE_DECLARE)
#undef FAKE_DECLARE

#define FAKE_ENTRY(member) \
  if (const nvrtcResult fake_r_ = enter(nvrtc::Entry::member); fake_r_ != NVRTC_SUCCESS) return fake_r_

FAKE_TOOLKIT_CONTROLS(nvrtc, counters)

nvrtcResult fake_nvrtc_Version(int* major, int* minor) {
  FAKE_ENTRY(Version);
  if (!major || !minor) return NVRTC_ERROR_INVALID_INPUT;
  const char* v = std::getenv("FAKE_NVRTC_VERSION");
  *major = v ? std::atoi(v) : 13;
  *minor = v && std::strchr(v, '.') ? std::atoi(std::strchr(v, '.') + 1) : 0;
  return NVRTC_SUCCESS;
}

static const int archs[] = {75, 80, 90};

nvrtcResult fake_nvrtc_GetNumSupportedArchs(int* n) {
  FAKE_ENTRY(GetNumSupportedArchs);
  if (!n) return NVRTC_ERROR_INVALID_INPUT;
  *n = 3;
  return NVRTC_SUCCESS;
}

nvrtcResult fake_nvrtc_GetSupportedArchs(int* out) {
  FAKE_ENTRY(GetSupportedArchs);
  if (!out) return NVRTC_ERROR_INVALID_INPUT;
  std::memcpy(out, archs, sizeof archs);
  return NVRTC_SUCCESS;
}

nvrtcResult fake_nvrtc_CreateProgram(nvrtcProgram* out, const char* src, const char* name, int n,
                                     const char* const* headers, const char* const* names) {
  FAKE_ENTRY(CreateProgram);
  if (!out || !src || n < 0 || (n > 0 && (!headers || !names))) return NVRTC_ERROR_INVALID_INPUT;
  auto* p = new Program{src, name ? name : "default_program", {}, {}, {}, false};
  std::lock_guard lock(counters.mu);
  programs.push_back(p);
  ++counters.live;
  *out = reinterpret_cast<nvrtcProgram>(p);
  return NVRTC_SUCCESS;
}

nvrtcResult fake_nvrtc_DestroyProgram(nvrtcProgram* prog) {
  FAKE_ENTRY(DestroyProgram);
  std::lock_guard lock(counters.mu);
  if (!prog || !alive(*prog)) {
    ++counters.invalid_destroys;
    return NVRTC_ERROR_INVALID_PROGRAM;
  }
  for (auto it = programs.begin(); it != programs.end(); ++it)
    if (reinterpret_cast<nvrtcProgram>(*it) == *prog) {
      delete *it;
      programs.erase(it);
      break;
    }
  --counters.live;
  *prog = nullptr;
  return NVRTC_SUCCESS;
}

nvrtcResult fake_nvrtc_AddNameExpression(nvrtcProgram prog, const char* expr) {
  FAKE_ENTRY(AddNameExpression);
  std::lock_guard lock(counters.mu);
  if (!alive(prog)) return NVRTC_ERROR_INVALID_PROGRAM;
  if (!expr) return NVRTC_ERROR_INVALID_INPUT;
  auto* p = reinterpret_cast<Program*>(prog);
  if (p->compiled) return NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION;
  std::string lowered = "fake_";
  for (const char* c = expr; *c; ++c)
    lowered += (std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_');
  p->names.emplace_back(expr, lowered);
  return NVRTC_SUCCESS;
}

nvrtcResult fake_nvrtc_CompileProgram(nvrtcProgram prog, int n, const char* const* options) {
  FAKE_ENTRY(CompileProgram);
  std::lock_guard lock(counters.mu);
  if (!alive(prog)) return NVRTC_ERROR_INVALID_PROGRAM;
  auto* p = reinterpret_cast<Program*>(prog);
  std::string trace;
  for (int i = 0; i < n; ++i) {
    const std::string_view o = options[i] ? options[i] : "";
    const std::string_view trace_option = "--fdevice-time-trace=";
    const bool traced = o.substr(0, trace_option.size()) == trace_option;
    if (o.empty() || o[0] != '-' || (traced && std::getenv("FAKE_NVRTC_NO_TRACE"))) {
      p->log = std::string("nvrtc: error: invalid option '") + std::string(o) + "'\n";
      return NVRTC_ERROR_INVALID_OPTION;
    }
    if (traced) trace = std::string(o.substr(trace_option.size())) + ".json";
  }
  p->compiled = true;
  if (!trace.empty() && p->source.find("#error") == std::string::npos) {
    std::string events = "{\"args\":{\"detail\":\"__nv_nvrtc_builtin_header.h\"},\"name\":\"Processing Header File\"}";
    for (std::size_t at = 0; (at = p->source.find("#include \"", at)) != std::string::npos;) {
      at += 10;
      const std::size_t end = p->source.find('"', at);
      if (end == std::string::npos) break;
      events += ",{\"args\":{\"detail\":\"" + p->source.substr(at, end - at) + "\"},\"name\":\"Processing Header File\"}";
    }
    if (std::FILE* f = std::fopen(trace.c_str(), "wb")) {
      std::fputs(("{\"traceEvents\" : [ {}, " + events + "]}").c_str(), f);
      std::fclose(f);
    }
  }
  p->lto = p->cubin = false;
  p->none = std::getenv("FAKE_NVRTC_NO_OUTPUT") != nullptr;
  for (int i = 0; i < n; ++i) {
    const std::string o = options[i];
    if (o == "-dlto" || o == "--dlink-time-opt") p->lto = true;
    if (o.rfind("-arch=", 0) == 0 || o.rfind("--gpu-architecture=", 0) == 0)
      p->cubin = o.find("=sm_") != std::string::npos;
  }
  if (p->lto) p->cubin = false;
  if (p->source.find("#error") != std::string::npos) {
    p->log = p->name + "(1): error: #error directive\n\n1 error detected in the compilation of \"" + p->name + "\".\n";
    return NVRTC_ERROR_COMPILATION;
  }
  p->log = p->source.find("#warning") != std::string::npos ? p->name + "(1): warning: #warning directive\n" : "";
  const bool as_is = p->source.find(".version") != std::string::npos || p->source.find("frob") != std::string::npos;
  p->ptx = as_is ? p->source : ".version 8.0\n.target sm_75\n";
  return NVRTC_SUCCESS;
}

namespace {
// The size (with its NUL) and the bytes of one output of a compiled program.
nvrtcResult output(nvrtcProgram prog, const std::string& prefix, std::size_t* size, char* out) {
  std::lock_guard lock(counters.mu);
  if (!alive(prog)) return NVRTC_ERROR_INVALID_PROGRAM;
  auto* p = reinterpret_cast<Program*>(prog);
  if (!p->compiled) return NVRTC_ERROR_INVALID_PROGRAM;
  // As the real NVRTC answers for an output it did not produce: a size of 0
  // for LTO-IR and a cubin, an empty (NUL-only) text for PTX.
  const bool made = !p->none && (prefix == "LTOIR:" ? p->lto : prefix == "CUBIN:" ? p->cubin : !p->lto);
  if (!made) {
    if (size) *size = prefix.empty() ? 1 : 0;
    if (out && prefix.empty()) *out = '\0';
    return NVRTC_SUCCESS;
  }
  const std::string text = prefix + p->ptx;
  if (size) *size = text.size() + 1;
  if (out) std::memcpy(out, text.c_str(), text.size() + 1);
  return NVRTC_SUCCESS;
}
}  // namespace

nvrtcResult fake_nvrtc_GetPTXSize(nvrtcProgram prog, std::size_t* size) {
  FAKE_ENTRY(GetPTXSize);
  return size ? output(prog, "", size, nullptr) : NVRTC_ERROR_INVALID_INPUT;
}
nvrtcResult fake_nvrtc_GetPTX(nvrtcProgram prog, char* out) {
  FAKE_ENTRY(GetPTX);
  return out ? output(prog, "", nullptr, out) : NVRTC_ERROR_INVALID_INPUT;
}
nvrtcResult fake_nvrtc_GetCUBINSize(nvrtcProgram prog, std::size_t* size) {
  FAKE_ENTRY(GetCUBINSize);
  return size ? output(prog, "CUBIN:", size, nullptr) : NVRTC_ERROR_INVALID_INPUT;
}
nvrtcResult fake_nvrtc_GetCUBIN(nvrtcProgram prog, char* out) {
  FAKE_ENTRY(GetCUBIN);
  return out ? output(prog, "CUBIN:", nullptr, out) : NVRTC_ERROR_INVALID_INPUT;
}
#ifndef FAKE_NVRTC_OLD
nvrtcResult fake_nvrtc_GetLTOIRSize(nvrtcProgram prog, std::size_t* size) {
  FAKE_ENTRY(GetLTOIRSize);
  return size ? output(prog, "LTOIR:", size, nullptr) : NVRTC_ERROR_INVALID_INPUT;
}
nvrtcResult fake_nvrtc_GetLTOIR(nvrtcProgram prog, char* out) {
  FAKE_ENTRY(GetLTOIR);
  return out ? output(prog, "LTOIR:", nullptr, out) : NVRTC_ERROR_INVALID_INPUT;
}
#endif

nvrtcResult fake_nvrtc_GetProgramLogSize(nvrtcProgram prog, std::size_t* size) {
  FAKE_ENTRY(GetProgramLogSize);
  std::lock_guard lock(counters.mu);
  if (!alive(prog)) return NVRTC_ERROR_INVALID_PROGRAM;
  if (!size) return NVRTC_ERROR_INVALID_INPUT;
  *size = reinterpret_cast<Program*>(prog)->log.size() + 1;
  return NVRTC_SUCCESS;
}

nvrtcResult fake_nvrtc_GetProgramLog(nvrtcProgram prog, char* out) {
  FAKE_ENTRY(GetProgramLog);
  std::lock_guard lock(counters.mu);
  if (!alive(prog)) return NVRTC_ERROR_INVALID_PROGRAM;
  if (!out) return NVRTC_ERROR_INVALID_INPUT;
  const std::string& log = reinterpret_cast<Program*>(prog)->log;
  std::memcpy(out, log.c_str(), log.size() + 1);
  return NVRTC_SUCCESS;
}

nvrtcResult fake_nvrtc_GetLoweredName(nvrtcProgram prog, const char* expr, const char** lowered) {
  FAKE_ENTRY(GetLoweredName);
  std::lock_guard lock(counters.mu);
  if (!alive(prog)) return NVRTC_ERROR_INVALID_PROGRAM;
  auto* p = reinterpret_cast<Program*>(prog);
  if (!p->compiled) return NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION;
  for (const auto& [e, l] : p->names)
    if (expr && e == expr) return *lowered = l.c_str(), NVRTC_SUCCESS;
  return NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID;
}
