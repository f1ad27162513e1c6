// Issue 25 (2) on the fake driver: KernelLibrary, an image loaded once for
// every context (cuLibraryLoadData, cuLibraryLoadFromFile), its kernels as
// Functions of no context (cuLibraryGetKernel), typed and checked with
// cuKernelGetParamInfo, their functions in each context
// (cuKernelGetFunction), launched on streams, added to graphs and asked for
// their occupancy as any Function; its list of kernels; its globals (per
// context) and managed variables; library_from_source through the kernel
// cache. The fake reads the PTX's entries and runs `dbl` on the host.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

using namespace oxicuda;

namespace {

const std::string kLibraryPtx = std::string(kFakePtx) +
                                ".visible .global .align 4 .b8 table[64];\n"
                                ".visible .global .align 4 .b8 odd[6];\n"
                                ".visible .global .attribute(.managed) .align 4 .u32 hits;\n"
                                ".visible .entry _ZN2ns5scaleEPfi(.param .u64 p, .param .u32 n)\n{ ret; }\n";

// A file of `text` under TMPDIR, removed with the object.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text) {
    const char* tmp = std::getenv("TMPDIR");
    path = std::string(tmp ? tmp : "/tmp") + "/oxicuda-library-XXXXXX";
    const int fd = ::mkstemp(path.data());
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    ::close(fd);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() { std::remove(path.c_str()); }
};

}  // namespace

TEST_CASE_FIXTURE(FakeTest, "issue 25 (2): a library loads without a context, lists its kernels, and unloads once") {
  CHECK(libraries_available());
  {
    const KernelLibrary lib = KernelLibrary::from_ptx(kLibraryPtx, {.wall_time = true});
    CHECK(lib);
    CHECK(lib.raw() != nullptr);
    CHECK(lib.info_log().find("entry function(s)") != std::string_view::npos);
    CHECK(lib.jit_wall_time_ms() == 1.5f);
    CHECK(Context::current().raw() == nullptr);  // no context was needed, nor made current
    const std::vector<KernelName> names = lib.kernel_names();
    REQUIRE(names.size() == 8);
    CHECK(names[0].symbol == "dbl");
    CHECK(names[7].symbol == "_ZN2ns5scaleEPfi");
    CHECK(names[7].demangled == "ns::scale(float*, int)");
    const KernelLibrary copy = lib;  // copies share it
    CHECK(copy == lib);
    CHECK(lib.use_count() == 2);
    CHECK(fake.live("library") == at_start.library + 1);
  }
  CHECK(fake.live("library") == at_start.library);
  CHECK(fake.calls("cuLibraryLoadData") == 1);
  CHECK(fake.calls("cuLibraryUnload") == 1);
  CHECK(fake.calls("cuLibraryEnumerateKernels") == 1);
  CHECK(fake.calls("cuKernelGetName") == 8);
}

