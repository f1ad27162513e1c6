// The loader's failure modes. The driver is loaded once per process, so each
// case runs in a process of its own: tests/meson.build runs this program once
// per case, with --test-case=<name> and the environment that case needs.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "fake_driver.hpp"

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

using namespace oxicuda;

namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The Error the first driver call raises.
Error first_error() {
  return error_of([] { (void)Device::count(); });
}
}  // namespace

TEST_CASE("loader: no library") {
  const DriverInfo& info = driver_info();
  CHECK(info.status == DriverStatus::no_library);
  CHECK_FALSE(info.available());
  CHECK(info.library.empty());
  const std::string path = env("OXICUDA_LIBCUDA_PATH");
  CHECK(info.reason == "OXICUDA_LIBCUDA_PATH names a driver library that cannot be opened: " + path + " (" + path +
                           ": cannot open shared object file: No such file or directory). Point it at the "
                           "driver's libcuda.so.1 or unset it.");
  const Error e = first_error();
  CHECK(e.result() == ffi::CUDA_ERROR_NOT_INITIALIZED);
  CHECK(e.call() == "cuDeviceGetCount");
  CHECK(e.detail() == info.reason);
  // Every later call reports the same, without trying again.
  CHECK_THROWS_WITH_AS((void)Context::primary(Device::from_raw(0)), doctest::Contains(info.reason.c_str()), Error);
  CHECK(std::string(e.what()).find("cuDeviceGetCount failed: CUDA_ERROR_NOT_INITIALIZED (3)") == 0);
}

TEST_CASE("loader: not a driver") {
  const DriverInfo& info = driver_info();
  CHECK(info.status == DriverStatus::not_a_driver);
  CHECK(info.reason == env("OXICUDA_LIBCUDA_PATH") + " was opened but exports no cuInit: it is not a CUDA driver library.");
  const Error e = first_error();
  CHECK(e.result() == ffi::CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
  CHECK(e.detail() == info.reason);
}

TEST_CASE("loader: stub library") {
  const DriverInfo& info = driver_info();
  CHECK(info.status == DriverStatus::stub_library);
  CHECK(info.init_result == ffi::CUDA_ERROR_STUB_LIBRARY);
  CHECK(info.reason.find("is the CUDA toolkit's stub library") != std::string::npos);
  CHECK(info.reason.find("LD_LIBRARY_PATH") != std::string::npos);
  const Error e = first_error();
  CHECK(e.result() == ffi::CUDA_ERROR_STUB_LIBRARY);
  CHECK(e.name() == "CUDA_ERROR_STUB_LIBRARY");
  // The stub answers cuGetErrorString with 34 too: the header's own text is used.
  CHECK(e.description() == "the CUDA driver that the application has loaded is a stub library");
}

TEST_CASE("loader: cuInit fails") {
  const DriverInfo& info = driver_info();
  CHECK(info.status == DriverStatus::init_failed);
  CHECK(info.init_result == ffi::CUDA_ERROR_NO_DEVICE);
  CHECK(info.version == 13000);
  CHECK_FALSE(info.via_get_proc_address);  // the table was dropped: every entry point is a stand-in
  CHECK(info.reason == "cuInit(0) failed with CUDA_ERROR_NO_DEVICE (100): no CUDA-capable devices were detected by the "
                       "installed CUDA driver (driver library " + env("OXICUDA_LIBCUDA_PATH") + ").");
  const Error e = first_error();
  CHECK(e.result() == ffi::CUDA_ERROR_NO_DEVICE);
  CHECK(e.detail() == info.reason);
}

TEST_CASE("loader: resolved through cuGetProcAddress_v2") {
  const DriverInfo& info = driver_info();
  REQUIRE(info.available());
  CHECK(info.via_get_proc_address);
  CHECK(info.library == env("OXICUDA_LIBCUDA_PATH"));
  Fake& fake = Fake::get();
  // One cuGetProcAddress_v2 per table entry but itself; nothing else resolved twice.
  CHECK(fake.calls("cuGetProcAddress") == static_cast<long>(ffi::entry_count) - 1);
  CHECK(fake.calls("cuInit") == 1);
  CHECK(Device::count() == 1);
}

TEST_CASE("loader: no cuGetProcAddress_v2") {
  const DriverInfo& info = driver_info();
  REQUIRE(info.available());
  CHECK_FALSE(info.via_get_proc_address);  // everything came from dlsym of the versioned names
  Context ctx = Context::primary(Device::get(0));
  Stream s(ctx);
  s.synchronize();
  CHECK(Fake::get().calls("cuStreamCreate") == 1);
}

TEST_CASE("loader: missing entry point") {
  const DriverInfo& info = driver_info();
  REQUIRE(info.available());
  Context ctx = Context::primary(Device::get(0));
  Stream s(ctx);
  try {
    s.launch_host_func([] {});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.result() == ffi::CUDA_ERROR_NOT_FOUND);
    CHECK(e.call() == "cuLaunchHostFunc");
    CHECK(e.detail() == "the loaded driver (" + info.library +
                            ", CUDA 13.0) does not provide cuLaunchHostFunc (symbol cuLaunchHostFunc, pinned "
                            "version 10000); this call needs a newer driver");
  }
  // Everything else still works; typed kernels skip the layout check
  // (this driver has no cuFuncGetParamInfo either), silently.
  Module m = Module::from_ptx(ctx, kFakePtx);
  CHECK_NOTHROW((void)m.kernel<void(double, double, double)>("dbl"));
  // Without cuModuleEnumerateFunctions, no kernel is found by its C++ name, and the Error says why.
  const Error unknown = error_of([&] { (void)m.function("saxpy<float>"); });
  CHECK(unknown.result() == ffi::CUDA_ERROR_NOT_FOUND);
  CHECK(unknown.detail().find("this driver lacks cuModuleEnumerateFunctions (CUDA 12.4)") != std::string::npos);
  Event e(ctx);
  s.record(e);
  s.synchronize();
  CHECK(e.ready());
}

