// Device memory and events shared between processes (issue 23, item 10) on
// the fake driver. A handle is opened "in another process" by changing the
// exporter named in its bytes and telling the fake it runs elsewhere
// (as_if_exported_elsewhere, OtherProcess: tests/fake_driver.hpp); the
// fake's opened memory is then the exporter's own bytes.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <cstddef>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <vector>

using namespace oxicuda;

namespace {
bool says(const Error& e, const char* text) { return std::string(e.what()).find(text) != std::string::npos; }
}  // namespace

TEST_CASE_FIXTURE(LaunchTest, "issue 23 (10): a buffer and an event exported, sent as bytes, opened in another process") {
  std::vector<float> host(64);
  std::iota(host.begin(), host.end(), 0.0f);
  DeviceBuffer<float> b(ctx, 64);
  b.copy_from(host);
  Event e(ctx, {.timing = false, .interprocess = true});
  CHECK(e.interprocess());
  CHECK_FALSE(e.timing());
  CHECK_FALSE(Event(ctx).interprocess());

  const IpcMemoryHandle h = ipc_export(b);
  CHECK(h);
  CHECK(h.element_size() == sizeof(float));
  CHECK(h.size() == 64);
  CHECK(h.size_bytes() == 256);
  CHECK(h.exported_here());
  const IpcEventHandle eh = ipc_export(e);
  CHECK(eh);
  CHECK(eh.exported_here());
  CHECK(fake.calls("cuIpcGetMemHandle") == 1);
  CHECK(fake.calls("cuIpcGetEventHandle") == 1);
  CHECK(Context::current().raw() == nullptr);  // the buffer's context was current for the call only

  // Through bytes and back: the same handle.
  const IpcMemoryHandle::Bytes bytes = h.to_bytes();
  static_assert(std::tuple_size_v<IpcMemoryHandle::Bytes> == IpcMemoryHandle::bytes_size);
  const IpcMemoryHandle back = IpcMemoryHandle::from_bytes(bytes);
  CHECK(std::memcmp(back.raw().reserved, h.raw().reserved, sizeof h.raw().reserved) == 0);
  CHECK(back.size() == 64);
  CHECK(back.element_size() == 4);
  CHECK(back.exported_here());
  CHECK(back.to_bytes() == bytes);
  const IpcEventHandle eback = IpcEventHandle::from_bytes(eh.to_bytes());
  CHECK(eback.to_bytes() == eh.to_bytes());
  CHECK(eback.exported_here());

  OtherProcess other;
  const IpcMemoryHandle theirs = as_if_exported_elsewhere(back);
  const IpcEventHandle their_event = as_if_exported_elsewhere(eback);
  CHECK_FALSE(theirs.exported_here());
  CHECK_FALSE(their_event.exported_here());
  {
    IpcMemory<float> mapped(ctx, theirs);
    CHECK(mapped.size() == 64);
    CHECK(mapped.size_bytes() == 256);
    CHECK(mapped.device_span().context() == ctx.raw());
    CHECK(fake.live("ipc_memory") - at_start.ipc_memory == 1);
    CHECK(Context::current().raw() == nullptr);
    // A device range like a DeviceBuffer: copies, fills, launches.
    std::vector<float> seen(64);
    copy(seen, mapped);
    CHECK(seen == host);
    auto dbl = m.kernel<void(float*, unsigned)>("dbl");
    launch(s, dbl, {.grid = 1, .block = 64}, mapped, 64u);
    s.synchronize();
    b.copy_to(seen);  // (the fake's mapping is the exporter's memory)
    CHECK(seen[10] == 20.0f);
    fill(mapped.subspan(0, 2), -1.0f);
    b.copy_to(seen);
    CHECK(seen[1] == -1.0f);
    CHECK(seen[2] == 4.0f);
    // Move-only; opened twice, closed twice (the driver counts the opens of a handle).
    IpcMemory<float> moved = std::move(mapped);
    CHECK(mapped.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
    CHECK_FALSE(mapped.context());  // NOLINT(bugprone-use-after-move)
    CHECK(moved.size() == 64);
    IpcMemory<float> again(ctx, theirs);
    CHECK(again.device_ptr() == moved.device_ptr());
    CHECK(fake.live("ipc_memory") - at_start.ipc_memory == 2);
    again.reset();
    CHECK(again.empty());
    CHECK(fake.live("ipc_memory") - at_start.ipc_memory == 1);
  }
  CHECK(fake.calls("cuIpcCloseMemHandle") == 2);
  CHECK(fake.live("ipc_memory") - at_start.ipc_memory == 0);

  // The event: opened, it does not record time, and is destroyed once.
  const long events = fake.live("event");
  {
    Event opened(ctx, their_event);
    CHECK(opened.interprocess());
    CHECK_FALSE(opened.timing());
    CHECK(fake.live("event") == events + 1);
    s.record(e);
    s.wait(opened);
    s.record(opened);
    opened.synchronize();
    CHECK(opened.ready());
    const Event copy_of = opened;
    CHECK(copy_of.use_count() == 2);
  }
  CHECK(fake.live("event") == events);
  CHECK(fake.calls("cuIpcOpenEventHandle") == 1);
}

TEST_CASE_FIXTURE(ContextTest, "issue 23 (10): opening a handle in the process that exported it is an Error before the driver sees it") {
  DeviceBuffer<int> b(ctx, 16);
  Event e(ctx, {.timing = false, .interprocess = true});
  const IpcMemoryHandle h = ipc_export(b);
  const IpcEventHandle eh = ipc_export(e);
  for (const IpcMemoryHandle& mine : {h, IpcMemoryHandle::from_bytes(h.to_bytes())}) {
    const Error err = error_of([&] { IpcMemory<int> m(ctx, mine); });
    CHECK(err.result() == ffi::CUDA_ERROR_INVALID_CONTEXT);
    CHECK(err.call() == "oxicuda::IpcMemory::IpcMemory");
    CHECK(says(err, "this process exported this handle; IPC handles are opened in another process"));
    CHECK(says(err, "use the DeviceBuffer itself here"));
  }
  const Error eerr = error_of([&] { Event opened(ctx, eh); });
  CHECK(eerr.result() == ffi::CUDA_ERROR_INVALID_CONTEXT);
  CHECK(eerr.call() == "oxicuda::Event::Event");
  CHECK(says(eerr, "use the Event itself here"));
  CHECK(fake.calls("cuIpcOpenMemHandle") == 0);
  CHECK(fake.calls("cuIpcOpenEventHandle") == 0);

  // The driver's bytes alone (from_raw: who exported them is not known):
  // the driver refuses, and its error is reported; nothing is left open.
  const IpcMemoryHandle raw = IpcMemoryHandle::from_raw(h.raw(), sizeof(int), 16);
  CHECK_FALSE(raw.exported_here());
  const Error derr = error_of([&] { IpcMemory<int> m(ctx, raw); });
  CHECK(derr.result() == ffi::CUDA_ERROR_INVALID_CONTEXT);  // (the fake answers as the driver)
  CHECK(derr.call() == "cuIpcOpenMemHandle");
  const Error deerr = error_of([&] { Event opened(ctx, IpcEventHandle::from_raw(eh.raw())); });
  CHECK(deerr.call() == "cuIpcOpenEventHandle");
  CHECK(fake.live("ipc_memory") == at_start.ipc_memory);
  CHECK(Context::current().raw() == nullptr);

  // Under another number, the same process id: the driver's error says what may be wrong.
  auto bytes = h.to_bytes();
  bytes[16] ^= std::byte{1};  // the number, not the id
  const Error herr = error_of([&] { IpcMemory<int> m(ctx, IpcMemoryHandle::from_bytes(bytes)); });
  CHECK(herr.call() == "cuIpcOpenMemHandle");
  CHECK(says(herr, "exported by a process with this process's id"));
}

TEST_CASE_FIXTURE(StreamTest, "issue 23 (10): what cannot be exported: a stream-ordered, empty or moved-from buffer; an event not made interprocess") {
  auto pooled = DeviceBuffer<int>::allocate_async(s, 16);
  Error err = error_of([&] { (void)ipc_export(pooled); });
  CHECK(err.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(says(err, "stream-ordered (allocate_async)"));
  CHECK(says(err, "cuIpcGetMemHandle does not export"));
  DeviceBuffer<int> b(ctx, 16);
  DeviceBuffer<int> taken = std::move(b);
  err = error_of([&] { (void)ipc_export(b); });  // NOLINT(bugprone-use-after-move): on purpose
  CHECK(err.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(says(err, "oxicuda::DeviceBuffer is empty"));
  DeviceBuffer<int> none(ctx, 0);
  err = error_of([&] { (void)ipc_export(none); });
  CHECK(err.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(says(err, "0 elements"));
  CHECK(fake.calls("cuIpcGetMemHandle") == 0);

  // An event: created interprocess, without timing.
  const long events = fake.live("event");
  err = error_of([&] { Event e(ctx, {.interprocess = true}); });
  CHECK(err.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(says(err, "{.timing = false, .interprocess = true}"));
  CHECK(fake.live("event") == events);
  CHECK(fake.calls("cuEventCreate") == 0);
  err = error_of([&] { (void)ipc_export(Event(ctx, {.timing = false})); });
  CHECK(err.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(says(err, "not created for interprocess use"));
  err = error_of([&] { (void)ipc_export(Event()); });
  CHECK(err.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(fake.calls("cuIpcGetEventHandle") == 0);
}

TEST_CASE_FIXTURE(ContextTest, "issue 23 (10): opening checks the element size; empty handles and contexts are Errors") {
  DeviceBuffer<int> b(ctx, 16);
  const IpcMemoryHandle theirs = as_if_exported_elsewhere(ipc_export(b));
  OtherProcess other;  // (after the export: the fake names its exporter's process)
  {
    IpcMemory<float> same_size(ctx, theirs);  // the size is what is checked
    CHECK(same_size.size() == 16);
  }
  const Error err = error_of([&] { IpcMemory<double> m(ctx, theirs); });
  CHECK(err.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(says(err, "16 elements of 4 bytes; this IpcMemory<T> has elements of 8 bytes"));
  CHECK(error_of([&] { IpcMemory<int> m(ctx, IpcMemoryHandle()); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { IpcMemory<int> m(Context(), theirs); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { (void)IpcMemoryHandle().to_bytes(); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { Event e(ctx, IpcEventHandle()); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { (void)IpcEventHandle().to_bytes(); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { (void)IpcMemoryHandle::from_raw(theirs.raw(), 0, 4); }).result() ==
        ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK_FALSE(IpcMemoryHandle());
  CHECK_FALSE(IpcEventHandle());
  CHECK(fake.calls("cuIpcOpenMemHandle") == 1);
  // Memory freed since it was exported: the driver's error, nothing left open.
  b.reset();
  CHECK(error_of([&] { IpcMemory<int> m(ctx, theirs); }).call() == "cuIpcOpenMemHandle");
  CHECK(Context::current().raw() == nullptr);
}

TEST_CASE_FIXTURE(ContextTest, "issue 23 (10): malformed bytes are Errors that say what is wrong") {
  DeviceBuffer<int> b(ctx, 16);
  Event e(ctx, {.timing = false, .interprocess = true});
  const IpcMemoryHandle::Bytes good = ipc_export(b).to_bytes();
  const IpcEventHandle::Bytes good_event = ipc_export(e).to_bytes();
  auto refused = [](auto&& bytes, const char* why) {
    const Error err = error_of([&] { (void)IpcMemoryHandle::from_bytes(bytes); });
    CHECK(err.result() == ffi::CUDA_ERROR_INVALID_VALUE);
    CHECK(err.call() == "oxicuda::IpcMemoryHandle::from_bytes");
    INFO(err.what());
    CHECK(says(err, why));
  };
  refused(std::span(good).first(50), "50 bytes; an IpcMemoryHandle is 104 bytes");
  refused(std::span<const std::byte>(), "0 bytes");
  refused(std::span<const std::byte>(good_event), "88 bytes");
  auto bad = good;
  bad[0] = std::byte{'X'};
  refused(bad, "not an oxicuda IPC handle");
  bad = good;
  bad[4] = std::byte{2};
  refused(bad, "format version 2; this oxicuda reads version 1");
  bad = good;
  bad[5] = std::byte{2};
  refused(bad, "these bytes are an IpcEventHandle, not an IpcMemoryHandle");
  bad[5] = std::byte{9};
  refused(bad, "unknown kind");
  bad = good;
  for (std::size_t i = 88; i < 96; ++i) bad[i] = std::byte{0};
  refused(bad, "element size of 0 bytes");
  bad = good;
  bad[103] = std::byte{0x40};  // a count of 2^62 and more, of 4-byte elements
  refused(bad, "overflow size_t");
  const Error err = error_of([&] { (void)IpcEventHandle::from_bytes(good); });
  CHECK(err.call() == "oxicuda::IpcEventHandle::from_bytes");
  CHECK(says(err, "104 bytes; an IpcEventHandle is 88 bytes"));
  auto bad_event = good_event;
  bad_event[5] = std::byte{1};
  CHECK(says(error_of([&] { (void)IpcEventHandle::from_bytes(bad_event); }),
             "these bytes are an IpcMemoryHandle, not an IpcEventHandle"));
}
