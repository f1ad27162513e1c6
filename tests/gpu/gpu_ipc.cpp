// The GPU suite, part: issue 23's IPC (item 10) on a real driver, across two
// real processes. The parent exports a buffer and an interprocess event and
// runs this binary again as a child (/proc/<pid>/exe with a doctest filter
// naming this very test case, the handles' bytes in hex in
// OXICUDA_GPU_IPC_CHILD); the child opens both, waits for the event, checks
// the parent's values, writes its own and exits; the parent checks those.
#include <doctest/doctest.h>

#include "gpu_common.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

using namespace oxicuda;
using gpu::ctx;

namespace {

constexpr const char* kSharedCase = "issue 23 (10): device memory and an interprocess event shared with a child process";
constexpr unsigned kCount = (1u << 24) + 3;

template <std::size_t N>
std::string to_hex(const std::array<std::byte, N>& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (std::byte b : bytes) {
    s += digits[static_cast<unsigned>(b) >> 4];
    s += digits[static_cast<unsigned>(b) & 15];
  }
  return s;
}

// The bytes of `hex` (two digits a byte); what is not hex reads as 0, and
// from_bytes then says what is wrong.
std::vector<std::byte> from_hex(const std::string& hex) {
  auto digit = [](char c) -> unsigned {
    if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
    return 0;
  };
  std::vector<std::byte> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<std::byte>(digit(hex[i]) << 4 | digit(hex[i + 1])));
  return out;
}

bool ipc_supported() {
  const Device dev = ctx().device();
  return dev.attribute(ffi::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) != 0 &&
         dev.attribute(ffi::CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED) != 0;
}

// The child's part: open what the parent exported, wait for its event, check
// its values, write new ones.
void child(const std::string& handles) {
  const std::size_t colon = handles.find(':');
  REQUIRE(colon != std::string::npos);
  const std::vector<std::byte> mem_bytes = from_hex(handles.substr(0, colon));
  const std::vector<std::byte> event_bytes = from_hex(handles.substr(colon + 1));
  const IpcMemoryHandle mh = IpcMemoryHandle::from_bytes(mem_bytes);
  const IpcEventHandle eh = IpcEventHandle::from_bytes(event_bytes);
  CHECK_FALSE(mh.exported_here());
  CHECK_FALSE(eh.exported_here());
  REQUIRE(mh.size() == kCount);
  IpcMemory<int> shared(ctx(), mh);
  const Event ready(ctx(), eh);
  CHECK(ready.interprocess());
  Stream s(ctx());
  s.wait(ready);  // the parent's fill, recorded before the parent started us
  std::vector<int> host(shared.size());
  copy(s, host, shared);
  CHECK(std::count(host.begin(), host.end(), 42) == static_cast<long>(kCount));
  fill(s, shared.subspan(0, kCount / 2), 7);
  fill(s, shared.subspan(kCount / 2), 8);
  s.synchronize();
  MESSAGE("issue 23 (10) child ", ::getpid(), ": opened ", shared.size_bytes(), " bytes at ", shared.device_ptr(),
          ", read the parent's 42s after its event, wrote 7s and 8s");
}

}  // namespace

TEST_CASE("issue 23 (10): device memory and an interprocess event shared with a child process") {
  if (const char* handles = std::getenv("OXICUDA_GPU_IPC_CHILD")) {
    child(handles);
    return;
  }
  if (!ipc_supported()) {
    MESSAGE("skipped: the device has no IPC (unified addressing and CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED)");
    return;
  }
  Stream s(ctx());
  DeviceBuffer<int> buffer(ctx(), kCount);
  const Event ready(ctx(), {.timing = false, .interprocess = true});
  const std::string handles = to_hex(ipc_export(buffer).to_bytes()) + ":" + to_hex(ipc_export(ready).to_bytes());
  fill_async(s, buffer, 42);
  s.record(ready);  // not waited for here: the child waits for it
  const int exit_code = gpu::run_self("OXICUDA_GPU_IPC_CHILD=" + handles, kSharedCase);
  REQUIRE(exit_code == 0);
  std::vector<int> host(kCount);
  copy(host, buffer);
  CHECK(std::count(host.begin(), host.begin() + kCount / 2, 7) == static_cast<long>(kCount / 2));
  CHECK(std::count(host.begin() + kCount / 2, host.end(), 8) == static_cast<long>(kCount - kCount / 2));
}

TEST_CASE("issue 23 (10): opening a handle in the process that exported it is an Error (the driver refuses it too)") {
  if (!ipc_supported()) {
    MESSAGE("skipped: the device has no IPC");
    return;
  }
  DeviceBuffer<int> buffer(ctx(), 64);
  const Event e(ctx(), {.timing = false, .interprocess = true});
  const IpcMemoryHandle h = ipc_export(buffer);
  const IpcEventHandle eh = ipc_export(e);
  CHECK(h.exported_here());
  Error refused(ffi::CUDA_SUCCESS, "");
  try {
    IpcMemory<int> m(ctx(), IpcMemoryHandle::from_bytes(h.to_bytes()));
    FAIL("opened its own handle");
  } catch (const Error& err) {
    refused = err;
  }
  CHECK(refused.result() == ffi::CUDA_ERROR_INVALID_CONTEXT);
  CHECK(std::string(refused.what()).find("this process exported this handle") != std::string::npos);
  try {
    Event opened(ctx(), eh);
    FAIL("opened its own event handle");
  } catch (const Error& err) {
    CHECK(err.call() == "oxicuda::Event::Event");
  }
  // The driver's own answer, through the driver's bytes alone (from_raw:
  // the exporter unknown, so the driver is asked).
  try {
    IpcMemory<int> m(ctx(), IpcMemoryHandle::from_raw(h.raw(), sizeof(int), 64));
    FAIL("the driver opened the exporter's own memory handle");
  } catch (const Error& err) {
    CHECK(err.call() == "cuIpcOpenMemHandle");
    MESSAGE("issue 23 (10): the driver refuses a process its own memory handle: ", std::string(err.name()));
  }
  try {
    Event opened(ctx(), IpcEventHandle::from_raw(eh.raw()));
    MESSAGE("issue 23 (10): the driver opened the exporter's own event handle");
  } catch (const Error& err) {
    CHECK(err.call() == "cuIpcOpenEventHandle");
    MESSAGE("issue 23 (10): the driver refuses a process its own event handle: ", std::string(err.name()));
  }
  // A stream-ordered buffer is refused before the driver is asked.
  Stream s(ctx());
  auto pooled = DeviceBuffer<int>::allocate_async(s, 64);
  CHECK_THROWS_AS((void)ipc_export(pooled), Error);
  s.synchronize();
}
