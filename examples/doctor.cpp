// oxicuda-doctor: which driver was loaded, which devices it sees, and
// whether the two-stream self-check passes on each; as text, or as JSON
// (--json). Exit statuses: see kUsage.
#include "oxicuda.hpp"
#include "report.hpp"
#include "two_stream_check.hpp"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using oxicuda_examples::Section;

constexpr int kPassed = 0, kFailed = 1, kNoDriver = 2, kUsageError = 64;  // 64: EX_USAGE of sysexits.h

constexpr const char* kUsage = R"(usage: oxicuda-doctor [--json] [--help]

Which CUDA driver oxicuda loads and why (or why none), every device the
driver sees (compute capability, memory, multiprocessors, UUID, PCI bus id)
and the two-stream self-check on each; then whether NVRTC and nvJitLink were
found (which file, or what was tried) and where the kernel cache is and how
full (neither affects the exit status).

  --json  print the report as one JSON object on standard output (null:
          unknown, or not reported by the CUDA driver API)
  --help  print this and exit

Exit status:
  0   a driver was loaded, it sees at least one device, and every device passed
  1   a self-check or a driver call failed (the error is printed)
  2   no usable CUDA driver, or no device (the reason is printed)
  64  a bad command line

OXICUDA_LIBCUDA_PATH names the driver library to load instead of libcuda.so.1;
OXICUDA_LIBNVRTC_PATH and OXICUDA_LIBNVJITLINK_PATH name NVRTC and nvJitLink;
OXICUDA_CACHE_DIR the kernel cache (OXICUDA_CACHE=0 turns it off).
)";

const char* status_name(oxicuda::DriverStatus s) {
  switch (s) {
    case oxicuda::DriverStatus::ok: return "ok";
    case oxicuda::DriverStatus::no_library: return "no_library";
    case oxicuda::DriverStatus::not_a_driver: return "not_a_driver";
    case oxicuda::DriverStatus::stub_library: return "stub_library";
    case oxicuda::DriverStatus::init_failed: return "init_failed";
  }
  return "unknown";
}

Section driver_section(const oxicuda::DriverInfo& info) {
  Section s;
  const std::string version = std::to_string(info.version / 1000) + "." + std::to_string(info.version % 1000 / 10);
  const char* via = info.via_get_proc_address ? "cuGetProcAddress_v2" : "dlsym";
  if (info.available())
    s.title = "driver: " + info.library + " (CUDA " + version + "), entry points from " + via;
  else
    s.title = "no usable CUDA driver: " + info.reason;
  s.add("available", {}, info.available());
  s.add("status", {}, status_name(info.status));
  s.add("library", {}, info.library.empty() ? oxicuda_examples::Scalar{} : info.library);
  s.add("cuda_version", {}, info.version ? oxicuda_examples::Scalar{version} : nullptr);
  s.add("entry_points_from", {}, info.available() ? oxicuda_examples::Scalar{via} : nullptr);
  s.add("reason", {}, info.available() ? oxicuda_examples::Scalar{} : info.reason);
  // Which path copy_batch and the managed batches take on this driver.
  if (info.available()) {
    const bool copies = oxicuda::batched_copies_available(), managed = oxicuda::batched_managed_available();
    s.add("batched_copies", "batched copies", copies ? "batched" : "single_copies",
          copies ? "one cuMemcpyBatchAsync per copy_batch"
                 : "copy_batch loops over single copies (this driver lacks cuMemcpyBatchAsync, CUDA 13.0)");
    s.add("batched_managed", "managed batches", managed ? "batched" : "single_prefetches",
          managed ? "cuMemPrefetchBatchAsync, cuMemDiscardBatchAsync, cuMemDiscardAndPrefetchBatchAsync"
                  : "prefetch_batch loops over cuMemPrefetchAsync; discard_batch is an Error (this driver lacks "
                    "the CUDA 13.0 batched calls)");
    const bool libraries = oxicuda::libraries_available();
    s.add("libraries", "libraries", libraries ? "available" : "unavailable",
          libraries ? "cuLibraryLoadData (a KernelLibrary is loaded once for every context)"
                    : "none (this driver lacks cuLibraryLoadData, CUDA 12.0): KernelLibrary is an Error; use Module");
    // Whether green contexts (SmResource, GreenContext) can be made here.
    const bool green = oxicuda::green_contexts_available();
    s.add("green_contexts", "green contexts", green ? "available" : "unavailable",
          green ? "SmResource::split and GreenContext (cuGreenCtxCreate, cuGreenCtxStreamCreate)"
                : "unavailable: this driver lacks cuGreenCtxCreate (CUDA 12.4) or cuGreenCtxStreamCreate (12.5)");
    // External memory and checkpointing: whether this driver has the calls.
    const bool external = oxicuda::external_memory_available(), checkpoint = oxicuda::checkpointing_available();
    s.add("external_memory", "external memory", external ? "available" : "unavailable",
          external ? "cuImportExternalMemory, cuImportExternalSemaphore (Vulkan, Direct3D, NvSci interop)"
                   : "this driver lacks cuImportExternalMemory (CUDA 10.0)");
    s.add("checkpointing", "checkpointing", checkpoint ? "available" : "unavailable",
          checkpoint ? "cuCheckpointProcess* (lock, checkpoint, restore, unlock a process)"
                     : "this driver lacks cuCheckpointProcess* (CUDA 12.8)");
  } else {
    s.add("batched_copies", {}, nullptr);
    s.add("batched_managed", {}, nullptr);
    s.add("libraries", {}, nullptr);
    s.add("green_contexts", {}, nullptr);
    s.add("external_memory", {}, nullptr);
    s.add("checkpointing", {}, nullptr);
  }
  return s;
}

