// The fake driver's graphs: stream capture, graphs built node by node,
// executable graphs that replay their nodes against the fake's host-memory
// model (kernels run as in fake_module_launch.cpp, copies and fills move
// bytes, host nodes run on a thread of their own as host functions do),
// updates, conditional nodes, user objects and a DOT picture.
#include "fake_state.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fake {

struct Block {
  void* mem = nullptr;
  std::size_t bytes = 0;
  explicit Block(std::size_t n) : mem(std::calloc(n ? n : 1, 1)), bytes(n) {
    graph_memory_reserve(reinterpret_cast<std::uintptr_t>(mem), n);
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block() {
    graph_memory_forget(reinterpret_cast<std::uintptr_t>(mem));
    std::free(mem);
  }
};

namespace {

struct Graph;

struct UserObject {
  void* ptr;
  CUhostFn destroy;
  long refs;
};

struct Node {
  Graph* owner = nullptr;
  Work work;
  std::vector<Node*> deps;
  Graph* child = nullptr;  // a child graph's (owned) copy, or a conditional node's body
  CUgraphConditionalHandle handle = 0;
  CUgraphConditionalNodeType cond_type = CU_GRAPH_COND_TYPE_IF;
  CUgraph bodies[1] = {};  // what a conditional node's phGraph_out points at (the driver's array)
};

struct Graph {
  std::vector<Node*> nodes;               // in creation order
  std::map<UserObject*, long> user_refs;  // references this graph holds
  Graph* parent = nullptr;                // a body or child graph's parent (not a live handle of its own)
};

struct Cond {
  unsigned value = 0;
  unsigned default_value = 0;
  bool assign_default = false;
};

struct Exec {
  Graph* graph = nullptr;                             // the exec's own copy
  const Graph* source = nullptr;                      // the graph it was made from, while that lives
  std::unordered_map<const Node*, Node*> from_graph;  // the source graph's nodes -> the copy's
  std::vector<const Node*> sources;                   // the source graph's nodes, in order
  unsigned long long flags = 0;
  bool launched = false;
  // Worked out once, so that a launch allocates nothing (as the driver's, for the hot-path test):
  std::vector<Node*> order;                           // the copy's nodes, dependencies first
  std::vector<CUgraphConditionalHandle> handles;      // the conditional handles its nodes use
};

struct Capture {
  Graph* graph;
  CUstream origin;
  CUstreamCaptureMode mode;
  std::thread::id thread;
  unsigned long long id;
  bool invalidated = false;
};

struct StreamCapture {
  Capture* capture;
  std::vector<Node*> deps;  // the stream's current tail in the capture graph
};

struct CapturedRecord {
  Capture* capture;
  std::vector<Node*> deps;
};

std::unordered_map<CUstream, StreamCapture> stream_captures;
std::unordered_map<CUevent, CapturedRecord> captured_records;
std::unordered_map<CUgraphConditionalHandle, Cond> conditionals;
std::set<Capture*> captures;
unsigned long long next_capture_id = 1;
CUgraphConditionalHandle next_handle = 0x100;

// User objects whose last reference went: their destructors run (on a
// thread of the driver's, as the driver does) once `mu` is released.
std::vector<UserObject*> dying;

void release(UserObject* u, long n) {
  u->refs -= n;
  if (u->refs <= 0) {
    live.erase(u);
    dying.push_back(u);
  }
}

// Runs the destructors of `dying`; called without `mu`.
void run_dying(std::vector<UserObject*> list) {
  for (UserObject* u : list) {
    std::thread([u] {
      in_host_function = true;
      u->destroy(u->ptr);
    }).join();
    delete u;
  }
}

// Destructors held back (fake_hold_user_object_destructors).
bool hold_destructors = false;
std::vector<UserObject*> held_back;

struct Unlocked {
  // Releases mu, then runs the destructors that became due under it.
  std::unique_lock<std::mutex>& lock;
  ~Unlocked() {
    std::vector<UserObject*> list;
    list.swap(dying);
    if (hold_destructors) {
      held_back.insert(held_back.end(), list.begin(), list.end());
      list.clear();
    }
    lock.unlock();
    run_dying(std::move(list));
  }
};

Graph* new_graph() {
  auto* g = new Graph;
  live[g] = Kind::graph;
  return g;
}

void destroy_graph(Graph* g) {
  for (Node* n : g->nodes) {
    if (n->child) destroy_graph(n->child);
    live.erase(n);
    delete n;
  }
  for (auto& [u, refs] : g->user_refs) release(u, refs);
  live.erase(g);
  delete g;
}

Node* add_node(Graph* g, const CUgraphNode* deps, std::size_t n, Work&& w) {
  auto* node = new Node;
  node->owner = g;
  node->work = std::move(w);
  for (std::size_t i = 0; i < n; ++i) node->deps.push_back(reinterpret_cast<Node*>(deps[i]));
  g->nodes.push_back(node);
  live[node] = Kind::node;
  return node;
}

// Checks the handles a new node is given.
CUresult check_add(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!alive(graph, Kind::graph)) return CUDA_ERROR_INVALID_VALUE;
  if (n && !deps) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t i = 0; i < n; ++i) {
    if (!alive(deps[i], Kind::node)) return CUDA_ERROR_INVALID_VALUE;
    if (reinterpret_cast<Node*>(deps[i])->owner != reinterpret_cast<Graph*>(graph)) return CUDA_ERROR_INVALID_VALUE;
    for (std::size_t j = 0; j < i; ++j)
      if (deps[j] == deps[i]) return CUDA_ERROR_INVALID_VALUE;  // as the driver: no duplicate dependency
  }
  return CUDA_SUCCESS;
}

