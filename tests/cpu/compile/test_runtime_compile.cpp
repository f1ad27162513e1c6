// Runtime compilation on the fakes: NVRTC's and nvJitLink's errors (their
// categories, names, logs), Program's options and outputs, name expressions
// through module_from_source, the driver's JIT linker (cuLink*) and LTO
// linking, with nothing leaked. The real NVRTC and nvJitLink are tested in
// tests/nvrtc; here every path, failures included, runs on the fakes
// (OXICUDA_LIBNVRTC_PATH, OXICUDA_LIBNVJITLINK_PATH).
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <system_error>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

using namespace oxicuda;

namespace {
// Resets the fake NVRTC and nvJitLink; checks at the end that every program
// and link the test made was destroyed, once (objects left alive on purpose
// by earlier tests, whose destroy the fake refused, are not this test's).
struct ToolkitTest : ContextTest {
  FakeToolkit& nvrtc = FakeToolkit::nvrtc();
  FakeToolkit& jitlink = FakeToolkit::nvjitlink();
  long programs = nvrtc.live(), links = jitlink.live();
  ToolkitTest() {
    nvrtc.reset();
    jitlink.reset();
  }
  ~ToolkitTest() {
    CHECK(nvrtc.live() == programs);
    CHECK(nvrtc.invalid_destroys() == 0);
    CHECK(jitlink.live() == links);
    CHECK(jitlink.invalid_destroys() == 0);
  }
};
}  // namespace

TEST_CASE("NVRTC and nvJitLink errors have their own categories, names and texts") {
  const Error e(ffi::NVRTC_ERROR_COMPILATION, "nvrtcCompileProgram", "the log");
  CHECK(e.library() == Library::nvrtc);
  CHECK(e.name() == "NVRTC_ERROR_COMPILATION");
  CHECK(e.description() == "the source did not compile");
  CHECK(e.code() == ffi::NVRTC_ERROR_COMPILATION);
  CHECK(e.code() != ffi::CUDA_ERROR_INVALID_PTX);
  CHECK(e.code().category().name() == std::string("nvrtc"));
  CHECK(e.result() == ffi::CUDA_ERROR_UNKNOWN);  // result() is the driver's
  CHECK(std::string(e.what()).rfind("nvrtcCompileProgram failed: NVRTC_ERROR_COMPILATION (6): the source did not "
                                    "compile\n  at ", 0) == 0);
  CHECK(std::string(e.what()).find("\n  the log") != std::string::npos);
  // The same numeric value in another library is another error.
  CHECK(std::error_code(ffi::NVRTC_ERROR_OUT_OF_MEMORY) != std::error_code(ffi::CUDA_ERROR_INVALID_VALUE));
  CHECK(std::error_code(ffi::NVRTC_ERROR_OUT_OF_MEMORY) == std::errc::not_enough_memory);
  CHECK(std::error_code(ffi::NVRTC_ERROR_INVALID_OPTION) == std::errc::invalid_argument);

  const Error j(ffi::NVJITLINK_ERROR_MISSING_ARCH, "nvJitLinkCreate");
  CHECK(j.library() == Library::nvjitlink);
  CHECK(j.name() == "NVJITLINK_ERROR_MISSING_ARCH");
  CHECK(j.code() == ffi::NVJITLINK_ERROR_MISSING_ARCH);
  CHECK(j.code().category().name() == std::string("nvjitlink"));
  CHECK(std::error_code(ffi::NVJITLINK_ERROR_INVALID_INPUT) == std::errc::invalid_argument);
  CHECK(nvjitlink_category().message(4242) == "nvJitLinkResult 4242: unknown result");
  CHECK(nvrtc_category().message(ffi::NVRTC_ERROR_INVALID_PROGRAM) ==
        "NVRTC_ERROR_INVALID_PROGRAM: the program handle is not valid");

  // One catch for all three libraries.
  int caught = 0;
  for (int i = 0; i < 3; ++i) {
    try {
      if (i == 0) detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "cuX"));
      if (i == 1) detail::raise(Error(ffi::NVRTC_ERROR_INVALID_INPUT, "nvrtcX"));
      detail::raise(Error(ffi::NVJITLINK_ERROR_INTERNAL, "nvJitLinkX"));
    } catch (const Error&) {
      ++caught;
    }
  }
  CHECK(caught == 3);
}