// A driver without the batched calls of CUDA 13.0 (the fake without its
// optional entry points): copy_batch and prefetch_batch loop over single
// calls, and say so; a discard, which has no single call, is an Error
// naming the driver it needs.
// A driver without libraries (CUDA 12.0; the fake without its optional
// entry points): libraries_available() says so, and loading one is an
// Error naming the entry point the driver lacks, before anything else.
TEST_CASE("loader: libraries missing") {
  Fake& fake = Fake::get();
  fake.reset();
  CHECK_FALSE(libraries_available());
  const Error e = error_of([] { (void)KernelLibrary::from_ptx(kFakePtx); });
  CHECK(e.result() == ffi::CUDA_ERROR_NOT_FOUND);
  CHECK(std::string(e.what()).find("cuLibraryLoadData") != std::string::npos);
  CHECK(fake.calls("cuLibraryLoadData") == 0);
  // Modules are there as before.
  Context ctx = Context::primary(Device::get(0));
  CHECK(Module::from_ptx(ctx, kFakePtx).function("dbl"));
}

TEST_CASE("loader: batched calls missing") {
  Fake& fake = Fake::get();
  fake.reset();
  CHECK_FALSE(batched_copies_available());
  CHECK_FALSE(batched_managed_available());
  Context ctx = Context::primary(Device::get(0));
  Stream s(ctx);
  std::vector<int> a{1, 2, 3}, back(3), none;
  DeviceBuffer<int> d(ctx, 3), e(ctx, 3), empty(ctx, 0);
  copy_batch(s, {{d, a}, {e, d}, {empty, none}});
  copy_batch(s, {{back, e}});
  s.synchronize();
  CHECK(back == a);
  CHECK(fake.calls("cuMemcpyHtoDAsync") == 1);
  CHECK(fake.calls("cuMemcpyDtoDAsync") == 1);
  CHECK(fake.calls("cuMemcpyDtoHAsync") == 1);
  CHECK(fake.calls("cuMemcpyBatchAsync") == 0);
  // A copy that reads its source during the call only: the loop waits for the stream.
  const long syncs = fake.calls("cuStreamSynchronize");
  copy_batch(s, {{e, a, {.source_access = SourceAccess::during_call}}});
  CHECK(fake.calls("cuStreamSynchronize") == syncs + 1);
  // A copy over two VMM mappings, with no context current: refused whole
  // (the fake, as driver 580), it goes a mapping at a time, as copy() does.
  const std::size_t per_chunk = allocation_granularity(Device::get(0)) / sizeof(int);
  GrowableBuffer<int> grown(ctx, 2 * per_chunk, 1);
  grown.resize(2 * per_chunk);
  std::vector<int> big(grown.size()), big_back(grown.size());
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<int>(i * 3);
  copy_batch(s, {{grown, big}});
  copy_batch(s, {{big_back, grown}});
  s.synchronize();
  CHECK(big_back == big);
  CHECK(fake.calls("cuMemcpyHtoDAsync") == 2 + 1 + 2);
  CHECK(fake.calls("cuMemcpyDtoHAsync") == 1 + 1 + 2);
  // A piece refused is the Error naming its copy (the third call: copy 0,
  // copy 1 whole, copy 1's first piece).
  fake.fail("cuMemcpyDtoHAsync", 3, ffi::CUDA_ERROR_OUT_OF_MEMORY);
  const Error piece = error_of([&] { copy_batch(s, {{back, e}, {big_back, grown}}); });
  CHECK(piece.result() == ffi::CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(piece.detail() == "copy 1 of the batch");
  // Bad input is refused the same way, before any call.
  std::vector<int> four(4);
  const long calls = fake.calls("*") - fake.calls("cuGetErrorString");  // (an Error's description)
  CHECK(error_of([&] { copy_batch(s, {{d, a}, {d, four}}); }).detail().find("copy 1 of the batch: size mismatch") == 0);
  CHECK(fake.calls("*") - fake.calls("cuGetErrorString") == calls);

  ManagedBuffer<int> m(ctx, 8);
  prefetch_batch(s, {{m.subspan(0, 4), MemoryLocation::device(Device::get(0))},
                     {m.subspan(4), MemoryLocation::host()}});
  CHECK(fake.calls("cuMemPrefetchAsync") == 2);
  discard_and_prefetch_batch(s, {{m, MemoryLocation::host()}});
  CHECK(fake.calls("cuMemPrefetchAsync") == 3);
  const Error no = error_of([&] { discard_batch(s, {m}); });
  CHECK(no.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  CHECK(no.detail() == "this driver has no cuMemDiscardBatchAsync (the loaded driver is CUDA 13.0); a discard needs "
                       "cuMemDiscardBatchAsync, a driver of CUDA 13.0 or newer, and no single call before it discards");
  // An empty discard is still nothing to do.
  discard_batch(s, std::span<const ManagedRange>{});
}

// A driver older than CUDA 12.4 (the fake without its optional entry
// points): no green contexts; each call that needs one is an Error naming
// the missing entry point, and everything else runs.
TEST_CASE("loader: green contexts missing") {
  CHECK_FALSE(green_contexts_available());
  const Error no = error_of([] { (void)SmResource::of(Device::get(0)); });
  CHECK(no.result() == ffi::CUDA_ERROR_NOT_FOUND);
  CHECK(no.call() == "cuDeviceGetDevResource");
  CHECK(no.detail().find("does not provide cuDeviceGetDevResource") != std::string::npos);
  Context ctx = Context::primary(Device::get(0));
  Stream s(ctx);
  CHECK(error_of([&] { (void)green_context_of(s); }).call() == "cuStreamGetGreenCtx");
  s.synchronize();
}

// A driver without the checkpoint calls of CUDA 12.8 (the same fake): each
// is an Error naming the call and the driver it needs; external memory
// (CUDA 10.0) is there.
TEST_CASE("loader: checkpoint calls missing") {
  Fake& fake = Fake::get();
  fake.reset();
  CHECK_FALSE(checkpointing_available());
  CHECK(external_memory_available());
  const int pid = static_cast<int>(::getpid());
  const Error e = error_of([&] { (void)process_state(pid); });
  CHECK(e.result() == ffi::CUDA_ERROR_NOT_FOUND);
  CHECK(e.call() == "cuCheckpointProcessGetState");
  CHECK(e.detail().find("does not provide cuCheckpointProcessGetState") != std::string::npos);
  CHECK(e.detail().find("this call needs a newer driver") != std::string::npos);
  CHECK(error_of([&] { lock_process(pid); }).call() == "cuCheckpointProcessLock");
  CHECK(error_of([&] { checkpoint_process(pid); }).call() == "cuCheckpointProcessCheckpoint");
  CHECK(error_of([&] { restore_process(pid); }).call() == "cuCheckpointProcessRestore");
  CHECK(error_of([&] { unlock_process(pid); }).call() == "cuCheckpointProcessUnlock");
  CHECK(error_of([&] { (void)restore_thread_id(pid); }).call() == "cuCheckpointProcessGetRestoreThreadId");
  CHECK(fake.calls("*") - fake.calls("cuGetErrorString") == 0);  // (none reached the driver)
}

TEST_CASE("loader: concurrent first use") {
  // 16 threads race to be first; the driver is opened and initialized once.
  std::atomic<bool> go{false};
  std::atomic<int> available{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i)
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      available += driver_info().available();
      (void)Device::count();
    });
  go = true;
  for (auto& t : threads) t.join();
  CHECK(available == 16);
  CHECK(Fake::get().calls("cuInit") == 1);
  CHECK(Fake::get().calls("cuDriverGetVersion") == 1);
  CHECK(Fake::get().calls("cuDeviceGetCount") == 16);
}