// A deep copy of `g`; `map` receives each node's copy. The copy holds its
// own references to g's user objects.
Graph* copy_graph(const Graph* g, std::unordered_map<const Node*, Node*>& map, bool live_handle) {
  auto* c = new Graph;
  if (live_handle) live[c] = Kind::graph;
  for (const Node* n : g->nodes) {
    auto* m = new Node(*n);
    m->owner = c;
    if (n->child) {
      std::unordered_map<const Node*, Node*> inner;
      m->child = copy_graph(n->child, inner, false);
      m->child->parent = c;
    }
    map[n] = m;
    live[m] = Kind::node;
    c->nodes.push_back(m);
  }
  for (Node* m : c->nodes)
    for (Node*& d : m->deps) d = map[d];
  for (auto& [u, refs] : g->user_refs) {
    u->refs += refs;
    c->user_refs[u] += refs;
  }
  return c;
}

// The nodes of `g` in an order that respects every dependency; false when
// there is a cycle (`culprit`: a node on it).
bool topological(const Graph* g, std::vector<Node*>& order, Node*& culprit) {
  std::unordered_map<const Node*, int> state;  // 0 new, 1 visiting, 2 done
  std::function<bool(Node*)> visit = [&](Node* n) {
    if (state[n] == 2) return true;
    if (state[n] == 1) {
      culprit = n;
      return false;
    }
    state[n] = 1;
    for (Node* d : n->deps)
      if (!visit(d)) return false;
    state[n] = 2;
    order.push_back(n);
    return true;
  };
  for (Node* n : g->nodes)
    if (!visit(n)) return false;
  return true;
}

const char* type_name(CUgraphNodeType t) {
  switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return "KERNEL";
    case CU_GRAPH_NODE_TYPE_MEMCPY: return "MEMCPY";
    case CU_GRAPH_NODE_TYPE_MEMSET: return "MEMSET";
    case CU_GRAPH_NODE_TYPE_HOST: return "HOST";
    case CU_GRAPH_NODE_TYPE_GRAPH: return "GRAPH";
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return "WAIT_EVENT";
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "EVENT_RECORD";
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return "MEM_ALLOC";
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return "MEM_FREE";
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return "CONDITIONAL";
    default: return "EMPTY";
  }
}

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
      return run_graph(n->child, s, lock, exec);
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: {
      if (n->cond_type == CU_GRAPH_COND_TYPE_IF) {
        if (conditionals[n->handle].value) return run_graph(n->child, s, lock, exec);
        return CUDA_SUCCESS;
      }
      for (long i = 0; conditionals[n->handle].value; ++i) {
        if (i == 1000000) return CUDA_ERROR_LAUNCH_TIMEOUT;  // a while node that never ends
        if (const CUresult r = run_graph(n->child, s, lock, exec)) return r;
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
    if (n->child) handles_of(n->child, out);
  }
}

