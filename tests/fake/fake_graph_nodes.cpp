// The fake driver's graphs: nodes added one by one (kernels, copies, fills,
// host functions, empty, child graphs, events, memory, conditional nodes),
// each checked as the driver checks its parameters.
#include "fake_graph.hpp"

#include <cstring>

namespace fake {

// A node's kernel from its parameters (as cuGraphAddKernelNode reads them).
CUresult kernel_work(const CUDA_KERNEL_NODE_PARAMS_v2* p, Work& w) {
  if (!p || (p->func && p->kern)) return CUDA_ERROR_INVALID_VALUE;  // (the driver ignores kern then; oxicuda never sets both)
  // A function, or (func null) a library's kernel in `ctx` (null: the
  // current context), as the driver reads them.
  Func* fn = nullptr;
  if (p->func && alive(p->func, Kind::function)) fn = reinterpret_cast<Func*>(p->func);
  if (!p->func && p->kern && alive(p->kern, Kind::kernel))
    fn = function_in(reinterpret_cast<CUfunction>(p->kern), p->ctx ? p->ctx : current());
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  // With no context current, the H200's driver (580) crashes in
  // cuGraphAddKernelNode_v2 and cuGraph[Exec]KernelNodeSetParams_v2
  // whatever p->ctx names (probed with raw driver calls, one process per
  // call; tests/gpu/gpu_graph.cpp runs oxicuda so on the H200); the fake
  // refuses instead, so that a caller who forgets is found here.
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  Func& f = *fn;
  const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
  const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
  const unsigned none[3] = {0, 0, 0};
  if (const CUresult r = check_launch(f, grid, block, p->sharedMemBytes, none, 0, p->kernelParams, p->extra)) return r;
  w.type = CU_GRAPH_NODE_TYPE_KERNEL;
  w.func = &f;
  for (int i = 0; i < 3; ++i) w.grid[i] = grid[i], w.block[i] = block[i];
  w.shared = p->sharedMemBytes;
  w.args = pack_args(f, p->kernelParams);
  return CUDA_SUCCESS;
}

// A 1D copy from its 3D parameters (the only shape oxicuda makes).
CUresult memcpy_work(const CUDA_MEMCPY3D* p, Work& w) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  if (p->Height != 1 || p->Depth != 1 || p->srcXInBytes || p->dstXInBytes || p->srcY || p->dstY || p->srcZ ||
      p->dstZ)
    return CUDA_ERROR_NOT_SUPPORTED;
  auto side = [](CUmemorytype t, const void* host, CUdeviceptr dev, std::uintptr_t& at, bool& device) {
    if (t == CU_MEMORYTYPE_HOST) return at = reinterpret_cast<std::uintptr_t>(host), device = false, true;
    if (t == CU_MEMORYTYPE_DEVICE) return at = dev, device = true, true;
    return false;
  };
  w.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  if (!side(p->srcMemoryType, p->srcHost, p->srcDevice, w.src, w.src_device) ||
      !side(p->dstMemoryType, p->dstHost, p->dstDevice, w.dst, w.dst_device))
    return CUDA_ERROR_INVALID_VALUE;
  w.bytes = p->WidthInBytes;
  auto known = [](std::uintptr_t p, std::size_t n) { return in_allocation(p, n) || in_graph_block(p, n); };
  if (w.bytes && ((w.src_device && !known(w.src, w.bytes)) || (w.dst_device && !known(w.dst, w.bytes))))
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}


CUresult memset_work(const CUDA_MEMSET_NODE_PARAMS* p, Work& w) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  if (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) return CUDA_ERROR_INVALID_VALUE;
  if (p->height == 0 || (p->height > 1 && p->pitch < p->width * p->elementSize)) return CUDA_ERROR_INVALID_VALUE;
  if (p->dst % p->elementSize) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t span = p->height > 1 ? p->pitch * (p->height - 1) + p->width * p->elementSize
                                         : p->width * p->elementSize;
  if (!in_allocation(p->dst, span) && !in_graph_block(p->dst, span)) return CUDA_ERROR_INVALID_VALUE;
  w.type = CU_GRAPH_NODE_TYPE_MEMSET;
  w.dst = p->dst, w.value = p->value, w.element_size = p->elementSize;
  w.width = p->width, w.height = p->height, w.pitch = p->pitch;
  return CUDA_SUCCESS;
}

}  // namespace fake

using namespace fake;