TEST_CASE("loader: concurrent first use with one call failing") {
  // 32 threads race to be first while the first cuDeviceGetCount fails
  // (FAKE_CUDA_FAIL=cuDeviceGetCount:1:2): exactly one thread gets that
  // error; the driver is loaded once and every other call succeeds.
  std::atomic<bool> go{false};
  std::atomic<int> ok{0}, out_of_memory{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 32; ++i)
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      try {
        (void)Device::count();
        ++ok;
      } catch (const Error& e) {
        ++(e.result() == ffi::CUDA_ERROR_OUT_OF_MEMORY && e.call() == "cuDeviceGetCount" ? out_of_memory : other);
      }
    });
  go = true;
  for (auto& t : threads) t.join();
  CHECK(ok == 31);
  CHECK(out_of_memory == 1);
  CHECK(other == 0);
  CHECK(Fake::get().calls("cuInit") == 1);
  CHECK(Fake::get().calls("cuDeviceGetCount") == 32);
}

// Run by the fault-injection test with FAKE_CUDA_FAIL=cuInit:1:999.
TEST_CASE("loader: injected failure of cuInit") {
  const DriverInfo& info = driver_info();
  CHECK(info.status == DriverStatus::init_failed);
  CHECK(info.init_result == ffi::CUDA_ERROR_UNKNOWN);
  const Error e = first_error();
  CHECK(e.result() == ffi::CUDA_ERROR_UNKNOWN);
  CHECK(e.detail().find("cuInit(0) failed with CUDA_ERROR_UNKNOWN (999)") == 0);
}