// --- capture ------------------------------------------------------------------

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
  end_capture(c);
  destroy_graph(g);
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
  sc.deps = {n};
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
thread_local CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

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
  captured_records[e] = {it->second.capture, it->second.deps};
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
    stream_captures[s] = {c, rec->second.deps};  // s joins the capture (a fork)
    return CUDA_SUCCESS;
  }
  if (it->second.capture != c) return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  for (Node* d : rec->second.deps)
    if (std::find(it->second.deps.begin(), it->second.deps.end(), d) == it->second.deps.end())
      it->second.deps.push_back(d);
  return CUDA_SUCCESS;
}

void set_conditional(CUgraphConditionalHandle h, unsigned value) {
  auto it = conditionals.find(h);
  if (it != conditionals.end()) it->second.value = value;
}

// Graphs of the user's: a body or child graph (with a parent) is its node's.
long live_graph() {
  long n = 0;
  for (auto& [h, k] : live) n += k == Kind::graph && !static_cast<const Graph*>(h)->parent;
  return n;
}
long live_graph_exec() { return count_live(Kind::graph_exec); }
// User objects with a reference that no graph or exec holds: the user's own
// (a graph's, or an exec's, go with it, also when its destroy is refused).
long live_user_object() {
  std::map<const UserObject*, long> held;
  std::function<void(const Graph*)> count = [&](const Graph* g) {
    for (auto& [u, refs] : g->user_refs) held[u] += refs;
    for (const Node* n : g->nodes)
      if (n->child && n->work.type == CU_GRAPH_NODE_TYPE_GRAPH) count(n->child);  // a child's copy (bodies are live graphs)
  };
  for (auto& [h, k] : live) {
    if (k == Kind::graph) count(static_cast<const Graph*>(h));
    if (k == Kind::graph_exec) count(static_cast<const Exec*>(h)->graph);
  }
  long n = 0;
  for (auto& [h, k] : live)
    if (k == Kind::user_object) n += static_cast<const UserObject*>(h)->refs > held[static_cast<const UserObject*>(h)];
  return n;
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
  stream_captures[s] = {c, {}};
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
  end_capture(c);
  if (r) {
    destroy_graph(g);
    *out = nullptr;
    return r;
  }
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
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (reinterpret_cast<std::uintptr_t>(s) > 2 && !alive(s, Kind::stream)) return CUDA_ERROR_INVALID_HANDLE;
  auto it = stream_captures.find(s);
  if (it == stream_captures.end()) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  }
  const Capture* c = it->second.capture;
  *status = c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (id) *id = c->id;
  if (graph) *graph = reinterpret_cast<CUgraph>(c->graph);
  if (deps) *deps = reinterpret_cast<const CUgraphNode*>(it->second.deps.data());
  if (edges) *edges = nullptr;
  if (count) *count = it->second.deps.size();
  return CUDA_SUCCESS;
}

// --- graphs ----------------------------------------------------------------------

