// Batched copies and batched operations on managed memory (CUDA 13.0):
// cuMemcpyBatchAsync_v2, cuMemPrefetchBatchAsync, cuMemDiscardBatchAsync,
// cuMemDiscardAndPrefetchBatchAsync. In the optional group: the variant
// that models an older driver (fake_cuda_old) lacks them, so the library's
// loop of single calls runs there.
//
// As cuda.h documents the calls: every array present and `count` long; the
// attribute (or location) entries at least one, at most `count`, their
// indices starting at 0, rising, the last below `count`; a copy's source
// access order one of the three valid ones, its flags known; flags of the
// managed calls 0; never the legacy default stream. A pointer inside a
// device allocation must have its whole range there; any other pointer is
// taken as host memory (unified addressing). Everything is checked before
// any byte moves. A batch of no operations is refused (not measured: the
// library never makes one). Discarded bytes are overwritten with 0xDD
// ("indeterminate"), so that a test sees a discard happen.
#include "fake_state.hpp"

#include <cstring>
#include <vector>

namespace {

FakeBatch last_batch{};  // (with fake::mu held)

bool legacy(CUstream s) { return reinterpret_cast<std::uintptr_t>(s) <= 1; }

// The groups' starts: 1..count of them, from 0, rising, below count.
bool valid_groups(const std::size_t* idxs, std::size_t groups, std::size_t count) {
  if (!idxs || groups == 0 || groups > count || idxs[0] != 0) return false;
  for (std::size_t i = 1; i < groups; ++i)
    if (idxs[i] <= idxs[i - 1] || idxs[i] >= count) return false;
  return true;
}

int location_code(const CUmemLocation& l) { return static_cast<int>(l.type) * 100 + l.id; }

void note(const char* entry, std::size_t count, const std::size_t* sizes, const std::size_t* idxs,
          std::size_t groups) {
  last_batch = {};
  std::strncpy(last_batch.entry, entry, sizeof last_batch.entry - 1);
  last_batch.count = count;
  last_batch.groups = groups;
  for (std::size_t i = 0; i < groups && i < 8; ++i) last_batch.starts[i] = idxs ? idxs[i] : 0;
  for (std::size_t i = 0; i < count && i < 8; ++i) last_batch.sizes[i] = sizes[i];
}

// Whether [p, p + n) is device memory (its first byte in an allocation);
// false with `bad` set when it starts in one and overruns it.
bool device_side(CUdeviceptr p, std::size_t n, bool& bad) {
  if (!fake::in_allocation(p, 1)) return false;
  bad = bad || !fake::in_allocation(p, n);
  return true;
}

// The managed calls' common checks; then `each(i)` may refuse range i.
template <class Each>
CUresult check_ranges(CUdeviceptr* dptrs, std::size_t* sizes, std::size_t count, unsigned long long flags,
                      CUstream s, Each&& each) {
  if (!dptrs || !sizes || count == 0 || flags != 0 || legacy(s)) return CUDA_ERROR_INVALID_VALUE;
  if (const CUresult r = fake::use_stream(s)) return r;
  for (std::size_t i = 0; i < count; ++i)
    if (const CUresult r = each(i)) return r;
  return CUDA_SUCCESS;
}

// The location that prefetch `i` goes to (its group's).
CUmemLocation location_of(std::size_t i, const CUmemLocation* locs, const std::size_t* idxs, std::size_t groups) {
  std::size_t g = 0;
  while (g + 1 < groups && idxs[g + 1] <= i) ++g;
  return locs[g];
}

CUresult prefetch_batch(const char* entry, CUdeviceptr* dptrs, std::size_t* sizes, std::size_t count,
                        CUmemLocation* locs, std::size_t* idxs, std::size_t groups, unsigned long long flags,
                        CUstream s, bool discard) {
  std::lock_guard lock(fake::mu);
  if (!locs || !valid_groups(idxs, groups, count)) return CUDA_ERROR_INVALID_VALUE;
  const CUresult r = check_ranges(dptrs, sizes, count, flags, s, [&](std::size_t i) {
    return fake::check_managed(dptrs[i], sizes[i], location_of(i, locs, idxs, groups), true);
  });
  if (r != CUDA_SUCCESS) return r;
  if (discard)
    for (std::size_t i = 0; i < count; ++i)
      std::memset(reinterpret_cast<void*>(static_cast<std::uintptr_t>(dptrs[i])), 0xDD, sizes[i]);
  note(entry, count, sizes, idxs, groups);
  for (std::size_t g = 0; g < groups && g < 8; ++g) last_batch.location[g] = location_code(locs[g]);
  return CUDA_SUCCESS;
}

}  // namespace

FAKE_EXPORT void fake_last_batch(FakeBatch* out) {
  std::lock_guard lock(fake::mu);
  if (out) *out = last_batch;
}