// NVRTC or nvJitLink: which file was found and how, or what was tried.
Section toolkit_section(const char* name, const oxicuda::LibraryInfo& info) {
  Section s;
  const std::string version = std::to_string(info.version / 1000) + "." + std::to_string(info.version % 1000 / 10);
  if (info.available())
    s.title = std::string(name) + ": " + (info.path.empty() ? info.library : info.path) +
              (info.version ? " (" + version + ")" : std::string()) + ", found by " + info.found_by;
  else
    s.title = std::string(name) + ": not found: " + info.reason;
  s.add("available", {}, info.available());
  s.add("library", {}, info.library.empty() ? oxicuda_examples::Scalar{} : info.library);
  s.add("path", {}, info.path.empty() ? oxicuda_examples::Scalar{} : info.path);
  s.add("found_by", {}, info.found_by.empty() ? oxicuda_examples::Scalar{} : info.found_by);
  s.add("version", {}, info.version ? oxicuda_examples::Scalar{version} : nullptr);
  s.add("reason", {}, info.available() ? oxicuda_examples::Scalar{} : info.reason);
  return s;
}

// The kernel cache: where, how full, or why off.
Section cache_section(const oxicuda::KernelCacheInfo& info) {
  Section s;
  if (info.enabled)
    s.title = "kernel cache: " + info.directory + " (" + std::to_string(info.entries) + " entries, " +
              std::to_string(info.bytes) + " bytes; limit " + std::to_string(info.limit) + " bytes)";
  else
    s.title = "kernel cache: off (" + info.note + ")";
  s.add("enabled", {}, info.enabled);
  s.add("directory", {}, info.enabled ? oxicuda_examples::Scalar{info.directory} : nullptr);
  s.add("entries", {}, static_cast<long long>(info.entries));
  s.add("bytes", {}, static_cast<long long>(info.bytes));
  s.add("limit_bytes", {}, static_cast<long long>(info.limit));
  s.add("note", {}, info.enabled ? oxicuda_examples::Scalar{} : info.note);
  return s;
}