CUresult fake_GraphCreate(CUgraph* out, unsigned int flags) {
  FAKE_ENTRY(GraphCreate);
  if (!out || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  *out = reinterpret_cast<CUgraph>(new_graph());
  return CUDA_SUCCESS;
}

CUresult fake_GraphDestroy(CUgraph graph) {
  FAKE_ENTRY(GraphDestroy);
  std::unique_lock lock(mu);
  Unlocked later{lock};
  if (!alive(graph, Kind::graph) || reinterpret_cast<Graph*>(graph)->parent) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (auto& [p, kind] : live)
    if (kind == Kind::graph_exec && static_cast<Exec*>(const_cast<void*>(p))->source == reinterpret_cast<Graph*>(graph))
      static_cast<Exec*>(const_cast<void*>(p))->source = nullptr;
  destroy_graph(reinterpret_cast<Graph*>(graph));
  return CUDA_SUCCESS;
}

// Whether `g` (or a child graph in it) holds a memory allocation or free
// node. As on the H200 (driver 580.159.04): such a graph cannot be cloned,
// added as a child graph, or instantiated while an exec of it lives; each
// call returns CUDA_ERROR_NOT_SUPPORTED.
static bool has_memory_nodes(const Graph* g) {
  for (const Node* n : g->nodes)
    if (n->work.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || n->work.type == CU_GRAPH_NODE_TYPE_MEM_FREE ||
        (n->work.type == CU_GRAPH_NODE_TYPE_GRAPH && n->child && has_memory_nodes(n->child)))
      return true;
  return false;
}

CUresult fake_GraphClone(CUgraph* out, CUgraph original) {
  FAKE_ENTRY(GraphClone);
  std::lock_guard lock(mu);
  if (!out || !alive(original, Kind::graph)) return CUDA_ERROR_INVALID_VALUE;
  if (has_memory_nodes(reinterpret_cast<Graph*>(original))) return CUDA_ERROR_NOT_SUPPORTED;
  std::unordered_map<const Node*, Node*> map;
  *out = reinterpret_cast<CUgraph>(copy_graph(reinterpret_cast<Graph*>(original), map, true));
  return CUDA_SUCCESS;
}

CUresult fake_GraphGetNodes(CUgraph graph, CUgraphNode* nodes, std::size_t* count) {
  FAKE_ENTRY(GraphGetNodes);
  std::lock_guard lock(mu);
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  // A live graph, or a child graph node's copy (what cuGraphChildGraphNodeGetGraph gives).
  bool known = alive(graph, Kind::graph);
  for (auto it = live.begin(); !known && it != live.end(); ++it)
    known = it->second == Kind::node && static_cast<const Node*>(it->first)->work.type == CU_GRAPH_NODE_TYPE_GRAPH &&
            static_cast<const Node*>(it->first)->child == reinterpret_cast<Graph*>(graph);
  if (!known) return CUDA_ERROR_INVALID_VALUE;
  const auto& all = reinterpret_cast<Graph*>(graph)->nodes;
  if (nodes)
    for (std::size_t i = 0; i < *count && i < all.size(); ++i) nodes[i] = reinterpret_cast<CUgraphNode>(all[i]);
  *count = all.size();
  return CUDA_SUCCESS;
}

CUresult fake_GraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  FAKE_ENTRY(GraphNodeGetType);
  std::lock_guard lock(mu);
  if (!type || !alive(node, Kind::node)) return CUDA_ERROR_INVALID_VALUE;
  *type = reinterpret_cast<Node*>(node)->work.type;
  return CUDA_SUCCESS;
}

// A node's dependencies or dependents, in the order they were made (the
// driver's order is its own; tests compare sets).
static CUresult node_edges(CUgraphNode node, CUgraphNode* out, std::size_t* count, bool dependents) {
  std::lock_guard lock(mu);
  if (!count || !alive(node, Kind::node)) return CUDA_ERROR_INVALID_VALUE;
  const Node* me = reinterpret_cast<Node*>(node);
  std::vector<const Node*> edges;
  if (dependents) {
    for (const Node* n : me->owner->nodes)
      if (std::find(n->deps.begin(), n->deps.end(), me) != n->deps.end()) edges.push_back(n);
  } else {
    edges.assign(me->deps.begin(), me->deps.end());
  }
  if (out)
    for (std::size_t i = 0; i < *count && i < edges.size(); ++i)
      out[i] = reinterpret_cast<CUgraphNode>(const_cast<Node*>(edges[i]));
  *count = edges.size();
  return CUDA_SUCCESS;
}

CUresult fake_GraphNodeGetDependencies(CUgraphNode node, CUgraphNode* deps, std::size_t* count) {
  FAKE_ENTRY(GraphNodeGetDependencies);
  return node_edges(node, deps, count, false);
}

CUresult fake_GraphNodeGetDependentNodes(CUgraphNode node, CUgraphNode* deps, std::size_t* count) {
  FAKE_ENTRY(GraphNodeGetDependentNodes);
  return node_edges(node, deps, count, true);
}

CUresult fake_GraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph* out) {
  FAKE_ENTRY(GraphChildGraphNodeGetGraph);
  std::lock_guard lock(mu);
  if (!out || !alive(node, Kind::node)) return CUDA_ERROR_INVALID_VALUE;
  const Node* n = reinterpret_cast<Node*>(node);
  if (n->work.type != CU_GRAPH_NODE_TYPE_GRAPH || !n->child) return CUDA_ERROR_INVALID_VALUE;
  *out = reinterpret_cast<CUgraph>(n->child);
  return CUDA_SUCCESS;
}

