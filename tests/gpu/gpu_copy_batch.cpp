// The GPU suite, part: issue 25's batched copies (cuMemcpyBatchAsync) and
// managed-memory batches on a real driver. Each case says which path the
// driver takes (batched or a loop of single calls).
#include <doctest/doctest.h>

#include "gpu_common.hpp"

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

using namespace oxicuda;
using gpu::ctx;

namespace {
std::vector<std::uint32_t> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = seed * 2654435761u + static_cast<std::uint32_t>(i);
  return v;
}
}  // namespace

TEST_CASE("issue 25 (3): copy_batch, host to device, device to device, device to host, of different sizes") {
  const std::string path = batched_copies_available() ? "cuMemcpyBatchAsync" : "a loop of single copies";
  MESSAGE("batched copies: " << path);
  Stream s(ctx());
  const std::size_t sizes[] = {1, 3, 64, 1000, 4096 + 7, 1 << 20};
  constexpr std::size_t kinds = sizeof(sizes) / sizeof(sizes[0]);
  std::vector<std::vector<std::uint32_t>> host, back;
  std::vector<PinnedBuffer<std::uint32_t>> pinned;
  std::vector<DeviceBuffer<std::uint32_t>> a, b;
  for (std::size_t i = 0; i < kinds; ++i) {
    host.push_back(pattern(sizes[i], static_cast<std::uint32_t>(i + 1)));
    back.emplace_back(sizes[i], 0u);
    pinned.emplace_back(ctx(), sizes[i]);
    std::copy(host[i].begin(), host[i].end(), pinned[i].begin());
    a.emplace_back(ctx(), sizes[i]);
    b.emplace_back(ctx(), sizes[i]);
  }
  // Host to device: half from pinned memory, half from pageable memory.
  std::vector<BatchCopy> up;
  for (std::size_t i = 0; i < kinds; ++i)
    if (i % 2) up.emplace_back(a[i], pinned[i]);
    else up.emplace_back(a[i], host[i]);
  copy_batch(s, up);
  std::vector<BatchCopy> across, down;
  for (std::size_t i = 0; i < kinds; ++i) across.emplace_back(b[i], a[i]);
  for (std::size_t i = 0; i < kinds; ++i) down.emplace_back(back[i], b[i]);
  copy_batch(s, across);
  copy_batch(s, down);
  s.synchronize();
  for (std::size_t i = 0; i < kinds; ++i) {
    INFO("copy of ", sizes[i], " elements");
    CHECK(back[i] == host[i]);
  }
}

TEST_CASE("issue 25 (3): copy_batch with attributes: source read during the call, hints, overlap") {
  Stream s(ctx());
  const Device dev = ctx().device();
  DeviceBuffer<std::uint32_t> d0(ctx(), 256), d1(ctx(), 256), d2(ctx(), 256);
  std::vector<std::uint32_t> r0(256), r1(256), r2(256);
  {
    // Sources that die with this scope: read before copy_batch returns.
    const std::vector<std::uint32_t> local0 = pattern(256, 11), local1 = pattern(256, 12);
    copy_batch(s, {{d0, local0, {.source_access = SourceAccess::during_call}},
                   {d1, local1, {.source_access = SourceAccess::during_call, .prefer_overlap_with_compute = true}}});
  }
  const std::vector<std::uint32_t> kept = pattern(256, 13);
  copy_batch(s, {{d2, kept,
                  {.source_access = SourceAccess::any,
                   .source_hint = MemoryLocation::host(),
                   .destination_hint = MemoryLocation::device(dev)}}});
  copy_batch(s, {{r0, d0}, {r1, d1}, {r2, d2}});
  s.synchronize();
  CHECK(r0 == pattern(256, 11));
  CHECK(r1 == pattern(256, 12));
  CHECK(r2 == kept);
}

TEST_CASE("issue 25 (3): a batch with mismatched sizes is an Error naming the copy, on a real driver too") {
  Stream s(ctx());
  DeviceBuffer<std::uint32_t> d(ctx(), 8);
  std::vector<std::uint32_t> h8(8), h9(9);
  try {
    copy_batch(s, {{d, h8}, {d, h9}});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
    CHECK(e.detail().find("copy 1 of the batch: size mismatch") == 0);
  }
  s.synchronize();  // the stream is still usable: nothing was enqueued
}

TEST_CASE("issue 25 (3): batched prefetch, discard, and discard-and-prefetch of managed memory") {
  const Device dev = ctx().device();
  if (dev.attribute(ffi::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) == 0) {
    MESSAGE("SKIPPED: this device has no concurrent managed access; the managed batches need it");
    return;
  }
  const std::string path = batched_managed_available() ? "batched calls" : "a loop of cuMemPrefetchAsync";
  MESSAGE("managed batches: " << path);
  Stream s(ctx());
  const std::size_t n = 1 << 20;
  ManagedBuffer<std::uint32_t> x(ctx(), n), y(ctx(), n);
  std::iota(x.begin(), x.end(), 0u);
  std::iota(y.begin(), y.end(), 7u);
  prefetch_batch(s, {{x.subspan(0, n / 2), MemoryLocation::device(dev)},
                     {x.subspan(n / 2), MemoryLocation::device(dev)},
                     {y, MemoryLocation::host()}});
  s.synchronize();
  // A prefetch keeps the contents; copies see them.
  std::vector<std::uint32_t> back(16);
  copy(back, x.subspan(n / 2, 16));
  CHECK(back[0] == n / 2);
  CHECK(y[n - 1] == n - 1 + 7);
  if (!batched_managed_available()) {
    MESSAGE("SKIPPED: discard_batch needs the CUDA 13.0 batched calls, which this driver lacks");
    CHECK_THROWS_AS(discard_batch(s, {x}), Error);
    return;
  }
  // Discarded, then written again: the new values are what is read.
  discard_batch(s, {x.subspan(0, n / 2)});
  fill(s, x.subspan(0, n / 2), 5u);
  discard_and_prefetch_batch(s, {{y, MemoryLocation::device(dev)}});
  fill(s, y, 9u);
  prefetch_batch(s, {{x, MemoryLocation::host()}, {y, MemoryLocation::host()}});
  s.synchronize();
  CHECK(x[0] == 5u);
  CHECK(x[n / 2 - 1] == 5u);
  CHECK(x[n / 2] == n / 2);  // not discarded
  CHECK(y[123] == 9u);
}
