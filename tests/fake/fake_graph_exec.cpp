// The fake driver's executable graphs: instantiated from a graph (its own
// copy of the nodes), launched against the fake's host-memory model
// (kernels run as in fake_module_launch.cpp, copies and fills move bytes,
// host nodes run on a thread of their own as host functions do), uploaded,
// updated from a graph of the same shape or node by node.
#include "fake_graph.hpp"

#include <algorithm>
#include <cstring>

namespace fake {

namespace {

bool device_range_ok(std::uintptr_t p, bool device, std::size_t bytes) { return !device || in_allocation(p, bytes); }

// Runs one graph's nodes; with `lock` (on mu) held except around host nodes.
CUresult run_graph(const Graph* g, CUstream s, std::unique_lock<std::mutex>& lock, const Exec& exec);

CUresult run_node(const Node* n, CUstream s, std::unique_lock<std::mutex>& lock, const Exec& exec) {
  const Work& w = n->work;
  switch (w.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      if (!alive(w.func, Kind::function)) return CUDA_ERROR_INVALID_HANDLE;  // its module was unloaded
      void* params[64] = {};
      auto* args = const_cast<unsigned char*>(w.args.data());  // read only, by the kernels the fake runs
      for (std::size_t i = 0; i < w.func->params.size() && i < 64; ++i) params[i] = args + w.func->params[i].offset;
      run_launch(reinterpret_cast<CUfunction>(w.func), s, w.grid, w.block, w.shared, w.cluster, w.cooperative, 0,
                 params);
      return CUDA_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      if (!device_range_ok(w.dst, w.dst_device, w.bytes) || !device_range_ok(w.src, w.src_device, w.bytes))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
      if (w.bytes) std::memmove(reinterpret_cast<void*>(w.dst), reinterpret_cast<const void*>(w.src), w.bytes);
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      const std::size_t pitch = w.height > 1 ? w.pitch : w.width * w.element_size;
      for (std::size_t row = 0; row < w.height; ++row) {
        const std::uintptr_t p = w.dst + row * pitch;
        if (!in_allocation(p, w.width * w.element_size)) return CUDA_ERROR_ILLEGAL_ADDRESS;
        for (std::size_t i = 0; i < w.width; ++i) {
          void* at = reinterpret_cast<void*>(p + i * w.element_size);
          if (w.element_size == 1) *static_cast<unsigned char*>(at) = static_cast<unsigned char>(w.value);
          if (w.element_size == 2) *static_cast<unsigned short*>(at) = static_cast<unsigned short>(w.value);
          if (w.element_size == 4) *static_cast<unsigned*>(at) = w.value;
        }
      }
      return CUDA_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_HOST: {
      lock.unlock();
      std::thread([&w] {
        in_host_function = true;
        w.fn(w.data);
      }).join();
      lock.lock();
      ++host_funcs_run;
      return CUDA_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      mark_recorded(w.event);
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
      // As the driver: an allocation still live from the last launch is an
      // error, unless the exec frees it on launch.
      if (!graph_memory_alloc(w.dptr, w.memory->bytes) && !(exec.flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH))
        return CUDA_ERROR_INVALID_VALUE;
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      return graph_memory_free(w.dptr) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_GRAPH_NODE_TYPE_GRAPH:
      return run_graph(n->child(), s, lock, exec);
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: {
      const unsigned value = conditionals[n->handle].value;
      // if: the first body when the value is non-zero, the second (else) when it is zero;
      // switch: body `value`, none when value >= size.
      if (n->cond_type == CU_GRAPH_COND_TYPE_IF) {
        if (value) return run_graph(n->graphs[0], s, lock, exec);
        return n->graphs.size() == 2 ? run_graph(n->graphs[1], s, lock, exec) : CUDA_SUCCESS;
      }
      if (n->cond_type == CU_GRAPH_COND_TYPE_SWITCH)
        return value < n->graphs.size() ? run_graph(n->graphs[value], s, lock, exec) : CUDA_SUCCESS;
      for (long i = 0; conditionals[n->handle].value; ++i) {
        if (i == 1000000) return CUDA_ERROR_LAUNCH_TIMEOUT;  // a while node that never ends
        if (const CUresult r = run_graph(n->child(), s, lock, exec)) return r;
      }
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_SUCCESS;
  }
}

CUresult run_graph(const Graph* g, CUstream s, std::unique_lock<std::mutex>& lock, const Exec& exec) {
  if (g == exec.graph) {
    for (const Node* n : exec.order)
      if (const CUresult r = run_node(n, s, lock, exec)) return r;
    return CUDA_SUCCESS;
  }
  std::vector<Node*> order;
  Node* culprit = nullptr;
  if (!topological(g, order, culprit)) return CUDA_ERROR_INVALID_VALUE;
  for (const Node* n : order)
    if (const CUresult r = run_node(n, s, lock, exec)) return r;
  return CUDA_SUCCESS;
}

// Every conditional handle used by `g` (and the graphs inside it).
void handles_of(const Graph* g, std::set<CUgraphConditionalHandle>& out) {
  for (const Node* n : g->nodes) {
    if (n->work.type == CU_GRAPH_NODE_TYPE_CONDITIONAL) out.insert(n->handle);
    for (const Graph* inner : n->graphs) handles_of(inner, out);
  }
}

}  // namespace

void set_conditional(CUgraphConditionalHandle h, unsigned value) {
  auto it = conditionals.find(h);
  if (it != conditionals.end()) it->second.value = value;
}

}  // namespace fake

using namespace fake;

// --- executable graphs ----------------------------------------------------------

CUresult fake_GraphInstantiateWithParams(CUgraphExec* out, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  FAKE_ENTRY(GraphInstantiateWithParams);
  std::lock_guard lock(mu);
  if (!out || !params || !alive(graph, Kind::graph)) return CUDA_ERROR_INVALID_VALUE;
  // As on the H200 (driver 580): instantiation needs a current context.
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  params->hErrNode_out = nullptr;
  params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
  constexpr unsigned long long known = 1 | 2 | 4 | 8;
  if (params->flags & ~known) return CUDA_ERROR_INVALID_VALUE;
  if ((params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) &&
      (params->flags & ~(CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)))
    return CUDA_ERROR_INVALID_VALUE;
  if (params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
    if (const CUresult r = use_stream(params->hUploadStream)) return r;
  const auto* g = reinterpret_cast<Graph*>(graph);
  std::vector<Node*> order;
  Node* culprit = nullptr;
  if (!topological(g, order, culprit)) {
    params->hErrNode_out = reinterpret_cast<CUgraphNode>(culprit);
    params->result_out = CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE;
    return CUDA_ERROR_INVALID_VALUE;
  }
  // As the driver (measured on the H200, driver 580): a conditional body
  // (and a child graph in one, at any depth) may hold only kernel, empty,
  // memset, memcpy, child graph and conditional nodes. cuGraphAddNode and
  // the other add calls accept any node there; instantiation refuses the
  // graph with a bare CUDA_ERROR_INVALID_VALUE.
  std::function<bool(const Graph*, bool)> allowed = [&](const Graph* body, bool in_body) {
    for (const Node* n : body->nodes) {
      const CUgraphNodeType t = n->work.type;
      if (in_body && t != CU_GRAPH_NODE_TYPE_KERNEL && t != CU_GRAPH_NODE_TYPE_EMPTY && t != CU_GRAPH_NODE_TYPE_MEMSET &&
          t != CU_GRAPH_NODE_TYPE_MEMCPY && t != CU_GRAPH_NODE_TYPE_GRAPH && t != CU_GRAPH_NODE_TYPE_CONDITIONAL)
        return false;
      for (const Graph* inner : n->graphs)
        if (!allowed(inner, in_body || t == CU_GRAPH_NODE_TYPE_CONDITIONAL)) return false;
    }
    return true;
  };
  if (!allowed(g, false)) return CUDA_ERROR_INVALID_VALUE;
  if (has_memory_nodes(g))
    for (const auto& [p, kind] : live)
      if (kind == Kind::graph_exec && static_cast<const Exec*>(p)->source == g) return CUDA_ERROR_NOT_SUPPORTED;
  // Kernels of more than one context cannot be in one exec.
  CUcontext ctx = nullptr;
  for (Node* n : g->nodes) {
    if (n->work.type != CU_GRAPH_NODE_TYPE_KERNEL) continue;
    const CUcontext c = n->work.func->module->ctx;
    if (ctx && c != ctx) {
      params->hErrNode_out = reinterpret_cast<CUgraphNode>(n);
      params->result_out = CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED;
      return CUDA_ERROR_INVALID_VALUE;
    }
    ctx = c;
  }
  auto* e = new Exec{};
  e->flags = params->flags;
  e->graph = copy_graph(g, e->from_graph, false);
  e->source = g;
  e->sources.assign(g->nodes.begin(), g->nodes.end());
  topological(e->graph, e->order, culprit);
  std::set<CUgraphConditionalHandle> handles;
  handles_of(e->graph, handles);
  e->handles.assign(handles.begin(), handles.end());
  live[e] = Kind::graph_exec;
  params->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  *out = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}

CUresult fake_GraphExecDestroy(CUgraphExec exec) {
  FAKE_ENTRY(GraphExecDestroy);
  std::unique_lock lock(mu);
  Unlocked later{lock};
  if (!alive(exec, Kind::graph_exec)) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto* e = reinterpret_cast<Exec*>(exec);
  live.erase(e);
  destroy_graph(e->graph);
  delete e;
  return CUDA_SUCCESS;
}

CUresult fake_GraphLaunch(CUgraphExec exec, CUstream s) {
  FAKE_ENTRY(GraphLaunch);
  std::unique_lock lock(mu);
  Unlocked later{lock};
  if (!alive(exec, Kind::graph_exec)) return CUDA_ERROR_INVALID_HANDLE;
  if (const CUresult r = use_stream(s)) return r;
  if (capturing(s)) return CUDA_ERROR_NOT_SUPPORTED;  // the fake does not capture graph launches
  auto* e = reinterpret_cast<Exec*>(exec);
  for (CUgraphConditionalHandle h : e->handles)
    if (conditionals[h].assign_default) conditionals[h].value = conditionals[h].default_value;
  e->launched = true;
  return run_graph(e->graph, s, lock, *e);
}

CUresult fake_GraphUpload(CUgraphExec exec, CUstream s) {
  FAKE_ENTRY(GraphUpload);
  std::lock_guard lock(mu);
  if (!alive(exec, Kind::graph_exec)) return CUDA_ERROR_INVALID_HANDLE;
  return use_stream(s);
}

// Copies `from`'s parameters into `to` (a node of an exec's copy).
static void take_params(Node* to, const Node* from) {
  Graph* owner = to->owner;
  std::vector<Node*> deps = to->deps;
  to->work = from->work;
  to->handle = from->handle;
  to->cond_type = from->cond_type;
  to->owner = owner;
  to->deps = std::move(deps);
}

CUresult fake_GraphExecUpdate(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo* info) {
  FAKE_ENTRY(GraphExecUpdate);
  std::unique_lock lock(mu);
  Unlocked later{lock};
  if (!info || !alive(exec, Kind::graph_exec) || !alive(graph, Kind::graph)) return CUDA_ERROR_INVALID_VALUE;
  auto* e = reinterpret_cast<Exec*>(exec);
  const auto* g = reinterpret_cast<Graph*>(graph);
  const auto& mine = e->graph->nodes;
  auto refuse = [&](CUgraphExecUpdateResult why, const Node* node, std::size_t i) {
    info->result = why;
    info->errorNode = reinterpret_cast<CUgraphNode>(const_cast<Node*>(node));
    info->errorFromNode = i < e->sources.size() ? reinterpret_cast<CUgraphNode>(const_cast<Node*>(e->sources[i]))
                                                : nullptr;
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  };
  info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  info->errorNode = info->errorFromNode = nullptr;
  if (g->nodes.size() != mine.size())
    return refuse(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, g->nodes.empty() ? nullptr : g->nodes.back(),
                  mine.size());
  std::unordered_map<const Node*, std::size_t> gi, mi;
  for (std::size_t i = 0; i < mine.size(); ++i) gi[g->nodes[i]] = i, mi[mine[i]] = i;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const Node* a = g->nodes[i];
    const Node* b = mine[i];
    if (a->work.type != b->work.type) return refuse(CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED, a, i);
    std::vector<std::size_t> da, db;
    for (const Node* d : a->deps) da.push_back(gi[d]);
    for (const Node* d : b->deps) db.push_back(mi[d]);
    std::sort(da.begin(), da.end());
    std::sort(db.begin(), db.end());
    if (da != db) return refuse(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, a, i);
    if (a->work.type == CU_GRAPH_NODE_TYPE_KERNEL && a->work.func->module->ctx != b->work.func->module->ctx)
      return refuse(CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE, a, i);
    if (a->work.type == CU_GRAPH_NODE_TYPE_MEMCPY &&
        (a->work.src_device != b->work.src_device || a->work.dst_device != b->work.dst_device))
      return refuse(CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED, a, i);
    if ((a->work.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || a->work.type == CU_GRAPH_NODE_TYPE_MEM_FREE ||
         a->work.type == CU_GRAPH_NODE_TYPE_GRAPH || a->work.type == CU_GRAPH_NODE_TYPE_CONDITIONAL) &&
        a != e->sources[i])
      return refuse(CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED, a, i);
  }
  for (std::size_t i = 0; i < mine.size(); ++i) {
    if (mine[i]->work.type != CU_GRAPH_NODE_TYPE_GRAPH && mine[i]->work.type != CU_GRAPH_NODE_TYPE_CONDITIONAL)
      take_params(mine[i], g->nodes[i]);
  }
  // As the H200's driver: the per-node setters still take the nodes of the
  // graph the exec was instantiated from, not those of `graph` (refused
  // there with CUDA_ERROR_INVALID_VALUE).
  // As the driver: the exec now holds the new graph's user objects instead of the old ones.
  std::map<UserObject*, long> old = std::move(e->graph->user_refs);
  e->graph->user_refs.clear();
  for (auto& [u, refs] : g->user_refs) {
    u->refs += refs;
    e->graph->user_refs[u] += refs;
  }
  for (auto& [u, refs] : old) release(u, refs);
  return CUDA_SUCCESS;
}

// The exec's node for a node of the graph it was made from (or updated from).
static Node* exec_node(CUgraphExec exec, CUgraphNode node, CUgraphNodeType type) {
  if (!alive(exec, Kind::graph_exec)) return nullptr;
  auto* e = reinterpret_cast<Exec*>(exec);
  auto it = e->from_graph.find(reinterpret_cast<Node*>(node));
  if (it == e->from_graph.end() || it->second->work.type != type) return nullptr;
  return it->second;
}

CUresult fake_GraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2* p) {
  FAKE_ENTRY(GraphExecKernelNodeSetParams);
  std::lock_guard lock(mu);
  Node* n = exec_node(exec, node, CU_GRAPH_NODE_TYPE_KERNEL);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  Work w;
  if (const CUresult r = kernel_work(p, w)) return r;
  if (w.func->module->ctx != n->work.func->module->ctx) return CUDA_ERROR_INVALID_VALUE;
  n->work = std::move(w);
  return CUDA_SUCCESS;
}

// A copy or memset node's new parameters, made by `make`; `same_kind` says
// whether they may replace the node's (as the driver: the kinds of memory,
// or the element size, stay).
template <class Params, class Make, class Same>
static CUresult set_node(CUgraphExec exec, CUgraphNode node, CUgraphNodeType type, const Params* p, CUcontext ctx,
                         Make make, Same same_kind) {
  std::lock_guard lock(mu);
  Node* n = exec_node(exec, node, type);
  if (!n || !ctx) return CUDA_ERROR_INVALID_VALUE;
  Work w;
  if (const CUresult r = make(p, w)) return r;
  if (!same_kind(w, n->work)) return CUDA_ERROR_INVALID_VALUE;
  n->work = std::move(w);
  return CUDA_SUCCESS;
}

CUresult fake_GraphExecMemcpyNodeSetParams(CUgraphExec exec, CUgraphNode node, const CUDA_MEMCPY3D* p, CUcontext ctx) {
  FAKE_ENTRY(GraphExecMemcpyNodeSetParams);
  return set_node(exec, node, CU_GRAPH_NODE_TYPE_MEMCPY, p, ctx, memcpy_work, [](const Work& a, const Work& b) {
    return a.src_device == b.src_device && a.dst_device == b.dst_device;
  });
}

CUresult fake_GraphExecMemsetNodeSetParams(CUgraphExec exec, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* p,
                                           CUcontext ctx) {
  FAKE_ENTRY(GraphExecMemsetNodeSetParams);
  return set_node(exec, node, CU_GRAPH_NODE_TYPE_MEMSET, p, ctx, memset_work,
                  [](const Work& a, const Work& b) { return a.element_size == b.element_size; });
}