TEST_CASE_FIXTURE(ToolkitTest, "a compile that fails is an NVRTC error carrying the compiler's log") {
  Program p("#error nope\n", "broken.cu");
  const Error e = error_of([&] { (void)p.compile({.arch = "compute_75", .defines = {"N=4"}}); });
  CHECK(e.library() == Library::nvrtc);
  CHECK(e.code() == ffi::NVRTC_ERROR_COMPILATION);
  CHECK(e.call() == "nvrtcCompileProgram");
  CHECK(e.detail() == "compiling 'broken.cu' (12 bytes of source; options: -arch=compute_75 -DN=4); NVRTC log:\n"
                      "broken.cu(1): error: #error directive\n\n1 error detected in the compilation of \"broken.cu\".");
}

TEST_CASE_FIXTURE(ToolkitTest, "Program: options in order, outputs by kind, log and lowered names") {
  const CompileOptions o{.arch = "sm_90", .std = "c++17", .defines = {"A", "B=2"}, .include_paths = {"/inc"},
                         .line_info = true, .debug = true, .fast_math = true, .relocatable = true, .lto = true,
                         .extra = {"-maxrregcount=32"}};
  CHECK(o.arguments() == StringList{"-arch=sm_90", "-std=c++17", "-DA", "-DB=2", "-I/inc", "-lineinfo", "-G",
                                    "--use_fast_math", "-rdc=true", "-dlto", "-maxrregcount=32"});
  CHECK(o.arguments().size() == 11);
  Program p(std::string(kFakePtx) + "// #warning\n", "k.cu");
  p.header("util.cuh", "#pragma once").name_expression("saxpy<float>");
  const Compiled ptx = p.compile({.arch = "compute_90"});
  CHECK(ptx.kind == CodeKind::ptx);
  CHECK(ptx.code.rfind(".version 7.0", 0) == 0);
  CHECK(ptx.code.back() != '\0');
  CHECK(ptx.log == "k.cu(1): warning: #warning directive");
  CHECK(ptx.lowered_name("saxpy<float>") == "fake_saxpy_float_");
  CHECK(ptx.lowered_name("other").empty());
  const Compiled cubin = p.compile({.arch = "sm_90"});
  CHECK(cubin.kind == CodeKind::cubin);
  CHECK(cubin.code.rfind("CUBIN:", 0) == 0);
  const Compiled lto = p.compile({.arch = "sm_90", .lto = true});
  CHECK(lto.kind == CodeKind::ltoir);
  CHECK(lto.code.rfind("LTOIR:", 0) == 0);
  // A bad raw option is NVRTC's error.
  CHECK(error_of([&] { (void)p.compile({.extra = {"nonsense"}}); }).code() == ffi::NVRTC_ERROR_INVALID_OPTION);
  CHECK(nvrtc_version() == 13000);
  const ArchList archs = supported_archs();
  CHECK(std::vector<int>(archs.begin(), archs.end()) == std::vector<int>{75, 80, 90});
  // A NUL inside an entry, a header or the source is an Error that loses nothing.
  CHECK(error_of([] { (void)CompileOptions{.extra = {std::string_view("-DA\0-DB", 7)}}; }).code() ==
        ffi::NVRTC_ERROR_INVALID_INPUT);
  Program held("x");
  held.header("a.cuh", "int a;");
  const Error nul = error_of([&] { held.header("b.cuh", std::string_view("int\0b;", 6)); });
  CHECK(nul.code() == ffi::NVRTC_ERROR_INVALID_INPUT);
  CHECK(nul.detail() ==
        "an entry holds a NUL byte at offset 3 (of 6); NVRTC's options, names and sources are C strings");
  CHECK(held.headers() == StringList{"a.cuh", "int a;"});
  CHECK(error_of([] { (void)Program(std::string("int x;\0int y;", 13)).compile(); }).detail() ==
        "the source holds a NUL byte at offset 6; NVRTC would compile only what comes before it");
  // Headers come in pairs.
  Program odd("x");
  odd.headers({"only-a-name.cuh"});
  CHECK(error_of([&] { (void)odd.compile(); }).code() == ffi::NVRTC_ERROR_INVALID_INPUT);
}