// Run by the fault-injection test with FAKE_CUDA_FAIL=cuGetProcAddress:1:999:
// the entry point whose lookup failed comes from dlsym instead; all work.
TEST_CASE("loader: injected failure of cuGetProcAddress") {
  const DriverInfo& info = driver_info();
  REQUIRE(info.available());
  CHECK(info.via_get_proc_address);
  CHECK(Fake::get().calls("cuGetProcAddress") == static_cast<long>(ffi::entry_count) - 1);
  Context ctx = Context::primary(Device::get(0));
  Stream s(ctx);
  Event e(ctx);
  s.record(e);
  CHECK(e.ready());
  CHECK(driver_version() == 13000);
}

// No OXICUDA_LIBCUDA_PATH and no driver installed: the default candidates
// are tried and listed. Skipped (exit 77) on a machine that has a driver.
TEST_CASE("loader: no library at all") {
  if (void* real = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(real);
    std::puts("SKIP: this machine has a CUDA driver installed");
    std::exit(77);
  }
  const DriverInfo& info = driver_info();
  CHECK(info.status == DriverStatus::no_library);
  CHECK(info.reason.find("no CUDA driver library could be opened (tried libcuda.so.1 (") == 0);
  CHECK(info.reason.find("); libcuda.so (") != std::string::npos);
  CHECK(info.reason.find("Install the NVIDIA driver, or set OXICUDA_LIBCUDA_PATH") != std::string::npos);
}