CUresult fake_GraphAddKernelNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n,
                                 const CUDA_KERNEL_NODE_PARAMS_v2* params) {
  FAKE_ENTRY(GraphAddKernelNode);
  std::lock_guard lock(mu);
  if (const CUresult r = check_add(out, graph, deps, n)) return r;
  Work w;
  if (const CUresult r = kernel_work(params, w)) return r;
  *out = reinterpret_cast<CUgraphNode>(add_node(reinterpret_cast<Graph*>(graph), deps, n, std::move(w)));
  return CUDA_SUCCESS;
}

// A copy or memset node, its parameters read by `make`.
template <class Params, class Make>
static CUresult add_memory_node(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n,
                                const Params* params, CUcontext ctx, Make make) {
  std::lock_guard lock(mu);
  if (const CUresult r = check_add(out, graph, deps, n)) return r;
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  Work w;
  if (const CUresult r = make(params, w)) return r;
  *out = reinterpret_cast<CUgraphNode>(add_node(reinterpret_cast<Graph*>(graph), deps, n, std::move(w)));
  return CUDA_SUCCESS;
}

CUresult fake_GraphAddMemcpyNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n,
                                 const CUDA_MEMCPY3D* params, CUcontext ctx) {
  FAKE_ENTRY(GraphAddMemcpyNode);
  return add_memory_node(out, graph, deps, n, params, ctx, memcpy_work);
}

CUresult fake_GraphAddMemsetNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n,
                                 const CUDA_MEMSET_NODE_PARAMS* params, CUcontext ctx) {
  FAKE_ENTRY(GraphAddMemsetNode);
  return add_memory_node(out, graph, deps, n, params, ctx, memset_work);
}

CUresult fake_GraphAddHostNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n,
                               const CUDA_HOST_NODE_PARAMS* params) {
  FAKE_ENTRY(GraphAddHostNode);
  std::lock_guard lock(mu);
  if (const CUresult r = check_add(out, graph, deps, n)) return r;
  if (!params || !params->fn) return CUDA_ERROR_INVALID_VALUE;
  Work w;
  w.type = CU_GRAPH_NODE_TYPE_HOST;
  w.fn = params->fn;
  w.data = params->userData;
  *out = reinterpret_cast<CUgraphNode>(add_node(reinterpret_cast<Graph*>(graph), deps, n, std::move(w)));
  return CUDA_SUCCESS;
}

CUresult fake_GraphAddEmptyNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n) {
  FAKE_ENTRY(GraphAddEmptyNode);
  std::lock_guard lock(mu);
  if (const CUresult r = check_add(out, graph, deps, n)) return r;
  *out = reinterpret_cast<CUgraphNode>(add_node(reinterpret_cast<Graph*>(graph), deps, n, Work{}));
  return CUDA_SUCCESS;
}

CUresult fake_GraphAddChildGraphNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n,
                                     CUgraph child) {
  FAKE_ENTRY(GraphAddChildGraphNode);
  std::lock_guard lock(mu);
  if (const CUresult r = check_add(out, graph, deps, n)) return r;
  if (!alive(child, Kind::graph) || child == graph) return CUDA_ERROR_INVALID_VALUE;
  if (has_memory_nodes(reinterpret_cast<Graph*>(child))) return CUDA_ERROR_NOT_SUPPORTED;
  Work w;
  w.type = CU_GRAPH_NODE_TYPE_GRAPH;
  Node* node = add_node(reinterpret_cast<Graph*>(graph), deps, n, std::move(w));
  std::unordered_map<const Node*, Node*> map;  // as the driver: the node holds a copy of the child
  node->graphs.push_back(copy_graph(reinterpret_cast<Graph*>(child), map, false));
  node->graphs[0]->parent = reinterpret_cast<Graph*>(graph);
  *out = reinterpret_cast<CUgraphNode>(node);
  return CUDA_SUCCESS;
}

static CUresult add_event_node(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n, CUevent e,
                               CUgraphNodeType type) {
  std::lock_guard lock(mu);
  if (const CUresult r = check_add(out, graph, deps, n)) return r;
  if (!alive(e, Kind::event)) return CUDA_ERROR_INVALID_VALUE;
  Work w;
  w.type = type;
  w.event = e;
  *out = reinterpret_cast<CUgraphNode>(add_node(reinterpret_cast<Graph*>(graph), deps, n, std::move(w)));
  return CUDA_SUCCESS;
}