TEST_CASE("an architecture for a device: its own, else the newest supported as PTX, said in the note") {
  const ArchList three{{75, 80, 90}, 3};
  CHECK(arch_for(ComputeCapability{8, 0}, three).arch == "sm_80");
  CHECK(arch_for(ComputeCapability{8, 0}, three).note.empty());
  const ArchChoice newer = arch_for(ComputeCapability{12, 0}, three);
  CHECK(newer.arch == "compute_90");
  CHECK(newer.note == "oxicuda: NVRTC does not support sm_120 (compute capability 12.0); compiled PTX for "
                      "compute_90, its newest architecture, which the driver compiles for the device");
  CHECK(arch_for(ComputeCapability{8, 6}, three).arch == "compute_80");
  CHECK(error_of([] { (void)arch_for(ComputeCapability{6, 0}, ArchList{{75, 80}, 2}); }).code() ==
        ffi::NVRTC_ERROR_INVALID_OPTION);
}

TEST_CASE_FIXTURE(ToolkitTest, "module_from_source: name expressions find a template's instance") {
  // The fake NVRTC "compiles" PTX text to itself and lowers saxpy<float> to
  // fake_saxpy_float_: the PTX declares an entry of that name.
  const std::string source = std::string(kFakePtx) +
                             ".visible .entry fake_saxpy_float_(.param .u64 y, .param .u64 x, .param .f32 a, "
                             ".param .u32 n)\n{ ret; }\n";
  const Module m = module_from_source(ctx, source, {.compile = {.arch = "compute_75"},
                                                    .name_expressions = {"saxpy<float>"}, .cache = false});
  const auto k = m.kernel<void(float*, const float*, float, unsigned)>("saxpy<float>");
  CHECK(k.function().name() == "fake_saxpy_float_");
  CHECK(m.function("dbl"));
  CHECK(error_of([&] { (void)m.function("saxpy<double>"); }).code() == ffi::CUDA_ERROR_NOT_FOUND);
  // No architecture given: the device's, or (the fake NVRTC knows 75, 80, 90)
  // the newest below it as PTX, noted in the module's log.
  const ComputeCapability cc = ctx.device().compute_capability();
  const Module picked = module_from_source(ctx, kFakePtx, {.cache = false});
  if (cc.major * 10 + cc.minor > 90)
    CHECK(std::string(picked.info_log()).find("compiled PTX for compute_90") != std::string::npos);
  CHECK(picked.function("dbl"));
}

TEST_CASE_FIXTURE(ToolkitTest, "module_from_source with lto links NVRTC's LTO-IR through nvJitLink") {
  const Module m = module_from_source(ctx, kFakePtx, {.compile = {.arch = "sm_90", .lto = true}, .cache = false});
  CHECK(m.function("dbl"));
  CHECK(jitlink.calls("nvJitLinkComplete") == 1);
}

