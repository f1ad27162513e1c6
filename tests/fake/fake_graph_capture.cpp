// The fake driver's stream capture: the work enqueued on a capturing stream
// (and on the streams that join it through events) becomes nodes of the
// capture's graph (a new one, or the caller's, after given nodes); the calls
// a capture forbids invalidate it; the capture's dependencies and their
// edge data, read and changed while it runs.
#include "fake_graph.hpp"

namespace fake {

namespace {

void end_capture(Capture* c) {
  for (auto it = stream_captures.begin(); it != stream_captures.end();)
    it = it->second.capture == c ? stream_captures.erase(it) : std::next(it);
  for (auto it = captured_records.begin(); it != captured_records.end();)
    it = it->second.capture == c ? captured_records.erase(it) : std::next(it);
  captures.erase(c);
  delete c;
}

// Whether every node in `tails` is `heads` or an ancestor of one of them.
bool joined(const std::vector<Node*>& tails, const std::vector<Node*>& heads) {
  std::set<const Node*> seen;
  std::vector<const Node*> todo(heads.begin(), heads.end());
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    if (!seen.insert(n).second) continue;
    for (const Node* d : n->deps) todo.push_back(d);
  }
  for (const Node* t : tails)
    if (!seen.count(t)) return false;
  return true;
}

// Checks dependencies given to a capture (cuStreamBeginCaptureToGraph,
// cuStreamUpdateCaptureDependencies): live nodes of `g`, none twice, and
// their edge data (when given) as the driver documents it: to_port and the
// reserved bytes 0; from_port a kernel node's port (0 on other nodes); type
// programmatic only from a kernel's programmatic or launch-order port.
CUresult check_capture_deps(const Graph* g, const CUgraphNode* deps, const CUgraphEdgeData* edges, std::size_t n) {
  if (n && !deps) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t i = 0; i < n; ++i) {
    if (!alive(deps[i], Kind::node) || reinterpret_cast<Node*>(deps[i])->owner != g) return CUDA_ERROR_INVALID_VALUE;
    for (std::size_t j = 0; j < i; ++j)
      if (deps[j] == deps[i]) return CUDA_ERROR_INVALID_VALUE;
    if (!edges) continue;
    const CUgraphEdgeData& e = edges[i];
    for (unsigned char r : e.reserved)
      if (r) return CUDA_ERROR_INVALID_VALUE;
    const bool kernel = reinterpret_cast<Node*>(deps[i])->work.type == CU_GRAPH_NODE_TYPE_KERNEL;
    if (e.to_port != 0 || e.from_port > graph_kernel_node_port_launch_order || (e.from_port && !kernel) ||
        e.type > CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC)
      return CUDA_ERROR_INVALID_VALUE;
    if (e.type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC && e.from_port == graph_kernel_node_port_default)
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// The edge data of `n` dependencies: `edges`, or all default.
std::vector<CUgraphEdgeData> edge_list(const CUgraphEdgeData* edges, std::size_t n) {
  return edges ? std::vector<CUgraphEdgeData>(edges, edges + n) : std::vector<CUgraphEdgeData>(n);
}

}  // namespace

void stream_destroyed(CUstream s) {
  auto it = stream_captures.find(s);
  if (it == stream_captures.end()) return;
  Capture* c = it->second.capture;
  if (c->origin != s) {
    stream_captures.erase(it);
    c->invalidated = true;
    return;
  }
  Graph* g = c->graph;
  const bool theirs = c->into;
  end_capture(c);
  if (!theirs) destroy_graph(g);
}

void finish_unlocked(std::unique_lock<std::mutex>& lock) { Unlocked later{lock}; }

bool capturing(CUstream s) { return stream_captures.count(s) != 0; }

CUresult capture_work(CUstream s, Work&& w, bool& captured) {
  auto it = stream_captures.find(s);
  if (it == stream_captures.end()) return CUDA_SUCCESS;
  captured = true;
  StreamCapture& sc = it->second;
  if (sc.capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  std::vector<CUgraphNode> deps;
  for (Node* d : sc.deps) deps.push_back(reinterpret_cast<CUgraphNode>(d));
  Node* n = add_node(sc.capture->graph, deps.data(), deps.size(), std::move(w));
  // (The edge data of the node's dependencies is not kept on the node: the
  // fake's edges are plain.)
  sc.deps = {n};
  sc.edges = {CUgraphEdgeData{}};
  return CUDA_SUCCESS;
}

CUresult capture_alloc(CUstream s, std::size_t bytes, CUdeviceptr& out) {
  Work w;
  w.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  w.memory = std::make_shared<Block>(bytes);
  w.dptr = reinterpret_cast<std::uintptr_t>(w.memory->mem);
  const CUdeviceptr at = w.dptr;
  bool captured = false;
  const CUresult r = capture_work(s, std::move(w), captured);
  if (!r) out = at;
  return r;
}

CUresult capture_forbids_sync(CUstream s) {
  auto it = stream_captures.find(s);
  if (it == stream_captures.end()) return CUDA_SUCCESS;
  it->second.capture->invalidated = true;
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

// The calling thread's capture interaction mode (cuThreadExchangeStreamCaptureMode).
FAKE_TLS CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

CUresult capture_forbids_unsafe() {
  CUresult r = CUDA_SUCCESS;
  if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return r;
  for (Capture* c : captures) {
    if (thread_mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && c->thread != std::this_thread::get_id()) continue;
    const bool applies = c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
                         (c->mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && c->thread == std::this_thread::get_id());
    if (!applies) continue;
    c->invalidated = true;
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return r;
}

CUresult capture_forbids_legacy(CUcontext ctx) {
  CUresult r = CUDA_SUCCESS;
  for (auto& [s, sc] : stream_captures)
    if (blocking_stream(s) && stream_context(s) == ctx) {
      sc.capture->invalidated = true;
      r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
  return r;
}

bool capture_record(CUevent e, CUstream s) {
  auto it = stream_captures.find(s);
  if (it == stream_captures.end()) {
    captured_records.erase(e);
    return false;
  }
  captured_records[e] = {it->second.capture, it->second.deps, it->second.edges};
  return true;
}

CUresult capture_wait(CUstream s, CUevent e, bool& captured) {
  auto rec = captured_records.find(e);
  if (rec == captured_records.end()) return CUDA_SUCCESS;
  captured = true;
  Capture* c = rec->second.capture;
  if (c->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  auto it = stream_captures.find(s);
  if (it == stream_captures.end()) {
    stream_captures[s] = {c, rec->second.deps, rec->second.edges};  // s joins the capture (a fork)
    return CUDA_SUCCESS;
  }
  if (it->second.capture != c) return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  for (std::size_t i = 0; i < rec->second.deps.size(); ++i)
    if (std::find(it->second.deps.begin(), it->second.deps.end(), rec->second.deps[i]) == it->second.deps.end()) {
      it->second.deps.push_back(rec->second.deps[i]);
      it->second.edges.push_back(rec->second.edges[i]);
    }
  return CUDA_SUCCESS;
}

}  // namespace fake

using namespace fake;

// --- capture ----------------------------------------------------------------------

CUresult fake_StreamBeginCapture(CUstream s, CUstreamCaptureMode mode) {
  FAKE_ENTRY(StreamBeginCapture);
  std::lock_guard lock(mu);
  if (reinterpret_cast<std::uintptr_t>(s) <= 2) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!alive(s, Kind::stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  if (capturing(s)) return CUDA_ERROR_ILLEGAL_STATE;
  auto* c = new Capture{new_graph(), s, mode, std::this_thread::get_id(), next_capture_id++};
  captures.insert(c);
  stream_captures[s] = {c, {}, {}};
  return CUDA_SUCCESS;
}

CUresult fake_StreamBeginCaptureToGraph(CUstream s, CUgraph graph, const CUgraphNode* deps,
                                        const CUgraphEdgeData* edges, std::size_t n, CUstreamCaptureMode mode) {
  FAKE_ENTRY(StreamBeginCaptureToGraph);
  std::lock_guard lock(mu);
  if (reinterpret_cast<std::uintptr_t>(s) == 1) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // CU_STREAM_LEGACY
  if (reinterpret_cast<std::uintptr_t>(s) > 2 && !alive(s, Kind::stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (!s) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  if (!alive(graph, Kind::graph)) return CUDA_ERROR_INVALID_VALUE;
  auto* g = reinterpret_cast<Graph*>(graph);
  if (const CUresult r = check_capture_deps(g, deps, edges, n)) return r;
  if (capturing(s)) return CUDA_ERROR_ILLEGAL_STATE;
  for (const Capture* other : captures)
    if (other->graph == g) return CUDA_ERROR_ILLEGAL_STATE;  // one capture into a graph at a time
  auto* c = new Capture{g, s, mode, std::this_thread::get_id(), next_capture_id++};
  c->into = true;
  captures.insert(c);
  stream_captures[s] = {c, std::vector<Node*>(reinterpret_cast<Node* const*>(deps), reinterpret_cast<Node* const*>(deps) + n),
                        edge_list(edges, n)};
  return CUDA_SUCCESS;
}

CUresult fake_StreamEndCapture(CUstream s, CUgraph* out) {
  FAKE_ENTRY(StreamEndCapture);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  std::unique_lock lock(mu);
  Unlocked later{lock};
  auto it = stream_captures.find(s);
  if (it == stream_captures.end()) return CUDA_ERROR_ILLEGAL_STATE;
  Capture* c = it->second.capture;
  if (c->origin != s) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && c->thread != std::this_thread::get_id())
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  CUresult r = c->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
  if (!r)
    for (auto& [other, sc] : stream_captures)
      if (sc.capture == c && other != s && !joined(sc.deps, it->second.deps)) r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  Graph* g = c->graph;
  const bool theirs = c->into;
  end_capture(c);
  if (r) {
    // The capture's graph is destroyed, also a graph of the caller's that it
    // captured into (driver 580 does: seen on the H100, where that graph's
    // handle is invalid afterwards).
    (void)theirs;
    destroy_graph(g);
    *out = nullptr;
    return r;
  }
  // Into a graph of the caller's: that graph again (its ownership unchanged).
  *out = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}

CUresult fake_ThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  FAKE_ENTRY(ThreadExchangeStreamCaptureMode);
  if (!mode || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                *mode != CU_STREAM_CAPTURE_MODE_RELAXED))
    return CUDA_ERROR_INVALID_VALUE;
  const CUstreamCaptureMode previous = thread_mode;
  thread_mode = *mode;
  *mode = previous;
  return CUDA_SUCCESS;
}

CUresult fake_StreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  FAKE_ENTRY(StreamIsCapturing);
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (reinterpret_cast<std::uintptr_t>(s) > 2 && !alive(s, Kind::stream)) return CUDA_ERROR_INVALID_HANDLE;
  auto it = stream_captures.find(s);
  *status = it == stream_captures.end()           ? CU_STREAM_CAPTURE_STATUS_NONE
            : it->second.capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                              : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}

CUresult fake_StreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                                   const CUgraphNode** deps, const CUgraphEdgeData** edges, std::size_t* count) {
  FAKE_ENTRY(StreamGetCaptureInfo);
  // As documented: the status is required, and edge data only with the dependencies.
  if (!status || (edges && !deps)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (reinterpret_cast<std::uintptr_t>(s) > 2 && !alive(s, Kind::stream)) return CUDA_ERROR_INVALID_HANDLE;
  auto it = stream_captures.find(s);
  if (it == stream_captures.end()) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  }
  const StreamCapture& sc = it->second;
  const Capture* c = sc.capture;
  *status = c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (c->invalidated) return CUDA_SUCCESS;  // (nothing else is valid then)
  // Dependencies asked without their edge data, when some is not the
  // default, would lose it: the driver refuses (CUDA_ERROR_LOSSY_QUERY).
  if (deps && !edges)
    for (const CUgraphEdgeData& e : sc.edges)
      if (e.from_port || e.to_port || e.type) return CUDA_ERROR_LOSSY_QUERY;
  if (id) *id = c->id;
  if (graph) *graph = reinterpret_cast<CUgraph>(c->graph);
  if (deps) *deps = reinterpret_cast<const CUgraphNode*>(sc.deps.data());
  if (edges) *edges = sc.edges.data();
  if (count) *count = sc.deps.size();
  return CUDA_SUCCESS;
}

CUresult fake_StreamUpdateCaptureDependencies(CUstream s, CUgraphNode* deps, const CUgraphEdgeData* edges,
                                              std::size_t n, unsigned int flags) {
  FAKE_ENTRY(StreamUpdateCaptureDependencies);
  if (flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES && flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES)
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (reinterpret_cast<std::uintptr_t>(s) > 2 && !alive(s, Kind::stream)) return CUDA_ERROR_INVALID_HANDLE;
  auto it = stream_captures.find(s);
  if (it == stream_captures.end()) return CUDA_ERROR_ILLEGAL_STATE;
  StreamCapture& sc = it->second;
  if (sc.capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if (const CUresult r = check_capture_deps(sc.capture->graph, deps, edges, n)) return r;
  const std::vector<CUgraphEdgeData> data = edge_list(edges, n);
  if (flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES) {
    sc.deps.clear();
    sc.edges.clear();
  }
  for (std::size_t i = 0; i < n; ++i) {
    auto* d = reinterpret_cast<Node*>(deps[i]);
    const auto at = std::find(sc.deps.begin(), sc.deps.end(), d);
    if (at == sc.deps.end()) {
      sc.deps.push_back(d);
      sc.edges.push_back(data[i]);
    } else {
      sc.edges[static_cast<std::size_t>(at - sc.deps.begin())] = data[i];  // added again: its new edge data
    }
  }
  return CUDA_SUCCESS;
}