CUresult fake_MemcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs, std::size_t* sizes, std::size_t count,
                               CUmemcpyAttributes* attrs, std::size_t* idxs, std::size_t groups, CUstream s) {
  FAKE_ENTRY(MemcpyBatchAsync);
  if (!dsts || !srcs || !sizes || count == 0 || !attrs || legacy(s)) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_groups(idxs, groups, count)) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t g = 0; g < groups; ++g) {
    const int order = attrs[g].srcAccessOrder;
    if (order < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM || order > CU_MEMCPY_SRC_ACCESS_ORDER_ANY ||
        (attrs[g].flags & ~unsigned(CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE)) != 0)
      return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard lock(fake::mu);
  if (const CUresult r = fake::use_stream(s)) return r;
  // Driver 580 refuses every batch when no context is current on the
  // calling thread, and takes it with one current (H100,
  // tools/probes/vmm_batch_copy.cpp).
  if (fake::current() == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // Checked first (no allocation: the library's hot path counts them).
  for (std::size_t i = 0; i < count; ++i) {
    bool bad = false;
    const bool dst_device = device_side(dsts[i], sizes[i], bad), src_device = device_side(srcs[i], sizes[i], bad);
    if (bad || (!dst_device && !src_device) || (sizes[i] && (!dsts[i] || !srcs[i]))) return CUDA_ERROR_INVALID_VALUE;
  }
  for (std::size_t i = 0; i < count; ++i) {
    bool bad = false;
    fake::Work w;
    w.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    w.dst = dsts[i], w.src = srcs[i], w.bytes = sizes[i];
    w.dst_device = device_side(dsts[i], sizes[i], bad);
    w.src_device = device_side(srcs[i], sizes[i], bad);
    if (fake::capturing(s)) {
      bool captured = false;
      if (const CUresult r = fake::capture_work(s, std::move(w), captured)) return r;
      continue;
    }
    if (w.bytes == 0) continue;
    auto* dst = reinterpret_cast<void*>(w.dst);
    if (!fake::held(s)) {
      std::memmove(dst, reinterpret_cast<const void*>(w.src), w.bytes);
    } else if (!w.src_device) {  // host memory is read now (staged), written when the stream runs
      std::vector<unsigned char> bytes(reinterpret_cast<const unsigned char*>(w.src),
                                       reinterpret_cast<const unsigned char*>(w.src) + w.bytes);
      fake::defer(s, [dst, bytes = std::move(bytes)] { std::memcpy(dst, bytes.data(), bytes.size()); });
    } else {
      const auto src = w.src;
      const auto n = w.bytes;
      fake::defer(s, [dst, src, n] { std::memmove(dst, reinterpret_cast<const void*>(src), n); });
    }
  }
  note("cuMemcpyBatchAsync", count, sizes, idxs, groups);
  for (std::size_t g = 0; g < groups && g < 8; ++g) {
    last_batch.access[g] = attrs[g].srcAccessOrder;
    last_batch.flags[g] = attrs[g].flags;
    last_batch.src_hint[g] = location_code(attrs[g].srcLocHint);
    last_batch.dst_hint[g] = location_code(attrs[g].dstLocHint);
  }
  return CUDA_SUCCESS;
}

CUresult fake_MemPrefetchBatchAsync(CUdeviceptr* dptrs, std::size_t* sizes, std::size_t count, CUmemLocation* locs,
                                    std::size_t* idxs, std::size_t groups, unsigned long long flags, CUstream s) {
  FAKE_ENTRY(MemPrefetchBatchAsync);
  return prefetch_batch("cuMemPrefetchBatchAsync", dptrs, sizes, count, locs, idxs, groups, flags, s, false);
}

CUresult fake_MemDiscardAndPrefetchBatchAsync(CUdeviceptr* dptrs, std::size_t* sizes, std::size_t count,
                                              CUmemLocation* locs, std::size_t* idxs, std::size_t groups,
                                              unsigned long long flags, CUstream s) {
  FAKE_ENTRY(MemDiscardAndPrefetchBatchAsync);
  return prefetch_batch("cuMemDiscardAndPrefetchBatchAsync", dptrs, sizes, count, locs, idxs, groups, flags, s,
                        true);
}

CUresult fake_MemDiscardBatchAsync(CUdeviceptr* dptrs, std::size_t* sizes, std::size_t count,
                                   unsigned long long flags, CUstream s) {
  FAKE_ENTRY(MemDiscardBatchAsync);
  std::lock_guard lock(fake::mu);
  const CUresult r = check_ranges(dptrs, sizes, count, flags, s, [&](std::size_t i) {
    return fake::check_managed(dptrs[i], sizes[i], CUmemLocation{CU_MEM_LOCATION_TYPE_HOST, 0}, false);
  });
  if (r != CUDA_SUCCESS) return r;
  for (std::size_t i = 0; i < count; ++i)
    std::memset(reinterpret_cast<void*>(static_cast<std::uintptr_t>(dptrs[i])), 0xDD, sizes[i]);
  note("cuMemDiscardBatchAsync", count, sizes, nullptr, 0);
  return CUDA_SUCCESS;
}