TEST_CASE_FIXTURE(ToolkitTest, "LtoLinker: a failed link is nvJitLink's error with its log; an arch is needed") {
  const Compiled c = Program("frob").compile({.arch = "sm_90", .lto = true});
  LtoLinker l("sm_90");
  const Error e = error_of([&] { l.add(c, "bad"); });
  CHECK(e.library() == Library::nvjitlink);
  CHECK(e.code() == ffi::NVJITLINK_ERROR_PTX_COMPILE);
  CHECK(e.detail().find("nvJitLink error log:\nptxas error   : Unknown instruction 'frob' in bad") !=
        std::string::npos);
  // A refused create: nvJitLink's reason from the handle it still made,
  // which is destroyed (the fixture checks that no link is left alive).
  const Error missing = error_of([] { LtoLinker bad("compute_90", {}, false); });
  CHECK(missing.code() == ffi::NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS);
  CHECK(missing.detail() ==
        "creating a link (options: -arch=compute_90); nvJitLink error log:\nERROR: virtual arch requires -ptx");
  const Error unknown = error_of([] { LtoLinker bad("sm_90", {"bogus"}); });
  CHECK(unknown.code() == ffi::NVJITLINK_ERROR_UNRECOGNIZED_OPTION);
  CHECK(unknown.detail() ==
        "creating a link (options: -arch=sm_90 -lto bogus); nvJitLink error log:\nERROR: unrecognized option: bogus");
  LtoLinker moved = std::move(l);
  CHECK_FALSE(l);
  CHECK(error_of([&] { (void)l.complete(); }).code() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(moved);
}

TEST_CASE_FIXTURE(ToolkitTest, "Linker: cuLink* joins inputs from memory and files, errors carry the linker's log") {
  Linker l(ctx);
  l.add_ptx(kFakePtx, "a.ptx");
  const std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/oxicuda-link-" +
                           std::to_string(::getpid()) + ".ptx";
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f);
    std::fputs(".version 7.0\n.target sm_70\n.visible .entry from_file()\n{ ret; }\n", f);
    std::fclose(f);
  }
  l.add_file(LinkInput::ptx, path);
  std::remove(path.c_str());
  const Module m = l.load();
  CHECK(m.function("dbl"));
  CHECK(m.function("from_file"));
  CHECK(error_of([&] { l.add_file(LinkInput::ptx, path); }).code() == ffi::CUDA_ERROR_FILE_NOT_FOUND);
  const Error bad = error_of([&] { Linker(ctx).add_ptx("frob", "bad.ptx"); });
  CHECK(bad.code() == ffi::CUDA_ERROR_INVALID_PTX);
  CHECK(bad.call() == "cuLinkAddData");
  CHECK(bad.detail() == "adding 'bad.ptx' (5 bytes); JIT error log:\n"
                        "ptxas application ptx input (bad.ptx); error   : Unknown instruction 'frob'");
  CHECK(error_of([&] { l.add(LinkInput::cubin, nullptr, 0); }).code() == ffi::CUDA_ERROR_INVALID_VALUE);
  Linker moved = std::move(l);
  CHECK(error_of([&] { (void)l.complete(); }).code() == ffi::CUDA_ERROR_INVALID_HANDLE);
}

// --- issue 29 (and issue 22's sm_1, issue 24's nvJitLinkVersion) ----------------

TEST_CASE_FIXTURE(ToolkitTest, "issue 29 (4): Program::compile says what NVRTC produced, and never returns empty code") {
  Program p(kFakePtx, "k.cu");
  // -dlto in .extra: LTO-IR (NVRTC makes no cubin and an empty PTX then).
  const Compiled lto = p.compile({.extra = {"-dlto"}});
  CHECK(lto.kind == CodeKind::ltoir);
  CHECK(lto.code.rfind("LTOIR:", 0) == 0);
  CHECK(p.compile({.arch = "sm_90", .extra = {"--dlink-time-opt"}}).kind == CodeKind::ltoir);
  // -arch=sm_90 in .extra: a cubin, as asked, not PTX.
  const Compiled cubin = p.compile({.extra = {"-arch=sm_90"}});
  CHECK(cubin.kind == CodeKind::cubin);
  CHECK(cubin.code.rfind("CUBIN:", 0) == 0);
  CHECK(p.compile({.extra = {"--gpu-architecture=sm_90"}}).kind == CodeKind::cubin);
  // The fields still decide when .extra says nothing.
  CHECK(p.compile({.arch = "compute_90"}).kind == CodeKind::ptx);
  CHECK(p.compile({.arch = "sm_90"}).kind == CodeKind::cubin);
  CHECK(p.compile({.arch = "sm_90", .lto = true}).kind == CodeKind::ltoir);
  // Nothing produced at all (the fake NVRTC told to make no output): an
  // Error, not empty code.
  ::setenv("FAKE_NVRTC_NO_OUTPUT", "1", 1);
  const Error e = error_of([&] { (void)p.compile({.arch = "sm_90"}); });
  ::unsetenv("FAKE_NVRTC_NO_OUTPUT");
  CHECK(e.code() == ffi::NVRTC_ERROR_INVALID_OPTION);
  CHECK(e.call() == "oxicuda::Program::compile");
  CHECK(e.detail() == "compiling 'k.cu' succeeded but NVRTC produced no code (no LTO-IR, cubin or PTX; options: "
                      "-arch=sm_90); an option in CompileOptions::extra may ask for output that NVRTC keeps to "
                      "itself: use the fields (.arch, .lto, .relocatable) instead");
}

