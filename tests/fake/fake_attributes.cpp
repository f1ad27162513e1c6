// The fake driver's launch attributes beyond clusters and cooperative
// launches: programmatic dependent launch, the programmatic event,
// priority, and the L2 access-policy window, on a launch
// (cuLaunchKernelEx), a stream (cuStreamSetAttribute/GetAttribute) or a
// graph's kernel node (cuGraphKernelNodeSetAttribute), checked as the
// driver checks them. The last launch's attributes are kept for tests
// (fake_last_launch_attribute).
#include "fake_state.hpp"
#include "fake_graph.hpp"

#include <algorithm>
#include <map>
#include <mutex>

namespace fake {

namespace {
// The last launch's attributes, by id (a summary value each, see
// fake_last_launch_attribute); cleared by each launch.
std::map<int, long long>& last_launch = *new std::map<int, long long>;
// Each stream's access-policy window (none: 0 bytes).
std::map<CUstream, CUaccessPolicyWindow>& stream_windows = *new std::map<CUstream, CUaccessPolicyWindow>;
}  // namespace

// With `mu` held: an attribute for a launch (`node` false) or a kernel node,
// on device `dev`. The driver's rules: a window no larger than the device's
// maximum, a hit ratio in [0, 1], a miss property that is not persisting;
// programmatic launches only on compute capability 9.0 and only for
// launches; a programmatic event that is live.
CUresult check_attribute(const CUlaunchAttribute& a, int dev, bool node) {
  switch (a.id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
      const CUaccessPolicyWindow& w = a.value.accessPolicyWindow;
      if (w.num_bytes > static_cast<std::size_t>(device_attribute_locked(dev, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE)) ||
          !(w.hitRatio >= 0.0f && w.hitRatio <= 1.0f) || w.missProp == CU_ACCESS_PROPERTY_PERSISTING)
        return CUDA_ERROR_INVALID_VALUE;
      return CUDA_SUCCESS;
    }
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
      if (node) return CUDA_ERROR_INVALID_VALUE;
      if (device_attribute_locked(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) < 9) return CUDA_ERROR_NOT_SUPPORTED;
      if (a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT && !alive(a.value.programmaticEvent.event, Kind::event))
        return CUDA_ERROR_INVALID_HANDLE;
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case CU_LAUNCH_ATTRIBUTE_IGNORE:
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

void note_launch_attribute(const CUlaunchAttribute* a) {
  if (!a) {
    last_launch.clear();
    return;
  }
  long long v = 1;
  switch (a->id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: v = static_cast<long long>(a->value.accessPolicyWindow.num_bytes); break;
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: v = a->value.programmaticStreamSerializationAllowed; break;
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT: v = 1 + a->value.programmaticEvent.triggerAtBlockStart; break;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY: v = a->value.priority; break;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: v = a->value.clusterDim.x; break;
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE: v = a->value.cooperative; break;
    default: break;
  }
  last_launch[a->id] = v;
}

void forget_stream_attributes(CUstream s) { stream_windows.erase(s); }

}  // namespace fake

using namespace fake;

FAKE_EXPORT long long fake_last_launch_attribute(int id) {
  std::lock_guard lock(mu);
  const auto it = last_launch.find(id);
  return it == last_launch.end() ? -1 : it->second;
}

CUresult fake_StreamSetAttribute(CUstream s, CUlaunchAttributeID id, const CUlaunchAttributeValue* v) {
  FAKE_ENTRY(StreamSetAttribute);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  if (id != CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW) return CUDA_ERROR_NOT_SUPPORTED;  // (the others: not modeled)
  CUlaunchAttribute a{};
  a.id = id;
  a.value = *v;
  if (const CUresult r = check_attribute(a, std::max(context_device(stream_context(s)), 0), false)) return r;
  stream_windows[s] = v->accessPolicyWindow;
  return CUDA_SUCCESS;
}

CUresult fake_StreamGetAttribute(CUstream s, CUlaunchAttributeID id, CUlaunchAttributeValue* v) {
  FAKE_ENTRY(StreamGetAttribute);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  if (id != CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW) return CUDA_ERROR_NOT_SUPPORTED;
  *v = CUlaunchAttributeValue{};
  const auto it = stream_windows.find(s);
  if (it != stream_windows.end()) v->accessPolicyWindow = it->second;
  return CUDA_SUCCESS;
}

CUresult fake_GraphKernelNodeSetAttribute(CUgraphNode node, CUlaunchAttributeID id, const CUlaunchAttributeValue* v) {
  FAKE_ENTRY(GraphKernelNodeSetAttribute);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (!alive(node, Kind::node) || reinterpret_cast<Node*>(node)->work.type != CU_GRAPH_NODE_TYPE_KERNEL)
    return CUDA_ERROR_INVALID_VALUE;
  CUlaunchAttribute a{};
  a.id = id;
  a.value = *v;
  if (id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION || id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) return CUDA_SUCCESS;
  return check_attribute(a, 0, true);
}
