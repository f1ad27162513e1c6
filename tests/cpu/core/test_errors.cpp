// Errors: code, name, description, call, caller's line, the whole what()
// text, the std::error_code integration, and the diagnostic hook.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <string>
#include <system_error>
#include <type_traits>

using namespace oxicuda;

TEST_CASE_FIXTURE(FakeTest, "an Error carries code, name, the driver's description, call and the caller's line") {
  fake.fail("cuDeviceGetCount", 1, ffi::CUDA_ERROR_OUT_OF_MEMORY);
  const unsigned line = __LINE__ + 2;
  {
    const Error e = error_of([&] { (void)Device::count(); });
    CHECK(e.result() == ffi::CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(e.name() == "CUDA_ERROR_OUT_OF_MEMORY");
    CHECK(e.call() == "cuDeviceGetCount");
    // The driver's own text is preferred (the fake marks its texts).
    CHECK(e.description() == "the API call failed because it was unable to allocate enough memory or other "
                             "resources to perform the requested operation [fake driver]");
    CHECK(e.where().line() == line);
    CHECK(std::string(e.where().file_name()).find("test_errors.cpp") != std::string::npos);
    const std::string expected_head =
        "cuDeviceGetCount failed: CUDA_ERROR_OUT_OF_MEMORY (2): the API call failed because it was unable to "
        "allocate enough memory or other resources to perform the requested operation [fake driver]\n  at ";
    CHECK(std::string(e.what()).rfind(expected_head, 0) == 0);
    CHECK(std::string(e.what()).find("test_errors.cpp:" + std::to_string(line)) != std::string::npos);
    // std::system_error integration.
    CHECK(e.code() == ffi::CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(e.code() == std::errc::not_enough_memory);
    CHECK(e.code().category().name() == std::string("cuda"));
  }
}

TEST_CASE("catching std::system_error catches oxicuda errors") {
  FakeScope scope;
  scope.fake.fail("cuDeviceGet", 1, ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK_THROWS_AS((void)Device::get(0), std::system_error);
}

TEST_CASE("the cuda error category names every result") {
  const std::error_category& cat = cuda_category();
  CHECK(cat.message(ffi::CUDA_ERROR_INVALID_PTX) ==
        "CUDA_ERROR_INVALID_PTX: a PTX JIT compilation failed");
  CHECK(cat.message(ffi::CUDA_ERROR_STUB_LIBRARY) ==
        "CUDA_ERROR_STUB_LIBRARY: the CUDA driver that the application has loaded is a stub library");
  CHECK(cat.message(12345) == "CUresult 12345: unknown result");
  CHECK(std::error_code(ffi::CUDA_ERROR_INVALID_VALUE) == std::errc::invalid_argument);
  // Every table entry has a name that starts CUDA_.
  for (const auto& t : ffi::result_texts) CHECK(std::string(t.name).rfind("CUDA_", 0) == 0);
}

// Each library's traits hold its result type, names and texts; the
// categories, Error and the stand-ins read them, the driver like the others.
template <Library L>
void check_library_traits(const char* category, const char* prefix) {
  using T = LibraryTraits<L>;
  static_assert(std::is_same_v<TraitsOf<typename T::result>, T>);
  static_assert(T::library == L);
  CHECK(std::string(T::category) == category);
  CHECK(detail::result_category<L>().name() == std::string(category));
  REQUIRE(!T::texts.empty());
  for (const ffi::ResultText& t : T::texts) {
    // One row per code, found by the one lookup.
    CHECK(detail::result_text<L>(t.code) == &t);
    CHECK(detail::result_name<L>(t.code) == std::string(t.name));
    const std::string name = t.name;
    CHECK((name.rfind(prefix, 0) == 0 || name.rfind("OXICUDA_", 0) == 0));
    CHECK(detail::result_category<L>().message(t.code) == name + ": " + t.text);
  }
  // The success and stand-in answers are rows of the table.
  CHECK(detail::result_text<L>(T::success) != nullptr);
  CHECK(detail::result_text<L>(T::not_found) != nullptr);
  // A result the table does not list.
  CHECK(detail::result_text<L>(123456) == nullptr);
  CHECK(detail::result_name<L>(123456) == std::string(T::unknown_name));
  CHECK(detail::result_category<L>().message(123456) == std::string(T::result_type) + " 123456: unknown result");
  const Error e(static_cast<typename T::result>(123456), "someCall", "", SourceLocation());
  CHECK(e.library() == L);
  CHECK(e.name() == T::unknown_name);
  CHECK(e.code().category() == detail::result_category<L>());
  CHECK(std::string(e.what()).rfind(std::string("someCall failed: ") + T::unknown_name + " (123456): ", 0) == 0);
}

TEST_CASE("one traits type per library: names, texts, categories, unknown results") {
  check_library_traits<Library::driver>("cuda", "CUDA_");
  check_library_traits<Library::nvrtc>("nvrtc", "NVRTC_");
  check_library_traits<Library::nvjitlink>("nvjitlink", "NVJITLINK_");
  static_assert(!LibraryResult<int>);
  CHECK(std::string(LibraryTraits<Library::driver>::name) == "CUDA driver");
  CHECK(std::string(LibraryTraits<Library::nvrtc>::name) == "NVRTC");
  CHECK(std::string(LibraryTraits<Library::nvjitlink>::name) == "nvJitLink");
  // The standard conditions, from each library's traits.
  CHECK(std::error_code(ffi::NVRTC_ERROR_OUT_OF_MEMORY) == std::errc::not_enough_memory);
  CHECK(std::error_code(ffi::NVRTC_ERROR_INVALID_OPTION) == std::errc::invalid_argument);
  CHECK(std::error_code(ffi::NVJITLINK_ERROR_UNSUPPORTED_ARCH) == std::errc::not_supported);
  CHECK(std::error_code(ffi::CUDA_ERROR_NOT_SUPPORTED) == std::errc::not_supported);
  CHECK(std::error_code(ffi::NVRTC_ERROR_COMPILATION) != std::errc::invalid_argument);
  // The stand-ins answer their library's not_found.
  CHECK(ffi::missing::Init(0) == LibraryTraits<Library::driver>::not_found);
  CHECK(ffi::nvrtc::missing::Version(nullptr, nullptr) == LibraryTraits<Library::nvrtc>::not_found);
  CHECK(ffi::nvjitlink::missing::Version(nullptr, nullptr) == LibraryTraits<Library::nvjitlink>::not_found);
  // The header's text when the library gives none of its own.
  const Error e(ffi::NVRTC_ERROR_INVALID_OPTION, "nvrtcCompileProgram");
  CHECK(e.description() == "a compile option is not valid");
}

TEST_CASE("a bad device ordinal is an error that says how many devices there are") {
  FakeScope scope;
  {
    const Error e = error_of([&] { (void)Device::get(1); });
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_DEVICE);
    CHECK(e.detail() == "device ordinal 1 is out of range: the driver sees 1 device (ordinals 0..0)");
  }
  {
    const Error e = error_of([&] { (void)Device::get(-1); });
    CHECK(e.detail() == "device ordinal -1 is out of range: the driver sees 1 device (ordinals 0..0)");
  }
}

namespace {
std::string last_diagnostic;
int diagnostics = 0;
void capture(const Error& e) noexcept {
  ++diagnostics;
  last_diagnostic = e.what();
}
}  // namespace

TEST_CASE("a failing destroy goes to the diagnostic hook, never out of a destructor") {
  FakeScope scope;
  auto ctx = Context::primary(Device::get(0));
  DiagnosticHook previous = set_diagnostic_hook(capture);
  diagnostics = 0;
  {
    Stream s(ctx);
    scope.fake.fail("cuStreamDestroy", 1, ffi::CUDA_ERROR_LAUNCH_FAILED);
  }  // no throw from here
  CHECK(diagnostics == 1);
  CHECK(last_diagnostic.rfind("cuStreamDestroy failed: CUDA_ERROR_LAUNCH_FAILED (719)", 0) == 0);
  set_diagnostic_hook(previous);
  // The stream the fake refused to destroy is still live there; nothing else is.
  CHECK(scope.fake.live("stream") == scope.at_start.stream + 1);
}

TEST_CASE_FIXTURE(FakeTest, "using an empty handle is a clear error, not a crash") {
  Stream s;
  {
    const Error e = error_of([&] { s.synchronize(); });
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
    CHECK(e.call() == "oxicuda::Stream::synchronize");
    CHECK(e.detail() == "this oxicuda::Stream is empty (default-constructed or moved-from); it has no driver handle");
  }
  Event ev;
  CHECK_THROWS_AS(ev.synchronize(), Error);
  CHECK_THROWS_AS((void)ev.ready(), Error);
  Context c;
  CHECK_THROWS_AS(c.synchronize(), Error);
  CHECK_THROWS_AS(Stream{c}, Error);
  CHECK_THROWS_AS(Event{c}, Error);
  Module m;
  CHECK_THROWS_AS((void)m.function("x"), Error);
  Function f;
  CHECK_THROWS_AS((void)f.num_registers(), Error);
  auto ctx = Context::primary(Device::get(0));
  Stream real(ctx);
  Stream moved = std::move(real);
  CHECK_THROWS_AS(real.synchronize(), Error);  // NOLINT(bugprone-use-after-move): that is the point
  CHECK_THROWS_AS(moved.record(ev), Error);
  CHECK(fake.calls("cuEventRecord") == 0);
}

TEST_CASE_FIXTURE(ContextTest, "what() reads well: the whole text of representative errors") {
  // A JIT failure: call, name, code, the driver's text, where, and ptxas's log.
  {
    const Error e = error_of([&] { (void)Module::from_ptx(ctx, ".version 7.0\n.target sm_70\n.address_size 64\nfrob;\n"); });
    const std::string at = std::string(e.where().file_name()) + ":" + std::to_string(e.where().line()) + " in " +
                           e.where().function_name();
    CHECK(std::string(e.what()) ==
          "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (218): a PTX JIT compilation failed [fake driver]\n"
          "  at " + at + "\n"
          "  PTX source of 50 bytes; JIT error log:\n"
          "  ptxas application ptx input, line 4; error   : Not a name of any known instruction: 'frob'");
  }
  // A typed kernel whose signature does not match the module's kernel.
  {
    const Error e = error_of([&] { (void)Module::from_ptx(ctx, kFakePtx).kernel<void(float*)>("dbl"); });
    const std::string at = std::string(e.where().file_name()) + ":" + std::to_string(e.where().line()) + " in " +
                           e.where().function_name();
    const std::string sig(detail::type_name<void(float*)>());
    CHECK(std::string(e.what()) ==
          "oxicuda::Module::kernel failed: CUDA_ERROR_INVALID_VALUE (1): one or more of the parameters passed to "
          "the API call is not within an acceptable range of values [fake driver]\n"
          "  at " + at + "\n"
          "  kernel 'dbl' is declared " + sig + ", 1 parameter (8 bytes at 0), but the module's kernel takes 2 "
          "parameters (8 bytes at 0, 4 bytes at 8)");
  }
}