TEST_CASE_FIXTURE(ToolkitTest, "issue 22 (5): LtoLinker checks the architecture before nvJitLink sees it") {
  for (const char* bad : {"sm_1", "sm_9x", "compute_1", "sm_", "90", "sm_090", "sm_9000", "-arch=sm_90", "", "sm_90b"}) {
    CAPTURE(bad);
    const Error e = error_of([&] { LtoLinker l(bad); });
    CHECK(e.library() == Library::nvjitlink);
    CHECK(e.code() == ffi::NVJITLINK_ERROR_UNRECOGNIZED_ARCH);
    CHECK(e.call() == "oxicuda::LtoLinker::LtoLinker");
    CHECK(e.detail() == "the architecture '" + std::string(bad) +
                            "' is not sm_NN, sm_NNa, sm_NNf or compute_NN, with NN the compute capability's two or "
                            "three digits (\"sm_90\" for 9.0); it is checked before nvJitLink sees it, because "
                            "nvJitLink ends the process on some malformed architectures");
  }
  // In an option too.
  CHECK(error_of([] { LtoLinker l("sm_90", {"-arch=sm_1"}); }).detail().find("the architecture 'sm_1' (in the option "
                                                                              "'-arch=sm_1') is not") == 0);
  CHECK(jitlink.calls("nvJitLinkCreate") == 0);
  for (const char* good : {"sm_75", "sm_90", "sm_90a", "sm_100f", "sm_120"}) {
    CAPTURE(good);
    CHECK_NOTHROW(LtoLinker{good});
  }
}

TEST_CASE_FIXTURE(ToolkitTest, "issue 29: a NUL byte in an LtoLinker architecture or option is nvJitLink's error") {
  const Error arch = error_of([] { LtoLinker l(std::string_view("sm_90\0x", 7)); });
  CHECK(arch.library() == Library::nvjitlink);
  CHECK(arch.code() == ffi::NVJITLINK_ERROR_UNRECOGNIZED_OPTION);
  CHECK(arch.detail() == "the architecture holds a NUL byte at offset 5 (of 7); nvJitLink's options are C strings");
  const Error option = error_of([] { LtoLinker l("sm_90", {"-O3", std::string_view("-lineinfo\0x", 11)}); });
  CHECK(option.library() == Library::nvjitlink);
  CHECK(option.code() == ffi::NVJITLINK_ERROR_UNRECOGNIZED_OPTION);
  CHECK(option.detail() ==
        "the option '-lineinfo...' holds a NUL byte at offset 9 (of 11); nvJitLink's options are C strings");
  CHECK(jitlink.calls("nvJitLinkCreate") == 0);
}

TEST_CASE_FIXTURE(ToolkitTest, "issue 24 (9): nvjitlink_info().version is nvJitLinkVersion's") {
  CHECK(nvjitlink_info().version == 13000);
  CHECK(nvjitlink_version() == 13000);
}

TEST_CASE_FIXTURE(ToolkitTest, "issue 24 (10): nvJitLink's error and info logs after a successful link") {
  const Compiled c = Program(std::string(kFakePtx) + "// warn\n").compile({.arch = "sm_90", .lto = true});
  LtoLinker l("sm_90");
  l.add(c, "warned");
  CHECK(l.error_log().empty());
  CHECK_FALSE(l.complete().empty());
  CHECK(l.error_log() == "nvJitLink warning: fake warning");
  CHECK(l.info_log() == "fake nvJitLink: linked");
}