CUresult fake_GraphAddDependencies(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to, std::size_t n) {
  FAKE_ENTRY(GraphAddDependencies);
  std::lock_guard lock(mu);
  if (!alive(graph, Kind::graph) || (n && (!from || !to))) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t i = 0; i < n; ++i) {
    if (!alive(from[i], Kind::node) || !alive(to[i], Kind::node) || from[i] == to[i]) return CUDA_ERROR_INVALID_VALUE;
    auto* f = reinterpret_cast<Node*>(from[i]);
    auto* t = reinterpret_cast<Node*>(to[i]);
    if (f->owner != reinterpret_cast<Graph*>(graph) || t->owner != f->owner) return CUDA_ERROR_INVALID_VALUE;
    if (std::find(t->deps.begin(), t->deps.end(), f) != t->deps.end()) return CUDA_ERROR_INVALID_VALUE;
  }
  for (std::size_t i = 0; i < n; ++i)
    reinterpret_cast<Node*>(to[i])->deps.push_back(reinterpret_cast<Node*>(from[i]));
  return CUDA_SUCCESS;
}

// A node's kernel from its parameters (as cuGraphAddKernelNode reads them).
static CUresult kernel_work(const CUDA_KERNEL_NODE_PARAMS_v2* p, Work& w) {
  if (!p || p->kern || !alive(p->func, Kind::function)) return CUDA_ERROR_INVALID_VALUE;
  // With no context current, the H200's driver (580) crashes in
  // cuGraphAddKernelNode_v2 and cuGraph[Exec]KernelNodeSetParams_v2
  // whatever p->ctx names (probed with raw driver calls, one process per
  // call; tests/gpu/gpu_graph.cpp runs oxicuda so on the H200); the fake
  // refuses instead, so that a caller who forgets is found here.
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  Func& f = *reinterpret_cast<Func*>(p->func);
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

// A 1D copy from its 3D parameters (the only shape oxicuda makes).
static CUresult memcpy_work(const CUDA_MEMCPY3D* p, Work& w) {
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


static CUresult memset_work(const CUDA_MEMSET_NODE_PARAMS* p, Work& w) {
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
  node->child = copy_graph(reinterpret_cast<Graph*>(child), map, false);
  node->child->parent = reinterpret_cast<Graph*>(graph);
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
  bool known = false;  // as the driver: only a graph allocation of this graph may be freed in it
  for (const Node* node : reinterpret_cast<Graph*>(graph)->nodes)
    known = known || (node->work.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && node->work.dptr == dptr);
  if (!known) return CUDA_ERROR_INVALID_VALUE;
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
  if (!conditionals.count(c.handle) || c.size != 1 || !c.ctx) return CUDA_ERROR_INVALID_VALUE;
  if (c.type != CU_GRAPH_COND_TYPE_IF && c.type != CU_GRAPH_COND_TYPE_WHILE) return CUDA_ERROR_INVALID_VALUE;
  Work w;
  w.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  Node* node = add_node(reinterpret_cast<Graph*>(graph), deps, n, std::move(w));
  node->handle = c.handle;
  node->cond_type = c.type;
  node->child = new Graph;  // the body: owned by the node, filled through the handle given back
  node->child->parent = reinterpret_cast<Graph*>(graph);
  live[node->child] = Kind::graph;  // a handle to add the body's nodes with (not counted: it has a parent)
  node->bodies[0] = reinterpret_cast<CUgraph>(node->child);
  c.phGraph_out = node->bodies;  // as the driver: an array it owns, valid for the node's lifetime
  *out = reinterpret_cast<CUgraphNode>(node);
  return CUDA_SUCCESS;
}

CUresult fake_GraphDebugDotPrint(CUgraph graph, const char* path, unsigned int flags) {
  FAKE_ENTRY(GraphDebugDotPrint);
  std::lock_guard lock(mu);
  if (!path || !alive(graph, Kind::graph)) return CUDA_ERROR_INVALID_VALUE;
  std::FILE* f = std::fopen(path, "w");
  if (!f) return CUDA_ERROR_OPERATING_SYSTEM;
  std::function<void(const Graph*, int&)> print = [&](const Graph* g, int& id) {
    const int me = id++;
    std::fprintf(f, "subgraph cluster_%d {\nlabel=\"graph_%d\";\n", me, me);
    std::unordered_map<const Node*, std::size_t> index;
    for (std::size_t i = 0; i < g->nodes.size(); ++i) index[g->nodes[i]] = i;
    for (std::size_t i = 0; i < g->nodes.size(); ++i) {
      const Node* n = g->nodes[i];
      std::fprintf(f, "\"graph_%d_node_%zu\"[label=\"%s", me, i, type_name(n->work.type));
      if (n->work.type == CU_GRAPH_NODE_TYPE_KERNEL) std::fprintf(f, "\\n%s", n->work.func->name.c_str());
      if ((flags & CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE) && n->work.type == CU_GRAPH_NODE_TYPE_KERNEL)
        std::fprintf(f, "\\ngrid (%u,%u,%u) block (%u,%u,%u)", n->work.grid[0], n->work.grid[1], n->work.grid[2],
                     n->work.block[0], n->work.block[1], n->work.block[2]);
      std::fprintf(f, "\"];\n");
      for (const Node* d : n->deps)
        std::fprintf(f, "\"graph_%d_node_%zu\" -> \"graph_%d_node_%zu\";\n", me, index[d], me, i);
    }
    for (const Node* n : g->nodes)
      if (n->child) print(n->child, id);
    std::fprintf(f, "}\n");
  };
  std::fprintf(f, "digraph dot {\n");
  int id = 0;
  print(reinterpret_cast<Graph*>(graph), id);
  std::fprintf(f, "}\n");
  std::fclose(f);
  return CUDA_SUCCESS;
}

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
      if (n->child && !allowed(n->child, in_body || t == CU_GRAPH_NODE_TYPE_CONDITIONAL)) return false;
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
  Graph* child = to->child;
  Graph* owner = to->owner;
  std::vector<Node*> deps = to->deps;
  to->work = from->work;
  to->handle = from->handle;
  to->cond_type = from->cond_type;
  to->child = child;
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

// --- user objects -------------------------------------------------------------------

CUresult fake_UserObjectCreate(CUuserObject* out, void* ptr, CUhostFn destroy, unsigned int refs, unsigned int flags) {
  FAKE_ENTRY(UserObjectCreate);
  // As the driver: the flag is required (no destructor synchronization).
  if (!out || !destroy || refs == 0 || flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  auto* u = new UserObject{ptr, destroy, static_cast<long>(refs)};
  live[u] = Kind::user_object;
  *out = reinterpret_cast<CUuserObject>(u);
  return CUDA_SUCCESS;
}

CUresult fake_UserObjectRelease(CUuserObject object, unsigned int count) {
  FAKE_ENTRY(UserObjectRelease);
  std::unique_lock lock(mu);
  Unlocked later{lock};
  if (!alive(object, Kind::user_object)) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (count == 0) return CUDA_ERROR_INVALID_VALUE;
  release(reinterpret_cast<UserObject*>(object), count);
  return CUDA_SUCCESS;
}

CUresult fake_GraphRetainUserObject(CUgraph graph, CUuserObject object, unsigned int count, unsigned int flags) {
  FAKE_ENTRY(GraphRetainUserObject);
  std::lock_guard lock(mu);
  if (!alive(graph, Kind::graph) || !alive(object, Kind::user_object) || count == 0 || flags > 1)
    return CUDA_ERROR_INVALID_VALUE;
  auto* u = reinterpret_cast<UserObject*>(object);
  if (flags != CU_GRAPH_USER_OBJECT_MOVE) u->refs += count;  // with MOVE the caller's references pass to the graph
  reinterpret_cast<Graph*>(graph)->user_refs[u] += count;
  return CUDA_SUCCESS;
}

FAKE_EXPORT void fake_hold_user_object_destructors(int hold) {
  std::vector<fake::UserObject*> list;
  {
    std::lock_guard lock(fake::mu);
    fake::hold_destructors = hold != 0;
    if (!hold) list.swap(fake::held_back);
  }
  fake::run_dying(std::move(list));
}