// --- NVRTC's search order (nvJitLink's is the same mechanism) ----------------------

namespace {
// The Error the first NVRTC call raises.
Error first_nvrtc_error() {
  return error_of([] { (void)nvrtc_version(); });
}

// A directory `dir`/`sub` holding a link named libnvrtc.so.13 to the fake
// NVRTC built with that soname (FAKE_SONAMED_NVRTC).
std::string plant_sonamed(const std::string& sub) {
  const std::string dir = std::string("/tmp/oxicuda-loader-") + std::to_string(::getpid());
  const std::string lib = dir + "/" + sub;
  REQUIRE(std::system(("rm -rf '" + dir + "' && mkdir -p '" + lib + "' && ln -s '" + env("FAKE_SONAMED_NVRTC") +
                       "' '" + lib + "/libnvrtc.so.13'")
                          .c_str()) == 0);
  return dir;
}

// The fake (version 12.4 by FAKE_NVRTC_VERSION) was found by `step`.
void check_found_fake(const char* step) {
  const LibraryInfo& info = nvrtc_info();
  CHECK(info.found);
  CHECK(info.found_by == step);
  CHECK(info.version == 12040);
  CHECK(nvrtc_version() == 12040);
  CHECK(info.reason.empty());
}
}  // namespace

TEST_CASE("loader: nvrtc not found") {
  const LibraryInfo& info = nvrtc_info();
  CHECK_FALSE(info.found);
  const std::string path = env("OXICUDA_LIBNVRTC_PATH");
  CHECK(info.reason == "OXICUDA_LIBNVRTC_PATH names a NVRTC library that cannot be opened: " + path + " (" + path +
                           ": cannot open shared object file: No such file or directory). Point it at NVRTC's "
                           "library or unset it.");
  const Error e = first_nvrtc_error();
  CHECK(e.library() == Library::nvrtc);
  CHECK(e.code() == ffi::OXICUDA_NVRTC_NOT_FOUND);
  CHECK(e.name() == "OXICUDA_NVRTC_NOT_FOUND");
  CHECK(e.call() == "nvrtcVersion");
  CHECK(e.detail() == info.reason);
  // Every later call says the same; the driver is not affected.
  CHECK_THROWS_WITH_AS((void)Program("x").compile(), doctest::Contains(info.reason.c_str()), Error);
  CHECK(Device::count() == 1);
}

TEST_CASE("loader: nvrtc not NVRTC") {
  const LibraryInfo& info = nvrtc_info();
  CHECK_FALSE(info.found);
  CHECK(info.reason.rfind(env("OXICUDA_LIBNVRTC_PATH") + " was opened but exports no nvrtcVersion: it is not NVRTC. "
                                                         "Install the CUDA toolkit's NVRTC",
                          0) == 0);
  CHECK(first_nvrtc_error().detail() == info.reason);
}

TEST_CASE("loader: nvrtc found through OXICUDA_LIBNVRTC_PATH") {
  check_found_fake("OXICUDA_LIBNVRTC_PATH");
  CHECK(nvrtc_info().library == env("OXICUDA_LIBNVRTC_PATH"));
}