TEST_CASE_FIXTURE(ContextTest, "issue 24 (11): JitOptions::log_verbose and wall_time; the wall time after the load") {
  const Module plain = Module::from_ptx(ctx, kFakePtx);
  CHECK(plain.jit_wall_time_ms() == 0.0f);
  CHECK(plain.info_log() == "fake ptxas info: 7 entry function(s)");
  const Module m = Module::from_ptx(ctx, kFakePtx, {.log_verbose = true, .wall_time = true});
  CHECK(m.jit_wall_time_ms() == 1.5f);  // what the fake driver wrote into the option's slot
  CHECK(m.info_log() == "fake ptxas info: 7 entry function(s)\nfake ptxas info: verbose");
  CHECK(Module().jit_wall_time_ms() == 0.0f);
  // All ten options at once fit.
  const Module all = Module::from_ptx(ctx, kFakePtx,
                                      {.max_registers = 32, .optimization_level = 3, .line_info = true,
                                       .debug_info = true, .log_verbose = true, .wall_time = true});
  CHECK(all.jit_wall_time_ms() == 1.5f);
}

TEST_CASE("issue 26: a cache entry's encode_entry and decode_entry are twins; every cut of a payload is refused") {
  const std::string names("saxpy<float>\0_Z5saxpyIfEvPT_S1_\0fill\0fill\0", 42);
  const std::string ptx = ".version 8.0\n.target sm_90\n.address_size 64\n";
  for (const detail::CacheEntry in : {detail::CacheEntry{true, names, "a log", ptx}, detail::CacheEntry{true, "", "", ptx}}) {
    const std::string payload = detail::encode_entry(in);
    detail::CacheEntry out;
    REQUIRE(detail::decode_entry(payload, out).empty());
    CHECK(out.is_text == in.is_text);
    CHECK(out.names == in.names);
    CHECK(out.log == in.log);
    CHECK(out.image == in.image);
    // Views into the payload, and the image its last field.
    CHECK(out.image.data() + out.image.size() == payload.data() + payload.size());
    CHECK(detail::encode_entry(out) == payload);
    for (std::size_t n = 0; n < payload.size(); ++n) {
      detail::CacheEntry cut;
      CAPTURE(n);
      CHECK_FALSE(detail::decode_entry(payload.substr(0, n), cut).empty());
    }
  }
  // The kind: PTX text said to be a binary image is refused.
  detail::CacheEntry wrong;
  CHECK(detail::decode_entry(detail::encode_entry({false, "", "", ptx}), wrong) ==
        "it says cubin or fatbin, but its image is neither");
}

TEST_CASE("issue 28: a rejected cache entry is removed only while its path still names the file that was read") {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/oxicuda-discard-test-" + std::to_string(::getpid());
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  const std::string key(32, 'a'), path = dir + "/" + key + ".bin";
  std::string note, payload;
  REQUIRE(detail::cache_write(dir, key, "the first entry", note));
  detail::CacheFileId first;
  REQUIRE(detail::cache_read(dir, key, payload, note, &first));
  CHECK(payload == "the first entry");
  // Another process renames a new entry there (write_atomically: a new file).
  REQUIRE(detail::cache_write(dir, key, "a good entry, renamed there since", note));
  const std::string kept = detail::cache_discard(dir, key, first, "its image is empty");
  CHECK(kept == "oxicuda cache: ignored (and kept: it was replaced since it was read) " + path + ": its image is empty");
  REQUIRE(detail::cache_read(dir, key, payload, note));
  CHECK(payload == "a good entry, renamed there since");
  // The file that was read goes.
  detail::CacheFileId second;
  REQUIRE(detail::cache_read(dir, key, payload, note, &second));
  CHECK(detail::cache_discard(dir, key, second, "its image is empty") ==
        "oxicuda cache: discarded " + path + ": its image is empty");
  struct stat st {};
  CHECK(::stat(path.c_str(), &st) != 0);
  CHECK(std::system(("rm -rf '" + dir + "'").c_str()) == 0);
}