// One device: what the driver reports of it, and the self-check. A driver
// call that fails is recorded in the section and fails the run.
Section device_section(int ordinal, bool& passed) {
  using namespace oxicuda;
  Section s;
  s.title = "device " + std::to_string(ordinal);
  s.add("ordinal", {}, static_cast<long long>(ordinal));
  try {
    const Device d = Device::get(ordinal);
    const std::string name = d.name();
    s.title += ": " + name;
    s.add("name", {}, name);
    const ComputeCapability cc = d.compute_capability();
    s.add("compute_capability", "compute capability", std::to_string(cc.major) + "." + std::to_string(cc.minor));
    const std::size_t bytes = d.total_memory();
    char gib[32];
    std::snprintf(gib, sizeof gib, "%.1f GiB", static_cast<double>(bytes) / (1u << 30));
    s.add("total_memory_bytes", "memory", static_cast<long long>(bytes),
          std::string(gib) + " (" + std::to_string(bytes) + " bytes)");
    s.add("multiprocessors", "multiprocessors", static_cast<long long>(d.multiprocessor_count()));
    s.add("uuid", "UUID", d.uuid().to_string());
    s.add("pci_bus_id", "PCI bus id", d.pci_bus_id());
    // The driver API reports neither (NVML does: nvidia-smi -q). Under MIG,
    // cuDeviceGetUuid_v2 gives the MIG instance's UUID, with no mark of it.
    s.add("persistence_mode", "persistence mode", nullptr, "not reported by the CUDA driver API (nvidia-smi -q)");
    s.add("mig_mode", "MIG mode", nullptr, "not reported by the CUDA driver API (nvidia-smi -q)");
    const auto check = oxicuda_examples::two_stream_check(Context::primary(d));
    Section result;
    result.add("passed", "two-stream self-check", check.passed,
               std::string(check.passed ? "PASS" : "FAIL") + " (" + check.message + ")");
    result.add("message", {}, check.message);
    s.add("two_stream_check", std::move(result));
    passed = passed && check.passed;
  } catch (const Error& e) {
    s.add("error", "FAIL", e.what());
    passed = false;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace oxicuda;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(kUsage, stdout);
      return kPassed;
    } else {
      std::fprintf(stderr, "oxicuda-doctor: unknown argument '%s'\n\n%s", argv[i], kUsage);
      return kUsageError;
    }
  }

  // The report: one section after another; a new one is one more add().
  Section report;
  int status = kPassed;
  Section about;
  about.title = std::string("oxicuda ") + OXICUDA_VERSION_STRING;
  about.add("version", {}, OXICUDA_VERSION_STRING);
  report.add("oxicuda", std::move(about));

  const DriverInfo& info = driver_info();
  report.add("driver", driver_section(info));
  if (!info.available()) {
    report.add("device_count", {}, nullptr);
    report.add("devices", std::vector<Section>{});
    status = kNoDriver;
  } else {
    try {
      const int n = Device::count();
      report.add("device_count", "devices", static_cast<long long>(n),
                 n == 0 ? "none (the driver sees no CUDA device)" : "");
      std::vector<Section> devices;
      bool passed = true;
      for (int i = 0; i < n; ++i) devices.push_back(device_section(i, passed));
      report.add("devices", std::move(devices));
      status = n == 0 ? kNoDriver : passed ? kPassed : kFailed;
    } catch (const Error& e) {
      report.add("error", "FAIL", e.what());
      status = kFailed;
    }
  }
  // Runtime compilation: found or not, never a failure of the run.
  report.add("nvrtc", toolkit_section("NVRTC", nvrtc_info()));
  report.add("nvjitlink", toolkit_section("nvJitLink", nvjitlink_info()));
  report.add("kernel_cache", cache_section(kernel_cache_info()));
  report.add("exit_status", {}, static_cast<long long>(status));

  const std::string out = json ? oxicuda_examples::to_json(report) : oxicuda_examples::to_text(report);
  std::fputs(out.c_str(), stdout);
  return status;
}