CUresult fake_GraphAddEventRecordNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n,
                                      CUevent e) {
  FAKE_ENTRY(GraphAddEventRecordNode);
  return add_event_node(out, graph, deps, n, e, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

CUresult fake_GraphAddEventWaitNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n,
                                    CUevent e) {
  FAKE_ENTRY(GraphAddEventWaitNode);
  return add_event_node(out, graph, deps, n, e, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

CUresult fake_GraphAddMemAllocNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n,
                                   CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  FAKE_ENTRY(GraphAddMemAllocNode);
  std::lock_guard lock(mu);
  if (const CUresult r = check_add(out, graph, deps, n)) return r;
  if (!params || params->bytesize == 0 || params->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      params->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE || params->poolProps.location.id < 0 ||
      params->poolProps.location.id >= device_count)
    return CUDA_ERROR_INVALID_VALUE;
  Work w;
  w.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  w.memory = std::make_shared<Block>(params->bytesize);
  w.dptr = reinterpret_cast<std::uintptr_t>(w.memory->mem);
  params->dptr = w.dptr;
  *out = reinterpret_cast<CUgraphNode>(add_node(reinterpret_cast<Graph*>(graph), deps, n, std::move(w)));
  return CUDA_SUCCESS;
}

CUresult fake_GraphAddMemFreeNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n,
                                  CUdeviceptr dptr) {
  FAKE_ENTRY(GraphAddMemFreeNode);
  std::lock_guard lock(mu);
  if (const CUresult r = check_add(out, graph, deps, n)) return r;
  // As the driver documents: the address must be one an allocation node
  // returned (of this graph, or of another: a graph may free what another
  // graph allocated and left live), freed once in this graph.
  if (!graph_block_start(dptr)) return CUDA_ERROR_INVALID_VALUE;
  for (const Node* node : reinterpret_cast<Graph*>(graph)->nodes)
    if (node->work.type == CU_GRAPH_NODE_TYPE_MEM_FREE && node->work.dptr == dptr) return CUDA_ERROR_INVALID_VALUE;
  Work w;
  w.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  w.dptr = dptr;
  *out = reinterpret_cast<CUgraphNode>(add_node(reinterpret_cast<Graph*>(graph), deps, n, std::move(w)));
  return CUDA_SUCCESS;
}

CUresult fake_GraphConditionalHandleCreate(CUgraphConditionalHandle* out, CUgraph graph, CUcontext ctx,
                                           unsigned int default_value, unsigned int flags) {
  FAKE_ENTRY(GraphConditionalHandleCreate);
  std::lock_guard lock(mu);
  if (!out || !alive(graph, Kind::graph) || flags > 1) return CUDA_ERROR_INVALID_VALUE;
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  const CUgraphConditionalHandle h = next_handle++;
  conditionals[h] = {default_value, default_value, flags == 1};
  *out = h;
  return CUDA_SUCCESS;
}

CUresult fake_GraphAddNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n,
                           CUgraphNodeParams* params) {
  FAKE_ENTRY(GraphAddNode);
  std::lock_guard lock(mu);
  if (const CUresult r = check_add(out, graph, deps, n)) return r;
  if (!params || params->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) return CUDA_ERROR_NOT_SUPPORTED;
  CUDA_CONDITIONAL_NODE_PARAMS& c = params->conditional;
  if (!conditionals.count(c.handle) || !c.ctx) return CUDA_ERROR_INVALID_VALUE;
  // The driver's sizes: while 1; if 1, or 2 (then, else) from CUDA 12.8;
  // switch (CUDA 12.8) any from 1. An older driver knows only size 1 of if
  // and while.
  const bool new_kind = c.type == CU_GRAPH_COND_TYPE_SWITCH || (c.type == CU_GRAPH_COND_TYPE_IF && c.size == 2);
  if (new_kind && reported_driver_version() < 12080) return CUDA_ERROR_INVALID_VALUE;
  if (c.type == CU_GRAPH_COND_TYPE_WHILE ? c.size != 1
      : c.type == CU_GRAPH_COND_TYPE_IF  ? c.size != 1 && c.size != 2
      : c.type == CU_GRAPH_COND_TYPE_SWITCH ? c.size == 0 || c.size > 4096  // (the fake's own bound)
                                            : true)
    return CUDA_ERROR_INVALID_VALUE;
  Work w;
  w.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  Node* node = add_node(reinterpret_cast<Graph*>(graph), deps, n, std::move(w));
  node->handle = c.handle;
  node->cond_type = c.type;
  for (unsigned i = 0; i < c.size; ++i) {
    auto* body = new Graph;  // owned by the node, filled through the handle given back
    body->parent = reinterpret_cast<Graph*>(graph);
    live[body] = Kind::graph;  // a handle to add the body's nodes with (not counted: it has a parent)
    node->graphs.push_back(body);
    node->bodies.push_back(reinterpret_cast<CUgraph>(body));
  }
  c.phGraph_out = node->bodies.data();  // as the driver: an array it owns, valid for the node's lifetime
  *out = reinterpret_cast<CUgraphNode>(node);
  return CUDA_SUCCESS;
}