TEST_CASE("loader: nvrtc found already loaded") {
  // The program loaded a libnvrtc.so.13 itself before oxicuda looked.
  REQUIRE(dlopen(env("FAKE_SONAMED_NVRTC").c_str(), RTLD_NOW | RTLD_GLOBAL));
  check_found_fake("already loaded");
}

TEST_CASE("loader: nvrtc found through $CONDA_PREFIX") {
  const std::string prefix = plant_sonamed("lib");
  ::setenv("CONDA_PREFIX", prefix.c_str(), 1);
  check_found_fake("$CONDA_PREFIX");
  CHECK(nvrtc_info().library == prefix + "/lib/libnvrtc.so.13");
  std::system(("rm -rf '" + prefix + "'").c_str());
}

TEST_CASE("loader: nvrtc found through the loader's search path") {
  // LD_LIBRARY_PATH (tests/meson.build) holds the fake's directory.
  check_found_fake("the loader's search path");
  CHECK(nvrtc_info().library == "libnvrtc.so.13");
}

TEST_CASE("loader: nvrtc found through $CUDA_HOME") {
  // Only where no libnvrtc is on the loader's search path: that step comes first.
  // (Not closed again: a fake's objects stay reachable for LeakSanitizer.)
  if (dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL)) {
    MESSAGE("a libnvrtc.so.13 is on the loader's search path, which is searched before $CUDA_HOME: skipped");
    std::exit(77);
  }
  const std::string home = plant_sonamed("lib64");
  ::setenv("CUDA_HOME", home.c_str(), 1);
  check_found_fake("$CUDA_HOME");
  std::system(("rm -rf '" + home + "'").c_str());
}

TEST_CASE("loader: nvrtc an old NVRTC lacking an entry point") {
  const LibraryInfo& info = nvrtc_info();
  REQUIRE(info.found);
  Program p(".version 7.0\n");
  CHECK(p.compile({.arch = "sm_90"}).kind == CodeKind::cubin);  // what it has works
  const Error e = error_of([&] { (void)p.compile({.arch = "sm_90", .lto = true}); });
  CHECK(e.code() == ffi::OXICUDA_NVRTC_NOT_FOUND);
  CHECK(e.call() == "nvrtcGetLTOIRSize");
  CHECK(e.detail() == "the loaded library (" + info.library +
                          ", version 13.0) does not provide nvrtcGetLTOIRSize; this call needs a newer one");
}

TEST_CASE("loader: nvjitlink with versioned symbols only (CUDA 12.0 to 12.2)") {
  // That nvJitLink exports __nvJitLinkCreate_12_0 and the like, no plain names.
  REQUIRE(dlsym(dlopen(env("OXICUDA_LIBNVJITLINK_PATH").c_str(), RTLD_NOW | RTLD_LOCAL), "nvJitLinkCreate") == nullptr);
  const LibraryInfo& info = nvjitlink_info();
  CHECK(info.found);
  CHECK(info.reason.empty());
  CHECK(info.version == 0);  // nvJitLinkVersion came with 12.3
  CHECK(error_of([] { (void)nvjitlink_version(); }).code() == ffi::OXICUDA_NVJITLINK_NOT_FOUND);
  const Compiled c = Program("ok").compile({.arch = "sm_90", .lto = true});
  LtoLinker l("sm_90");
  l.add(c, "ok");
  CHECK_FALSE(l.complete().empty());
}

TEST_CASE("loader: nvjitlink not found") {
  const LibraryInfo& info = nvjitlink_info();
  CHECK_FALSE(info.found);
  CHECK(info.reason.find("OXICUDA_LIBNVJITLINK_PATH names a nvJitLink library that cannot be opened") == 0);
  const Error e = error_of([] { LtoLinker l("sm_90"); });
  CHECK(e.library() == Library::nvjitlink);
  CHECK(e.code() == ffi::OXICUDA_NVJITLINK_NOT_FOUND);
  CHECK(e.call() == "nvJitLinkCreate");
  CHECK(e.detail() == info.reason);
  CHECK(nvrtc_info().found);  // NVRTC is another library
}