TEST_CASE_FIXTURE(FakeTest, "issue 25 (2): from_image and from_file; empty, unknown and preserved images") {
  const KernelLibrary a = KernelLibrary::from_image(kLibraryPtx.data(), kLibraryPtx.size());
  CHECK(a.function("dbl"));
  {
    const TempFile file(kLibraryPtx);
    const KernelLibrary b = KernelLibrary::from_file(file.path);
    CHECK(b.function("saxpy"));
    CHECK(fake.calls("cuLibraryLoadFromFile") == 1);
    CHECK(error_of([&] { (void)KernelLibrary::from_file(file.path, {}, {.binary_is_preserved = true}); })
              .detail()
              .find("the driver refuses it for a file") != std::string::npos);
  }
  CHECK(error_of([] { (void)KernelLibrary::from_file("/nonexistent/oxicuda/lib.fatbin"); }).code() ==
        ffi::CUDA_ERROR_FILE_NOT_FOUND);
  {
    const TempFile empty("");
    CHECK(error_of([&] { (void)KernelLibrary::from_file(empty.path); }).detail().find("is empty") !=
          std::string::npos);
  }
  CHECK(error_of([] { (void)KernelLibrary::from_image(nullptr, 0); }).detail().find("the image is empty") != std::string::npos);
  CHECK(error_of([] { (void)KernelLibrary::from_ptx(" \n"); }).detail().find("the PTX source is empty") !=
        std::string::npos);
  const unsigned char junk[] = {1, 2, 3, 4, 5};
  CHECK(error_of([&] { (void)KernelLibrary::from_image(junk, sizeof junk); }).detail().find("unknown format") !=
        std::string::npos);
  CHECK(error_of([] { (void)KernelLibrary::from_ptx(kFakePtx, {}, {.binary_is_preserved = true}); })
            .detail()
            .find("PTX text is copied") != std::string::npos);
  // A binary image may be preserved: the driver is told so (the fake loads a cubin with no kernels).
  std::vector<unsigned char> elf(64, 0);
  std::memcpy(elf.data(), "\x7f" "ELF", 4);
  elf[4] = 2;
  const KernelLibrary c = KernelLibrary::from_image(elf.data(), elf.size(), {}, {.binary_is_preserved = true});
  CHECK(c.kernel_names().empty());
  // The JIT's error log comes with a failed load.
  const Error bad = error_of([] { (void)KernelLibrary::from_ptx(".version 8.0\nfrob\n"); });
  CHECK(bad.code() == ffi::CUDA_ERROR_INVALID_PTX);
  CHECK(bad.detail().find("Not a name of any known instruction: 'frob'") != std::string::npos);
  CHECK(fake.live("library") == at_start.library + 2);
}

