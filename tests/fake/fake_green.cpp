// The fake driver's green contexts (CUDA 12.4; optional, as fake_batch.cpp):
// a device's SMs as a resource, split into groups by the documented rules,
// descriptors, green contexts, their contexts and their streams (ordinary
// fake streams in the green context's context).
//
// A resource's hidden bytes (cuda.h's _internal_padding) hold, as the
// driver's do, which SMs it is: the device, the first SM, and the split it
// came from (0: a device's or a green context's, which may be split again).
// The granularity is the one cuda.h documents: compute capability 9.0 and
// newer, groups of at least 8 SMs, a multiple of 8; 8.x: 4, a multiple of
// 2; older: 2, a multiple of 2. CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING
// lowers both to 2 (the fake's guess: the driver does not document it).
#include "fake_state.hpp"

#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

namespace fake {

namespace {

constexpr unsigned kMagic = 0x67726e31;  // "grn1"

struct Hidden {
  unsigned magic;
  int device;
  unsigned split;  // 0: not a split's output
  unsigned first_sm;
};

struct Desc {
  int device;
  unsigned sm_count, first_sm;
};

struct Green {
  int device;
  unsigned sm_count, first_sm;
  CUcontext ctx;  // cuCtxFromGreenCtx's
};

unsigned next_split = 1;
// Every descriptor made (never destroyed, as `live`).
std::vector<Desc*>& descs = *new std::vector<Desc*>;

Hidden hidden_of(const CUdevResource& r) {
  Hidden h;
  std::memcpy(&h, r._internal_padding, sizeof h);
  return h;
}

// A resource of `count` SMs of `device` from `first`, with its granularity.
CUdevResource make_resource(int device, unsigned count, unsigned first, unsigned split, bool ignore_coscheduling) {
  CUdevResource r{};
  r.type = CU_DEV_RESOURCE_TYPE_SM;
  const int major = device_attribute_locked(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  unsigned min = major >= 9 ? 8 : major == 8 ? 4 : 2, align = major >= 9 ? 8 : 2;
  if (ignore_coscheduling) min = align = 2;
  r.sm = {count, min, align};
  const Hidden h{kMagic, device, split, first};
  std::memcpy(r._internal_padding, &h, sizeof h);
  return r;
}

bool valid_resource(const CUdevResource* r) {
  return r && r->type == CU_DEV_RESOURCE_TYPE_SM && hidden_of(*r).magic == kMagic;
}

}  // namespace

}  // namespace fake

using namespace fake;

CUresult fake_DeviceGetDevResource(CUdevice dev, CUdevResource* resource, CUdevResourceType type) {
  FAKE_ENTRY(DeviceGetDevResource);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  if (!resource) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  std::lock_guard lock(mu);
  const unsigned sms = static_cast<unsigned>(device_attribute_locked(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
  *resource = make_resource(dev, sms, 0, 0, false);
  return CUDA_SUCCESS;
}

// As cuda.h documents: groups of max(minCount, the minimum) SMs rounded up
// to the alignment, as many as fit (at most *nbGroups when `result` is
// given); a null `result` only counts them. A split's output is not split
// again (CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION), nor is a split that
// makes no group done.
CUresult fake_DevSmResourceSplitByCount(CUdevResource* result, unsigned int* nbGroups, const CUdevResource* input,
                                        CUdevResource* remaining, unsigned int useFlags, unsigned int minCount) {
  FAKE_ENTRY(DevSmResourceSplitByCount);
  if (!nbGroups || !input) return CUDA_ERROR_INVALID_VALUE;
  if (input->type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  if (!valid_resource(input)) return CUDA_ERROR_INVALID_VALUE;
  if (useFlags & ~3u) return CUDA_ERROR_INVALID_VALUE;
  const Hidden in = hidden_of(*input);
  if (in.split != 0) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
  if (minCount > input->sm.smCount) return CUDA_ERROR_INVALID_VALUE;
  if (result && *nbGroups == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  const bool ignore = (useFlags & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING) != 0;
  const CUdevResource shape = make_resource(in.device, 0, 0, 0, ignore);
  unsigned size = minCount < shape.sm.minSmPartitionSize ? shape.sm.minSmPartitionSize : minCount;
  const unsigned align = shape.sm.smCoscheduledAlignment;
  size = (size + align - 1) / align * align;
  const unsigned possible = input->sm.smCount / size;
  if (!result) {
    *nbGroups = possible;
    return CUDA_SUCCESS;
  }
  if (possible == 0) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
  const unsigned made = *nbGroups < possible ? *nbGroups : possible;
  const unsigned split = next_split++;
  for (unsigned i = 0; i < made; ++i)
    result[i] = make_resource(in.device, size, in.first_sm + i * size, split, ignore);
  if (remaining)
    *remaining = make_resource(in.device, input->sm.smCount - made * size, in.first_sm + made * size, split, ignore);
  *nbGroups = made;
  return CUDA_SUCCESS;
}

// One resource, or several outputs of one split (their SMs side by side in
// the fake: a split's groups and its remainder are contiguous).
CUresult fake_DevResourceGenerateDesc(CUdevResourceDesc* phDesc, CUdevResource* resources, unsigned int nbResources) {
  FAKE_ENTRY(DevResourceGenerateDesc);
  if (!phDesc || !resources || nbResources == 0) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < nbResources; ++i)
    if (!valid_resource(&resources[i])) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  const Hidden first = hidden_of(resources[0]);
  unsigned total = 0, lowest = first.first_sm;
  for (unsigned i = 0; i < nbResources; ++i) {
    const Hidden h = hidden_of(resources[i]);
    if (h.device != first.device) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    if (nbResources > 1 && (h.split == 0 || h.split != first.split)) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    total += resources[i].sm.smCount;
    if (h.first_sm < lowest) lowest = h.first_sm;
  }
  if (total == 0) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
  // The driver has no call that destroys a descriptor: kept for the run.
  std::lock_guard lock(mu);
  descs.push_back(new Desc{first.device, total, lowest});
  *phDesc = reinterpret_cast<CUdevResourceDesc>(descs.back());
  return CUDA_SUCCESS;
}

CUresult fake_GreenCtxCreate(CUgreenCtx* phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
  FAKE_ENTRY(GreenCtxCreate);
  if (!phCtx || !desc) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  if (flags != CU_GREEN_CTX_DEFAULT_STREAM) return CUDA_ERROR_INVALID_VALUE;  // required, and the only flag
  const auto* d = reinterpret_cast<const Desc*>(desc);
  if (d->device != dev) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(mu);
  auto* g = new Green{dev, d->sm_count, d->first_sm, nullptr};
  g->ctx = green_context_new(dev, g);
  live[g] = Kind::green;
  *phCtx = reinterpret_cast<CUgreenCtx>(g);
  return CUDA_SUCCESS;
}

CUresult fake_GreenCtxDestroy(CUgreenCtx hCtx) {
  FAKE_ENTRY(GreenCtxDestroy);
  std::lock_guard lock(mu);
  if (!alive(hCtx, Kind::green)) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  auto* g = reinterpret_cast<Green*>(hCtx);
  green_context_free(g->ctx);
  live.erase(hCtx);
  delete g;
  return CUDA_SUCCESS;
}

CUresult fake_CtxFromGreenCtx(CUcontext* pContext, CUgreenCtx hCtx) {
  FAKE_ENTRY(CtxFromGreenCtx);
  if (!pContext) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (!alive(hCtx, Kind::green)) return CUDA_ERROR_INVALID_CONTEXT;
  *pContext = reinterpret_cast<Green*>(hCtx)->ctx;
  return CUDA_SUCCESS;
}

CUresult fake_GreenCtxGetDevResource(CUgreenCtx hCtx, CUdevResource* resource, CUdevResourceType type) {
  FAKE_ENTRY(GreenCtxGetDevResource);
  if (!resource) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  std::lock_guard lock(mu);
  if (!alive(hCtx, Kind::green)) return CUDA_ERROR_INVALID_CONTEXT;
  const auto* g = reinterpret_cast<const Green*>(hCtx);
  *resource = make_resource(g->device, g->sm_count, g->first_sm, 0, false);
  return CUDA_SUCCESS;
}

// As cuda.h: CU_STREAM_NON_BLOCKING must be given; the current context is
// ignored.
CUresult fake_GreenCtxStreamCreate(CUstream* phStream, CUgreenCtx greenCtx, unsigned int flags, int priority) {
  FAKE_ENTRY(GreenCtxStreamCreate);
  if (!phStream || flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (!alive(greenCtx, Kind::green)) return CUDA_ERROR_INVALID_CONTEXT;
  *phStream = new_stream(reinterpret_cast<Green*>(greenCtx)->ctx, flags, priority);
  return CUDA_SUCCESS;
}

// The green context of the stream's context (of the current context, for a
// default stream), or null.
CUresult fake_StreamGetGreenCtx(CUstream hStream, CUgreenCtx* phCtx) {
  FAKE_ENTRY(StreamGetGreenCtx);
  if (!phCtx) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (reinterpret_cast<std::uintptr_t>(hStream) > 2 && !alive(hStream, Kind::stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (reinterpret_cast<std::uintptr_t>(hStream) <= 2)
    if (const CUresult r = need_current_locked()) return r;
  *phCtx = reinterpret_cast<CUgreenCtx>(const_cast<void*>(green_of(stream_context(hStream))));
  return CUDA_SUCCESS;
}

// The green contexts live, and the SMs of one ({first SM, count}; -1 when it is not live).
FAKE_EXPORT long fake_green_sms(const void* green, int first) {
  std::lock_guard lock(mu);
  if (!alive(green, Kind::green)) return -1;
  const auto* g = static_cast<const Green*>(green);
  return first ? g->first_sm : g->sm_count;
}