TEST_CASE_FIXTURE(FakeTest, "issue 25 (2): typed kernels are checked against cuKernelGetParamInfo; names as Module's") {
  const KernelLibrary lib = KernelLibrary::from_ptx(kLibraryPtx);
  const auto k = lib.kernel<void(float*, unsigned)>("dbl");
  CHECK(k);
  CHECK(k.name() == "dbl");
  CHECK(k.function().library() == lib);
  CHECK(k.function().library_kernel() != nullptr);
  CHECK(reinterpret_cast<void*>(k.raw()) == reinterpret_cast<void*>(k.function().library_kernel()));
  CHECK_FALSE(k.function().context());
  CHECK_FALSE(k.function().module());
  CHECK(fake.calls("cuKernelGetParamInfo") == 3);  // two parameters, then the end
  CHECK(fake.calls("cuFuncGetParamInfo") == 0);
  // The driver answers cuKernelGetParamInfo only with a context current (as
  // the fake does): with none current, the lookup asked in device 0's
  // primary context, and none is current again after it.
  CHECK(fake.calls("cuDevicePrimaryCtxRetain") >= 1);
  CUcontext after = reinterpret_cast<CUcontext>(1);
  REQUIRE(detail::api().CtxGetCurrent(&after) == ffi::CUDA_SUCCESS);
  CHECK(after == nullptr);
  const Error wrong = error_of([&] { (void)lib.kernel<void(float*)>("dbl"); });
  CHECK(wrong.code() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(wrong.call() == "oxicuda::KernelLibrary::kernel");
  CHECK(wrong.detail().find("but the library's kernel takes 2 parameters (8 bytes at 0, 4 bytes at 8)") !=
        std::string::npos);
  const Error unknown = error_of([&] { (void)lib.function("dbll"); });
  CHECK(unknown.code() == ffi::CUDA_ERROR_NOT_FOUND);
  CHECK(unknown.detail().find("the library has no kernel named 'dbll'") != std::string::npos);
  CHECK(unknown.detail().find("ns::scale(float*, int) [_ZN2ns5scaleEPfi]") != std::string::npos);
  // A C++ name, through the driver's list of the library's kernels.
  const auto scale = lib.kernel<void(float*, int)>("ns::scale");
  CHECK(scale.name() == "_ZN2ns5scaleEPfi");
  CHECK(error_of([&] { (void)lib.function(std::string_view("d\0bl", 4)); }).detail().find("NUL byte") !=
        std::string::npos);
  // Empty and moved-from libraries are Errors, not crashes.
  KernelLibrary moved = lib;
  const KernelLibrary taken = std::move(moved);
  CHECK(taken == lib);
  CHECK(error_of([&] { (void)moved.function("dbl"); }).code() == ffi::CUDA_ERROR_INVALID_HANDLE);  // NOLINT(bugprone-use-after-move)
  CHECK(error_of([] { (void)KernelLibrary().kernel_names(); }).code() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([] { (void)KernelLibrary().managed<int>("hits"); }).code() == ffi::CUDA_ERROR_INVALID_HANDLE);
}

TEST_CASE_FIXTURE(FakeTest, "issue 25 (2): a library kernel launches in the stream's context, in two contexts") {
  const Context ctx = Context::primary(Device::get(0));
  const Context other = Context::create(Device::get(0));
  const KernelLibrary lib = KernelLibrary::from_ptx(kLibraryPtx);
  const auto k = lib.kernel<void(float*, unsigned)>("dbl");
  const Function in_ctx = k.function().for_context(ctx);
  const Function in_other = k.function().for_context(other);
  CHECK(in_ctx.context() == ctx);
  CHECK(in_other.context() == other);
  CHECK(in_ctx.raw() != in_other.raw());
  CHECK(in_ctx.library() == lib);
  CHECK(in_ctx.library_kernel() == k.function().library_kernel());
  CHECK(in_ctx.for_context(ctx).raw() == in_ctx.raw());  // the same function again
  CHECK(fake.calls("cuKernelGetFunction") == 3);
  for (const Context* c : {&ctx, &other}) {
    Stream s(*c);
    const std::vector<float> host{1, 2, 3, 4};
    DeviceBuffer<float> buf(*c, host.size());
    copy(buf, host);
    launch(s, k, {.grid = 1, .block = 4}, buf, 4);
    s.synchronize();
    std::vector<float> back(4);
    copy(back, buf);
    CHECK(back == std::vector<float>{2, 4, 6, 8});
    FakeLaunch last{};
    fake.last_launch(&last);
    // The driver ran the kernel's function in the stream's context.
    CHECK(last.function == (c == &ctx ? in_ctx : in_other).raw());
    // The untyped launch, and a launch with dynamic shared memory over the
    // default limit, which raises the limit of the function in that context.
    launch(s, k.function(), Dim3{1}, Dim3{4}, 0u, buf.data(), 4u);
    launch(s, k, {.grid = 1, .block = 4, .shared_bytes = 64 * 1024}, buf, 4);
    s.synchronize();
    copy(back, buf);
    CHECK(back == std::vector<float>{8, 16, 24, 32});
    CHECK((c == &ctx ? in_ctx : in_other).allowed_dynamic_shared_bytes() == 64 * 1024);
  }
  // The typed kernel in one context, as Kernel::for_context gives it.
  const auto k_other = k.for_context(other);
  CHECK(k_other.raw() == in_other.raw());
  // A module's function has no function in another context.
  const Module m = Module::from_ptx(ctx, kFakePtx);
  CHECK(m.function("dbl").for_context(ctx) == m.function("dbl"));
  CHECK(error_of([&] { (void)m.function("dbl").for_context(other); }).code() == ffi::CUDA_ERROR_INVALID_CONTEXT);
  CHECK(error_of([&] { (void)Function().for_context(ctx); }).code() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(Context::current().raw() == nullptr);
}

TEST_CASE_FIXTURE(StreamTest, "issue 25 (2): a library kernel as a graph's kernel node, in the graph's context") {
  const KernelLibrary lib = KernelLibrary::from_ptx(kLibraryPtx);
  const auto k = lib.kernel<void(float*, unsigned)>("dbl");
  const std::vector<float> host{1, 2, 3};
  DeviceBuffer<float> buf(ctx, 3);
  copy(buf, host);
  {
    Graph g(ctx);
    (void)g.add_kernel({}, k, {.grid = 1, .block = 3}, buf, 3);
    (void)g.add_kernel({}, k.function(), {.grid = 1, .block = 3}, buf.data(), 3u);
    GraphExec e(g);
    e.launch(s);
    s.synchronize();
  }
  std::vector<float> back(3);
  copy(back, buf);
  CHECK(back == std::vector<float>{4, 8, 12});
  CHECK(fake.calls("cuGraphAddKernelNode") == 2);
  // The node holds the library: it outlives the handles used to add it.
  Graph g(ctx);
  {
    const KernelLibrary scoped = KernelLibrary::from_ptx(kLibraryPtx);
    (void)g.add_kernel({}, scoped.kernel<void(float*, unsigned)>("dbl"), {.grid = 1, .block = 3}, buf, 3);
  }
  CHECK(fake.live("library") == at_start.library + 2);
  GraphExec e(g);
  e.launch(s);
  s.synchronize();
  copy(back, buf);
  CHECK(back == std::vector<float>{8, 16, 24});
  // An instantiated graph's kernel node takes a library kernel's new arguments (set_kernel).
  Graph g2(ctx);
  const GraphNode node = g2.add_kernel({}, k, {.grid = 1, .block = 3}, buf, 3);
  GraphExec e2(g2);
  DeviceBuffer<float> other(ctx, 3);
  copy(other, host);
  e2.set_kernel(node, k, {.grid = 1, .block = 3}, other, 3);
  e2.launch(s);
  s.synchronize();
  copy(back, other);
  CHECK(back == std::vector<float>{2, 4, 6});
  copy(back, buf);
  CHECK(back == std::vector<float>{8, 16, 24});  // the node no longer reads it
}

TEST_CASE_FIXTURE(ContextTest, "issue 25 (2): occupancy and attributes of a library kernel use the current context") {
  const KernelLibrary lib = KernelLibrary::from_ptx(kLibraryPtx);
  const Function f = lib.function("dbl");
  const Error none = error_of([&] { (void)f.max_active_blocks_per_multiprocessor(128); });
  CHECK(none.code() == ffi::CUDA_ERROR_INVALID_CONTEXT);
  CHECK(none.detail().find("none is current") != std::string::npos);
  CHECK(error_of([&] { (void)f.num_registers(); }).code() == ffi::CUDA_ERROR_INVALID_CONTEXT);
  {
    const ScopedCurrent current(ctx);
    CHECK(f.max_active_blocks_per_multiprocessor(128) == 16);
    CHECK(f.suggested_block_size().block_size > 0);
    CHECK(f.num_registers() == 16);
    f.set_shared_memory_carveout(50);
    f.allow_dynamic_shared_bytes(100 * 1024);
    CHECK(f.for_context(ctx).allowed_dynamic_shared_bytes() == 100 * 1024);
    f.set_cache_config(CacheConfig::prefer_shared);
  }
  // Its function in a context answers with that context current or not.
  CHECK(f.for_context(ctx).max_active_blocks_per_multiprocessor(256) == 8);
  CHECK(Context::current().raw() == nullptr);
}

TEST_CASE_FIXTURE(FakeTest, "issue 25 (2): globals per context, managed variables for every device") {
  const Context ctx = Context::primary(Device::get(0));
  const Context other = Context::create(Device::get(0));
  const KernelLibrary lib = KernelLibrary::from_ptx(kLibraryPtx);
  const DeviceSpan<float> table = lib.global<float>(ctx, "table");
  CHECK(table.size() == 16);
  CHECK(table.context() == ctx.raw());
  const DeviceSpan<float> table2 = lib.global<float>(other, "table");
  CHECK(table2.context() == other.raw());
  CHECK(table2.device_ptr() != table.device_ptr());  // each context has its own
  std::vector<float> in(16, 2.5f), out(16);
  copy(table, in);
  copy(out, table);
  CHECK(out == in);
  const DeviceSpan<unsigned> hits = lib.managed<unsigned>("hits");
  CHECK(hits.size() == 1);
  CHECK(hits.context() == nullptr);
  CHECK(error_of([&] { (void)lib.global<float>(ctx, "tabel"); })
            .detail()
            .find("the library has no __device__ or __constant__ variable named 'tabel'") != std::string::npos);
  CHECK(error_of([&] { (void)lib.managed<unsigned>("table"); })
            .detail()
            .find("the library has no __managed__ variable named 'table'") != std::string::npos);
  CHECK(error_of([&] { (void)lib.global<float>(ctx, "odd"); }).detail().find("not a whole number of 4-byte") !=
        std::string::npos);
  CHECK(error_of([&] { (void)lib.global<float>(Context(), "table"); }).code() == ffi::CUDA_ERROR_INVALID_HANDLE);
  // The library's module in a context, owned by the library.
  const CUmodule raw = lib.raw_module(ctx);
  CHECK(raw != nullptr);
  CHECK(raw == lib.raw_module(ctx));
  CHECK(detail::api().ModuleUnload(raw) == ffi::CUDA_ERROR_INVALID_HANDLE);  // not the caller's to unload
  CHECK(fake.invalid_destroys() == 1);
  fake.reset();  // (forgets that refused unload, for the balance check)
  CHECK(Context::current().raw() == nullptr);
}

TEST_CASE_FIXTURE(ContextTest, "issue 25 (2): library_from_source shares module_from_source's cache entry") {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir =
      std::string(tmp ? tmp : "/tmp") + "/oxicuda-library-cache-" + std::to_string(::getpid());
  REQUIRE(std::system(("rm -rf '" + dir + "'").c_str()) == 0);
  ::setenv("OXICUDA_CACHE_DIR", dir.c_str(), 1);
  ::setenv("OXICUDA_CACHE", "1", 1);
  const std::string source = std::string(kFakePtx) +
                             ".visible .entry fake_saxpy_float_(.param .u64 y, .param .u64 x, .param .f32 a, "
                             ".param .u32 n)\n{ ret; }\n";
  const SourceOptions options{.compile = {.arch = "compute_75"}, .name_expressions = {"saxpy<float>"}};
  const KernelCacheStats s0 = kernel_cache_stats();
  const KernelLibrary a = library_from_source(ctx, source, options);
  CHECK(kernel_cache_stats().misses == s0.misses + 1);
  const KernelLibrary b = library_from_source(ctx, source, options);
  CHECK(kernel_cache_stats().hits == s0.hits + 1);
  const Module m = module_from_source(ctx, source, options);
  CHECK(kernel_cache_stats().hits == s0.hits + 2);  // the same entry, loaded as a module
  CHECK(kernel_cache_stats().misses == s0.misses + 1);
  ::setenv("OXICUDA_CACHE", "0", 1);
  ::unsetenv("OXICUDA_CACHE_DIR");
  REQUIRE(std::system(("rm -rf '" + dir + "'").c_str()) == 0);
  // The name expression stands for its lowered name in both.
  for (const KernelLibrary* lib : {&a, &b}) {
    const auto k = lib->kernel<void(float*, const float*, float, unsigned)>("saxpy<float>");
    CHECK(k.name() == "fake_saxpy_float_");
  }
  CHECK(m.function("saxpy<float>").name() == "fake_saxpy_float_");
  // compile_image's image, loaded as a library.
  const SourceImage image = compile_image(source, options);
  const KernelLibrary c = library_from_image(image);
  CHECK(c.function("saxpy<float>").name() == "fake_saxpy_float_");
  CHECK(error_of([] { (void)library_from_source(Context(), "x"); }).code() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(fake.calls("cuLibraryLoadData") == 3);
}
